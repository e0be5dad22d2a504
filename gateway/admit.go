package gateway

import (
	"context"
	"net/http"
	"time"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/backends/protocols"
	"github.com/llmedge/llmedge/tenancy"
)

// admit runs the Admitter, when there is one: without one the stage costs
// a nil check and nothing else.
func (p *Pipeline) admit(w http.ResponseWriter, r *http.Request, ex *Exchange) bool {
	if p.Admitter == nil {
		return true
	}
	m := p.Gateway.Models[ex.Chat.Model]
	if m == nil {
		return true // Serve answers that the model is not served here
	}
	a := &ex.Admission
	a.Principal, a.Model, a.Team = ex.Principal, ex.Chat.Model, ex.Team
	a.PromptBytes, a.Messages = m.promptSize(&ex.Chat)
	a.MaxTokens = ex.Chat.Sampling.MaxTokens
	if m.MaxTokens > 0 && (a.MaxTokens == 0 || a.MaxTokens > m.MaxTokens) {
		a.MaxTokens = m.MaxTokens
	}
	if w := ex.Chat.Wire; w != nil && w.Format == api.FormatOpenAIEmbeddings {
		a.MaxTokens = tenancy.NoReply // an embedding generates no tokens
	}
	start := time.Now()
	t, err := p.Admitter.Admit(r.Context(), a, w.Header())
	ex.traceStage(r.Context(), SpanAdmit, start, err)
	if err != nil {
		p.reject(w, ex, err, "")
		return false
	}
	ex.Ticket = t
	return true
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
	a.PromptBytes, a.Messages = m.promptSize(&ex.Chat)
	a.MaxTokens = ex.Chat.Sampling.MaxTokens
	if m.MaxTokens > 0 && (a.MaxTokens == 0 || a.MaxTokens > m.MaxTokens) {
		a.MaxTokens = m.MaxTokens
	}
	if w := ex.Chat.Wire; w != nil && w.Format == api.FormatOpenAIEmbeddings {
		a.MaxTokens = tenancy.NoReply
	}
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
