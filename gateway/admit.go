package gateway

import (
	"context"
	"net/http"
	"time"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/backends/protocols"
	"github.com/llmedge/llmedge/boundary/reserve"
	"github.com/llmedge/llmedge/tenancy"
)

// admit checks the request's shape against the operator's caps (the
// model's, tightened by the principal's tier), then runs the Admitter,
// when there is one, with what the engine will read and generate. Without
// either the stage costs a few checks and nothing else.
func (p *Pipeline) admit(w http.ResponseWriter, r *http.Request, ex *Exchange) bool {
	m := p.Gateway.Models[ex.Chat.Model]
	if m == nil {
		return true // Serve answers that the model is not served here
	}
	caps := m.Caps
	if pr := ex.Principal; pr != nil && pr.Tier != "" {
		if tc, ok := p.TierCaps[pr.Tier]; ok {
			caps = caps.Tighter(tc)
		}
	}
	if p.Admitter == nil && caps.MaxPromptTokens <= 0 {
		if wr := ex.Chat.Wire; wr != nil && caps.MaxGenerations > 0 {
			if err := caps.CheckGenerations(reserve.Generations(wr)); err != nil {
				p.reject(w, ex, err, "")
				return false
			}
		}
		return true
	}
	a := &ex.Admission
	a.Principal, a.Model, a.Team = ex.Principal, ex.Chat.Model, ex.Team
	if ex.batch != nil {
		// A batch's line: its cost budgets charge the ledger's batch price.
		a.CostFactor = p.Gateway.Ledger.BatchFactor(ex.Chat.Model)
	}
	c := m.count(&ex.Chat)
	m.fill(a, &ex.Chat, &c)
	if err := caps.CheckGenerations(c.Generations, c.GenerationsMember); err != nil {
		p.reject(w, ex, err, "")
		return false
	}
	if err := caps.CheckPrompt(c.PromptTokens(), c.Largest); err != nil {
		p.reject(w, ex, err, "")
		return false
	}
	if p.Admitter == nil {
		return true
	}
	start := time.Now()
	t, err := p.Admitter.Admit(r.Context(), a, w.Header())
	ex.traceStage(r.Context(), SpanAdmit, start, err)
	if err != nil {
		if ex.batch != nil && api.PassesLater(err) {
			// A rate limit's window: the line is run when it has room,
			// not answered 429.
			ex.batch.busy = true
		}
		p.reject(w, ex, err, "")
		return false
	}
	ex.Ticket = t
	return true
}

// count is what the request asks of m's engine: for a body carried
// through, every member the engine reads (boundary/reserve), with the
// model's system message when the gateway adds one; for a request the
// door translates, its messages.
func (m *Model) count(chat *api.Chat) reserve.Count {
	if chat.Wire == nil {
		c := reserve.Count{Prompts: 1, Generations: 1, ReplyCap: chat.Sampling.MaxTokens, Largest: "messages"}
		c.Bytes, c.Messages = m.promptSize(chat)
		return c
	}
	c := reserve.Of(chat.Wire)
	if chat.SystemMessage == nil && m.SystemMessage != "" && (len(chat.Messages) == 0 || chat.Messages[0].Role != api.RoleSystem) {
		c.Bytes += len(m.SystemMessage) // the model's default, added on the way (call)
		c.Messages++
	}
	return c
}

// fill sets what a's limits reserve: every prompt's estimate, and the
// reply cap (the smallest the body gives under any name, within the
// model's max_tokens) for each generation of each prompt.
func (m *Model) fill(a *tenancy.Admission, chat *api.Chat, c *reserve.Count) {
	a.PromptBytes, a.Messages, a.ExtraTokens = c.Bytes, c.Messages, c.Tokens
	a.Prompts, a.Generations = c.Prompts, c.Generations
	a.MaxTokens = c.ReplyCap
	if m.MaxTokens > 0 && (a.MaxTokens == 0 || a.MaxTokens > m.MaxTokens) {
		a.MaxTokens = m.MaxTokens
	}
	if w := chat.Wire; w != nil && (w.Format == api.FormatOpenAIEmbeddings || w.Format == api.FormatAnthropicCountTokens) {
		a.MaxTokens = tenancy.NoReply // an embedding, a count: no tokens generated
	}
}

// route serves the request, then settles its ticket, even if serving
// panicked: a reservation never outlives its request.
func (p *Pipeline) route(w http.ResponseWriter, r *http.Request, ex *Exchange) {
	defer settle(ex) // the fallback's ticket too, when one served
	if p.Admitter != nil {
		ex.admits = p
	}
	p.Gateway.Serve(w, r, ex)
}

// admitFallback asks the admitters for the request on fallback model m,
// under m's own limits: the user's and key's were taken for the model
// asked for, and hold for the request whichever model serves it. The
// rate-limit headers stay those of that first admission.
func (p *Pipeline) admitFallback(ctx context.Context, ex *Exchange, m *Model) *api.Error {
	a := ex.Admission
	a.Principal, a.Model, a.Fallback = ex.Principal, m.Name, true
	c := m.count(&ex.Chat)
	m.fill(&a, &ex.Chat, &c)
	t, err := p.Admitter.Admit(ctx, &a, http.Header{})
	if err != nil {
		return err
	}
	ex.Ticket = tenancy.Join(ex.Ticket, t)
	return nil
}

func settle(ex *Exchange) {
	t := ex.Ticket
	if t == nil {
		return
	}
	ex.Ticket = nil
	t.Settle(tenancy.Settlement{Status: ex.Status, Served: ex.Attempts > 0,
		Usage: ex.Usage, UsageKnown: ex.UsageKnown, Relayed: ex.Relayed, Model: ex.ServedModel()})
}

// promptSize measures the prompt as upstreamMessages renders it, without
// building it.
func (m *Model) promptSize(chat *api.Chat) (bytes, messages int) {
	msgs := chat.Messages
	if chat.SystemMessage != nil {
		bytes, messages = len(*chat.SystemMessage), 1
		if len(msgs) > 0 && msgs[0].Role == api.RoleSystem {
			msgs = msgs[1:]
		}
	} else if m.SystemMessage != "" && (len(msgs) == 0 || msgs[0].Role != api.RoleSystem) {
		bytes, messages = len(m.SystemMessage), 1
	}
	for i := range msgs {
		bytes += msgs[i].Size()
	}
	return bytes, messages + len(msgs)
}

// completionTokens is a reply's size in tokens: the replica's count, or
// an estimate from its text (streamed bytes, or the whole answer).
func completionTokens(res *protocols.Result, streamed int) int {
	if res.UsageKnown {
		return res.Usage.CompletionTokens
	}
	return (max(streamed, len(res.Content)) + 3) / 4
}
