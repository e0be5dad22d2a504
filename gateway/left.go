package gateway

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/llmedge/llmedge/backends/protocols"
	"github.com/llmedge/llmedge/limits"
)

// usageDrain is Gateway.UsageDrain; 0 when off.
func (g *Gateway) usageDrain() time.Duration { return max(g.UsageDrain, 0) }

// outliveClient is the context of a stream's attempt: ctx's values, and
// its end when the request's total time passes, but not at once when the
// client leaves: that only starts drain (within the total), during which
// the replica is read for the usage its stream ends with, the client's
// stream no longer written. A replica's stream is the only place its
// count of the tokens it generated comes from, and a request the client
// leaves is charged what it used, not 0. stop releases the context.
func outliveClient(ctx context.Context, drain time.Duration) (actx context.Context, cancel context.CancelCauseFunc, stop func()) {
	actx, cancel = context.WithCancelCause(context.WithoutCancel(ctx))
	var mu sync.Mutex
	var timer *time.Timer
	stopped := false
	after := context.AfterFunc(ctx, func() {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			cancel(context.Cause(ctx)) // the total: no drain past it
			return
		}
		d := drain
		if dl, ok := ctx.Deadline(); ok {
			d = min(d, time.Until(dl))
		}
		mu.Lock()
		defer mu.Unlock()
		if !stopped {
			timer = time.AfterFunc(d, func() { cancel(errClientGone) })
		}
	})
	return actx, cancel, func() {
		after()
		mu.Lock()
		stopped = true
		if timer != nil {
			timer.Stop()
		}
		mu.Unlock()
		cancel(nil)
	}
}

// clientLeft settles ex, whose client left: 499, with the replica's own
// count when the attempt read the answer to its end (res, within the
// drain), and otherwise with what the gateway counted: the prompt's
// estimate (as the limits reserve it) and the tokens relayed (one per
// token event, as engines stream them). That count stands for the
// replica's in the ledger and in the limits' settlement alike
// (UsageKnown): a request the client leaves is charged what it used,
// never 0. A request that reached no replica used nothing.
func (g *Gateway) clientLeft(ex *Exchange, m *Model, res *protocols.Result) {
	ex.Status = statusClientGone
	if res != nil && res.UsageKnown {
		ex.Usage, ex.UsageKnown = res.Usage, true
		ex.Finish = res.FinishReason
		return
	}
	if ex.Attempts == 0 || ex.UsageKnown {
		return
	}
	bytes, messages := ex.Admission.PromptBytes, ex.Admission.Messages
	if bytes == 0 && messages == 0 {
		bytes, messages = m.promptSize(&ex.Chat)
	}
	u := &ex.Usage
	// The prompt as admission counted it: every member the engine read
	// (tools, documents, every prompt of a batch), not only the messages.
	u.PromptTokens = limits.EstimateTokens(bytes, messages) + ex.Admission.ExtraTokens
	u.CompletionTokens = ex.relayedTokens
	u.TotalTokens = u.PromptTokens + u.CompletionTokens
	ex.UsageKnown = true
}
