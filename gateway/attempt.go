package gateway

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"time"

	"github.com/llmedge/llmedge/backends/pool"
	"github.com/llmedge/llmedge/backends/protocols"
)

var (
	errFirstTokenTimeout = errors.New("no first token in time")
	errIdleTimeout       = errors.New("no token in time")
	errResponseTimeout   = errors.New("no complete answer in time")
)

// attempt runs the request on one replica, relaying deltas to the stream
// (if any) and collecting the text.
//
// The replica is asked for a stream when the client asked for one, or when
// the model streams upstream always: the first-token and idle timeouts
// then catch a hung replica long before the total timeout. Otherwise it is
// asked for one JSON answer, as a plain proxy would, which costs both
// sides less; ResponseTimeout, when set, bounds that call.
func (g *Gateway) attempt(ctx context.Context, m *Model, rep *pool.Replica, call protocols.Request,
	sse *sseWriter, ans *Answer, content *strings.Builder, to Timeouts, ex *Exchange, sp *splice, firstToken func()) (*protocols.Result, error) {
	call.BaseURL, call.Model, call.APIKey = rep.URL, m.upstreamModel(rep), m.apiKey(rep)
	if ex.Adapter != "" && m.Adapters != nil {
		call.Model = ex.Adapter // vLLM serves an adapter under its own name
	}
	backend := m.backendFor(rep)
	if w := call.Wire; w != nil && w.Translate != nil && !protocols.Speaks(backend, w.Format) {
		// The replica's protocol does not take the door's format: it gets
		// the door's translation into OpenAI's chat format.
		tw, err := w.Translate()
		if err != nil {
			return nil, err
		}
		call.Wire = tw
	}
	g.engineMembers(m, backend, ex, &call)
	client := m.Client
	if client == nil {
		client = g.Client
	}
	start := time.Now()

	if sse == nil && !m.StreamUpstream {
		cctx := ctx
		if to.Response > 0 {
			var cancel context.CancelFunc
			cctx, cancel = context.WithTimeoutCause(ctx, to.Response, errResponseTimeout)
			defer cancel()
		}
		res, err := backend.Chat(cctx, client, &call, nil)
		ex.Upstream += time.Since(start)
		if err == nil {
			ex.TTFT = res.FirstByte.Sub(res.Sent)
			ex.traceFirstToken(ctx, res.Sent, res.FirstByte)
		}
		return res, timeoutCause(cctx, err, false)
	}

	// A client that wants one answer of a request carried through gets
	// the one its protocol makes of the stream.
	call.Whole = sse == nil && call.Wire != nil
	var actx context.Context
	var cancel context.CancelCauseFunc
	drain := g.usageDrain()
	if sse != nil && drain > 0 {
		// The client's stream: its leaving does not end the replica's at
		// once (outliveClient).
		var stop func()
		actx, cancel, stop = outliveClient(ctx, drain)
		defer stop()
	} else {
		actx, cancel = context.WithCancelCause(ctx)
	}
	defer cancel(nil)
	left := false // the client is gone: the replica is read for its usage only
	var gotFirst atomic.Bool
	watchdog := time.AfterFunc(to.FirstToken, func() {
		if gotFirst.Load() {
			cancel(errIdleTimeout)
		} else {
			cancel(errFirstTokenTimeout)
		}
	})
	defer watchdog.Stop()
	// Events before the first token (a stream's opening chunk) are held
	// back with the client's stream unstarted, so that another replica may
	// still be tried; the first token releases them. A continuation's are
	// dropped: the client has had the stream's opening already.
	var buf, held []byte
	onDelta := func(d *protocols.Delta) error {
		first := d.Token && !gotFirst.Load()
		if first {
			gotFirst.Store(true)
			firstToken() // its prefill no longer queues ahead of others
			if !sp.continuing {
				ex.TTFT = time.Since(start)
				ex.traceFirstToken(ctx, start, start.Add(ex.TTFT))
			}
			if sse != nil && !sp.continuing {
				// The headers go out with the first token: report the
				// upstream time so far, with this attempt's time to it.
				st := *ex
				st.Upstream += ex.TTFT
				sse.setTiming(serverTiming(&st, 0))
			}
		}
		if gotFirst.Load() {
			watchdog.Reset(to.Idle)
		}
		if d.Token {
			ex.relayedTokens++
			// What a continuation needs to know of the stream: its tokens
			// so far, and whether it carried output other than text (a
			// tool call, reasoning), which is never spliced.
			if d.Text != "" {
				sp.tokens++
			} else {
				sp.opaque = true
			}
		}
		content.WriteString(d.Text)
		ex.Relayed += len(d.Text)
		if sse == nil || left {
			return nil
		}
		if drain > 0 && ctx.Err() != nil {
			left = true // the client left (or the total passed): read on, write no more
			return nil
		}
		buf = ex.Door.AppendDelta(buf[:0], ans, d)
		if len(buf) == 0 {
			return nil
		}
		if !gotFirst.Load() {
			if !sp.continuing {
				held = append(held, buf...)
			}
			return nil
		}
		ans.Deltas++
		var err error
		if first && len(held) > 0 {
			held = append(held, buf...)
			sp.last = held
			err = sse.write(held)
			held = nil
		} else {
			sp.last = buf
			err = sse.write(buf)
		}
		if err != nil && drain > 0 {
			left = true // read on for the usage
			return nil
		}
		return err
	}
	res, err := backend.Chat(actx, client, &call, onDelta)
	ex.Upstream += time.Since(start)
	if err == nil && len(held) > 0 && !left {
		err = sse.write(held) // a stream that ended without a token
	}
	if left {
		// The client is gone; res, when the replica's stream was read to
		// its end, holds its usage (clientLeft).
		return res, errClientGone
	}
	return res, timeoutCause(actx, err, gotFirst.Load())
}

// timeoutCause turns the cancellation of an attempt by one of its own
// timers into a timeout error the client can be told about.
func timeoutCause(actx context.Context, err error, started bool) error {
	if err == nil {
		return nil
	}
	switch cause := context.Cause(actx); {
	case errors.Is(cause, errFirstTokenTimeout), errors.Is(cause, errIdleTimeout), errors.Is(cause, errResponseTimeout):
		return &protocols.Error{Kind: protocols.KindTimeout, Message: "replica sent " + cause.Error(),
			Started: started, Err: cause}
	}
	return err
}
