package gateway

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/backends"
	"github.com/llmedge/llmedge/metrics"
	"github.com/llmedge/llmedge/pool"
)

// Gateway serves inference requests for a set of models.
type Gateway struct {
	Models map[string]*Model
	// Client sends requests to replicas; it owns dialing and connection
	// reuse, while per-request deadlines come from the Model's Timeouts.
	Client *http.Client
	// PingInterval spaces ": ping" comments while a stream waits for its
	// first token; 0 means 15 s, negative turns pings off.
	PingInterval time.Duration
	// MaxAttempts bounds tries on distinct replicas; 0 means 3.
	MaxAttempts int
	Logger      *zap.Logger
	// Metrics, when set, records every request.
	Metrics *metrics.Metrics
}

// DefaultPingInterval is the keep-alive period of DESIGN.md §1.
const DefaultPingInterval = 15 * time.Second

var (
	errFirstTokenTimeout = errors.New("no first token in time")
	errIdleTimeout       = errors.New("no token in time")
)

// Serve answers the validated request in ex. It always streams from the
// replica, even for a non-streamed client: the first-token and idle
// timeouts then catch a hung replica long before the total timeout, and a
// replica that dies mid-answer can be retried elsewhere while the client
// has seen nothing.
func (g *Gateway) Serve(w http.ResponseWriter, r *http.Request, ex *Exchange) {
	defer g.observe(ex)
	req := ex.Request
	m := g.Models[req.ModelType]
	if m == nil {
		ex.Status = http.StatusServiceUnavailable
		api.NewError(http.StatusServiceUnavailable, "model '"+req.ModelType+"' is not served here").
			WithHeader("Retry-After", "5").Write(w)
		return
	}
	to := m.Timeouts.withDefaults()
	ctx, cancel := context.WithTimeout(r.Context(), to.Total)
	defer cancel()

	var sse *sseWriter
	if req.Stream {
		sse = newSSEWriter(w, serverTiming(ex, 0))
		sse.keepAlive(g.pingInterval())
		defer sse.close()
	}

	var content strings.Builder
	var tried []*pool.Replica
	var lastErr error
	maxAttempts := g.maxAttempts(m)
	for attempt := 1; attempt <= maxAttempts; attempt++ {
		if attempt > 1 && m.TryDuration > 0 && time.Since(ex.Start) >= m.TryDuration {
			break // no time left for another try
		}
		queued := time.Now()
		lease, err := m.Pool.AcquireWait(ctx, tried)
		ex.Queue += time.Since(queued)
		if err != nil {
			if r.Context().Err() != nil {
				ex.Status = statusClientGone
				return // the client left while queued
			}
			if lastErr == nil {
				lastErr = err
			}
			break
		}
		rep := lease.Replica
		tried = append(tried, rep)
		ex.Attempts, ex.Replica = attempt, rep.URL
		content.Reset()
		res, err := g.attempt(ctx, m, rep, req, sse, &content, to, ex)
		clientGone := r.Context().Err() != nil || errors.Is(err, errClientGone)
		lease.Release(outcome(err, clientGone)) // exactly once per Acquire, streams included
		if err == nil {
			g.succeed(w, sse, ex, res, content.String())
			return
		}
		lastErr = err
		if clientGone {
			ex.Status = statusClientGone
			return // nobody to answer; the replica request is already cancelled
		}
		g.logger().Warn("replica attempt failed",
			zap.String("request_id", ex.RequestID), zap.String("model_type", m.Name),
			zap.String("replica", rep.URL), zap.Int("attempt", attempt), zap.Error(err))
		if !retryable(err) || ctx.Err() != nil || (sse != nil && sse.isStarted()) {
			break
		}
	}
	if ctx.Err() != nil && r.Context().Err() == nil {
		lastErr = &backends.Error{Kind: backends.KindTimeout, Message: "the request exceeded its total time limit", Err: ctx.Err()}
	}
	g.fail(w, sse, m, ex, lastErr)
}

// outcome classifies an attempt for the replica's breaker (DESIGN.md §3):
// connection errors, timeouts, 5xx and broken streams are failures; the
// replica's 4xx about the request is a working replica; the client's
// cancellation and the replica's "overloaded" say nothing either way.
func outcome(err error, clientGone bool) pool.Outcome {
	switch {
	case err == nil:
		return pool.Success
	case clientGone:
		return pool.Excluded
	}
	var be *backends.Error
	if errors.As(err, &be) {
		switch be.Kind {
		case backends.KindBadRequest:
			return pool.Success
		case backends.KindOverloaded:
			return pool.Excluded
		}
	}
	return pool.Failure
}

