package gateway

import (
	"strconv"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/backends/pool"
	"github.com/llmedge/llmedge/backends/protocols"
)

// Mid-stream continuation: when the replica serving a stream fails after
// the client has seen text (its connection reset, an error in the
// stream, the idle timeout), the request is sent to another replica with
// the text so far as a final assistant message to continue from
// (protocols.Request.Continue), and what that replica writes is spliced
// into the same client stream: one answer, one finish reason, no error
// event. A stream that carried output other than text (a tool call,
// reasoning) is never spliced: it ends with an error event, as without
// continuation.

// DefaultContinuations is how many continuations in a row may bring no
// text before a stream is given up, when the model sets no bound.
const DefaultContinuations = 3

// MaxContinuations caps the continuations of one stream, whatever they
// bring: a stream is continued as often as its replicas die (a rolling
// restart takes each of them down in turn) within the request's total
// timeout, but an answer that breaks every replica it reaches (a
// request that crashes the engine) is not carried around the fleet
// forever.
const MaxContinuations = 16

// splice is what the attempts of one request know of its stream, for a
// continuation.
type splice struct {
	// continuing: the attempt under way continues the stream.
	continuing bool
	// tokens counts the text events of the attempt under way.
	tokens int
	// opaque: an event carried output other than text.
	opaque bool
	// last is the last event written to the client (a span of the
	// attempt's buffer, valid until the next attempt begins).
	last []byte
	// before is the completion tokens of the attempts before the one
	// under way; after lists, per continuation, the tokens it continued
	// after (for the route trailer and the logs).
	before int
	after  []int
	// cause is the failure that broke the stream first.
	cause error
	// stalled counts the continuations in a row that brought no text;
	// failed lists the replicas that failed the stream since it last
	// brought text: a continuation goes to none of them, while one that
	// failed before the last text, restarted since, may take it.
	stalled int
	failed  []*pool.Replica
}

// continues reports whether p can continue call (a copy: only a
// continuation pays for it).
func continues(p protocols.Protocol, call protocols.Request) bool {
	return protocols.Continues(p, &call)
}

// continuations is the model's bound on the continuations in a row that
// bring no text.
func (m *Model) continuations() int {
	switch {
	case m.Continuations < 0:
		return 0
	case m.Continuations == 0:
		return DefaultContinuations
	}
	return m.Continuations
}

// mayContinue reports whether a stream whose attempt failed with err,
// after the client saw some of it (recorded by failedOn), may be
// continued on another replica: as long as its continuations bring text
// (and the total timeout, which the caller checks, allows), up to
// MaxContinuations; after the model's bound of continuations in a row
// that brought none, it is not.
func mayContinue(m *Model, ex *Exchange, sp *splice, err error) bool {
	bound := m.continuations()
	if bound == 0 || len(sp.after) >= MaxContinuations || sp.opaque || sp.tokens == 0 && sp.before == 0 || !retryable(err) {
		return false
	}
	if sp.stalled >= bound {
		return false // this continuation brought nothing, nor the ones before it
	}
	if _, ok := ex.Door.(Continuer); !ok {
		return false
	}
	return true
}

// failedOn records that rep failed the stream, for the choice of the
// next continuation's replica: a stream that brought text since its last
// failures forgets them (those replicas may be back).
func (sp *splice) failedOn(rep *pool.Replica) {
	if sp.tokens > 0 {
		sp.failed, sp.stalled = sp.failed[:0], 0
	} else if sp.continuing {
		sp.stalled++
	}
	sp.failed = append(sp.failed, rep)
}

// continuation is call, asked to continue text, which holds tokens
// tokens: the reply cap lowered by them. ok is false when the cap is
// reached (nothing is left to continue).
//
// A request in a format that has no way to ask for a continuation
// (Anthropic's Messages) is continued through its door's translation into
// OpenAI's chat format, which has (the door writes the translation's
// events as the same stream's).
func continuation(call protocols.Request, text string, tokens int) (protocols.Request, bool) {
	if w := call.Wire; w != nil && w.Format == api.FormatAnthropicMessages && w.Translate != nil {
		tw, err := w.Translate()
		if err != nil || tw == nil {
			return call, false
		}
		call.Wire = tw
	}
	call.Continue = text
	if call.MaxTokens > 0 {
		left := call.MaxTokens - tokens
		if left <= 0 {
			return call, false
		}
		call.MaxTokens = left
		if call.Wire != nil {
			call.CapTokens = left
		}
	}
	return call, true
}

// ContinuedUsage is the usage of a continued answer, made of u, the
// usage the continuation's replica reported, and before, the completion
// tokens received from the replicas before it: the continuation's prompt
// held them as its final message, so the first attempt's prompt is its
// prompt less them, and the answer's completion tokens are its own and
// them. (Exact when each event carried one token, as vLLM, SGLang and
// Ollama send them; an estimate otherwise.)
func ContinuedUsage(u api.Usage, before int) api.Usage {
	if p := u.PromptTokens - before; p > 0 {
		u.PromptTokens = p
	}
	u.CompletionTokens += before
	u.TotalTokens = u.PromptTokens + u.CompletionTokens
	return u
}

// appendContinued appends to a Llmedge-Route value how its stream was
// continued: "; continued=<n>; after=<tokens>[,<tokens>...]".
func appendContinued(b []byte, after []int) []byte {
	b = append(b, "; continued="...)
	b = strconv.AppendInt(b, int64(len(after)), 10)
	b = append(b, "; after="...)
	for i, n := range after {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, int64(n), 10)
	}
	return b
}
