package gateway

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/llmedge/llmedge/backends/protocols"
	"github.com/llmedge/llmedge/limits"
)

// DefaultUsageDrain is how long a stream's replica is still read once its
// client has left, for the usage its last event reports.
const DefaultUsageDrain = 2 * time.Second

// usageDrain is Gateway.UsageDrain with its default; 0 when off.
func (g *Gateway) usageDrain() time.Duration {
	switch {
	case g.UsageDrain == 0:
		return DefaultUsageDrain
	case g.UsageDrain < 0:
		return 0
	}
	return g.UsageDrain
}

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
// count when the attempt read the answer to its end (res), and otherwise
// an estimate, the prompt's and the answer's text received at about 4
// bytes a token, as the limits settle it. A request that reached no
// replica used nothing.
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
	u.PromptTokens = limits.EstimateTokens(bytes, messages)
	u.CompletionTokens = (ex.Relayed + 3) / 4
	u.TotalTokens = u.PromptTokens + u.CompletionTokens
}