// attempt runs the request on one replica, relaying deltas to the stream
// (if any) and collecting the text.
func (g *Gateway) attempt(ctx context.Context, m *Model, rep *pool.Replica, req *api.InferenceRequest,
	sse *sseWriter, content *strings.Builder, to Timeouts, ex *Exchange) (*backends.Result, error) {
	actx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var gotFirst atomic.Bool
	watchdog := time.AfterFunc(to.FirstToken, func() {
		if gotFirst.Load() {
			cancel(errIdleTimeout)
		} else {
			cancel(errFirstTokenTimeout)
		}
	})
	defer watchdog.Stop()

	start := time.Now()
	onDelta := func(text string) error {
		if !gotFirst.Load() {
			gotFirst.Store(true)
			ex.TTFT = time.Since(start)
			if sse != nil {
				// The headers go out with the first token: report the
				// upstream time so far, with this attempt's time to it.
				st := *ex
				st.Upstream += ex.TTFT
				sse.setTiming(serverTiming(&st, 0))
			}
		}
		watchdog.Reset(to.Idle)
		content.WriteString(text)
		if sse == nil {
			return nil
		}
		return sse.write(appendEvent(nil, "", marshal(api.StreamDelta{Content: text})))
	}
	breq := &backends.Request{
		BaseURL:     rep.URL,
		Model:       m.upstreamModel(rep),
		Messages:    m.upstreamMessages(req),
		Temperature: req.Temperature,
		MaxTokens:   m.MaxTokens,
		APIKey:      m.apiKey(rep),
	}
	client := m.Client
	if client == nil {
		client = g.Client
	}
	res, err := m.backendFor(rep).Chat(actx, client, breq, onDelta)
	ex.Upstream += time.Since(start)
	if err != nil {
		switch cause := context.Cause(actx); {
		case errors.Is(cause, errFirstTokenTimeout), errors.Is(cause, errIdleTimeout):
			return nil, &backends.Error{Kind: backends.KindTimeout, Message: "replica sent " + cause.Error(),
				Started: gotFirst.Load(), Err: cause}
		}
		return nil, err
	}
	return res, nil
}

// retryable reports whether another replica may succeed where this failed.
func retryable(err error) bool {
	var be *backends.Error
	if !errors.As(err, &be) {
		return false
	}
	return be.Kind != backends.KindBadRequest
}

func (g *Gateway) succeed(w http.ResponseWriter, sse *sseWriter, ex *Exchange, res *backends.Result, content string) {
	if res.UsageKnown {
		ex.Usage = res.Usage
	}
	done := res.Done
	if done.IsZero() {
		done = time.Now()
	}
	resp := api.InferenceResponse{
		Content:       content,
		ModelType:     ex.Request.ModelType,
		Usage:         ex.Usage,
		InferenceTime: seconds(done.Sub(res.Sent)),
		MessageCount:  len(ex.Request.Messages),
	}
	if !res.UsageKnown {
		// Never invent numbers: the zeros are flagged as unknown.
		resp.UsageReported = api.UsageNotReported()
	}
	total := time.Since(ex.Start)
	resp.ProcessingTime = seconds(total)
	ex.Status = http.StatusOK
	if sse != nil {
		_ = sse.write(appendEvent(nil, "done", marshal(resp)))
		return
	}
	w.Header().Set("Server-Timing", serverTiming(ex, total))
	api.WriteJSON(w, http.StatusOK, resp)
}

// statusClientGone is what logs and metrics call a request whose client
// left before the answer (nginx's convention).
const statusClientGone = 499

// Observe records ex in the metrics, once: the stage that ends the
// request calls it.
func (g *Gateway) Observe(ex *Exchange) { g.observe(ex) }

func (g *Gateway) observe(ex *Exchange) {
	if g.Metrics == nil || ex.observed {
		return
	}
	ex.observed = true
	model := "none"
	if ex.Request != nil {
		model = ex.Request.ModelType
	}
	g.Metrics.ObserveRequest(metrics.Request{
		ModelType: model, Status: ex.Status,
		Total: time.Since(ex.Start), Upstream: ex.Upstream, TTFT: ex.TTFT, Attempts: ex.Attempts,
		PromptTokens: ex.Usage.PromptTokens, CompletionTokens: ex.Usage.CompletionTokens,
	})
}

func (g *Gateway) pingInterval() time.Duration {
	if g.PingInterval == 0 {
		return DefaultPingInterval
	}
	return g.PingInterval
}

func (g *Gateway) maxAttempts(m *Model) int {
	if m.MaxAttempts > 0 {
		return m.MaxAttempts
	}
	if g.MaxAttempts <= 0 {
		return 3
	}
	return g.MaxAttempts
}

func (g *Gateway) logger() *zap.Logger {
	if g.Logger == nil {
		return zap.NewNop()
	}
	return g.Logger
}
