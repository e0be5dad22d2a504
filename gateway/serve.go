package gateway

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/auth"
	"github.com/llmedge/llmedge/backends/pool"
	"github.com/llmedge/llmedge/backends/protocols"
	"github.com/llmedge/llmedge/boundary/partition"
	"github.com/llmedge/llmedge/ledger"
	"github.com/llmedge/llmedge/metrics"
	"github.com/llmedge/llmedge/status"
)

// Gateway serves chat requests for a set of models: the last stage of the
// pipeline.
type Gateway struct {
	Models map[string]*Model
	// Status, when set, hears every answered request for the operators'
	// status page (rates, time to first token, users' tokens and refusals).
	Status *status.Recorder
	// Client sends requests to replicas; it owns dialing and connection
	// reuse, while per-request deadlines come from the Model's Timeouts.
	Client *http.Client
	// UsageDrain, when positive, is how long a stream's replica is still
	// read once its client has left, for the usage its end reports (within
	// the request's total timeout). Otherwise, and past it, the replica's
	// request ends and the tokens relayed are counted (clientLeft).
	UsageDrain time.Duration
	// PingInterval spaces ": ping" comments while a stream waits for its
	// first token; 0 means 15 s, negative turns pings off.
	PingInterval time.Duration
	// MaxAttempts bounds tries on distinct replicas; 0 means 3.
	MaxAttempts int
	Logger      *zap.Logger
	// Metrics, when set, records every request.
	Metrics *metrics.Metrics
	// Ledger, when set, is handed a record of every authenticated
	// request once it is answered (usage and cost, per user and model).
	Ledger *ledger.Writer
	// Dependencies are services beyond the replicas that the readiness
	// report checks (the credentials, the shared limit store).
	Dependencies []Dependency
	// ReadyLog, when set, logs the changes of readiness the reports show
	// (ObserveReadiness).
	ReadyLog *ReadyLog
	// Shares are the limits tiers' weights in the fair wait queue
	// (auth.Principal.Tier → pool.Request.Share); a principal without a
	// tier, or of a tier without one, has share 1.
	Shares map[string]float64
	// PriorityOf is the class of work of a principal's requests (its API
	// key's, its user's); nil makes every request standard.
	PriorityOf func(*auth.Principal) api.Priority
	// Aliases map each alias to the model it names (a key of Models).
	Aliases map[string]string
	// FallbackOff makes a request go to its models' fallbacks only when
	// it asks for them (Llmedge-No-Fallback: 0); by default every request
	// may, unless it refuses (Llmedge-No-Fallback: 1).
	FallbackOff bool
	// CacheKeys, when set, derive each request's cache partition's keys
	// (boundary/partition): its key in the prefix index, its engine
	// salt. Nil leaves the index one partition per model, and salts none.
	CacheKeys *partition.Keys
}

// DefaultPingInterval is the keep-alive period of a stream waiting for its
// first token.
const DefaultPingInterval = 15 * time.Second

// Serve answers the authorized request in ex: it picks a replica of the
// model, calls it, retries on another replica while the client has seen
// nothing, and answers through ex.Door.
func (g *Gateway) Serve(w http.ResponseWriter, r *http.Request, ex *Exchange) {
	ex.admitted = true
	defer g.observe(ex)
	chat := &ex.Chat
	m := g.Models[chat.Model]
	if m == nil {
		ex.Status = http.StatusServiceUnavailable
		ex.Door.WriteError(w, api.NewError(http.StatusServiceUnavailable, "model '"+chat.Model+"' is not served here").
			WithHeader("Retry-After", "5"))
		return
	}
	if refused(w, ex, m) {
		return
	}
	if ex.batch != nil {
		defer g.startBatch(m)()
	}
	serving := m
	if len(m.Rollout) > 0 {
		// A rollout: the share that serves this conversation stands in for
		// the model (its replicas, policy, timeouts), while the scope, the
		// limits, the fallbacks and the answer's name stay the model's.
		if serving = g.rolloutTarget(m, chat); serving == nil {
			serving = m
		} else {
			ex.Rollout = serving.Name
		}
		if serving != m && refused(w, ex, serving) {
			return // the share's own policy refuses what the body carries
		}
	}
	to := serving.Timeouts.withDefaults()
	ctx, cancel := context.WithTimeout(r.Context(), to.Total)
	defer cancel()
	ctx, span := ex.traceRoute(ctx)
	defer ex.endRoute(span)

	ans := &Answer{ID: ex.RequestID, Model: chat.Name(), Created: ex.Start,
		MessageCount: len(chat.Messages), IncludeUsage: chat.IncludeUsage}
	var sse *sseWriter
	if chat.Stream {
		sse = newSSEWriter(w, serverTiming(ex, 0))
		sse.keepAlive(g.pingInterval())
		defer sse.close()
	}

	err := g.tryModel(ctx, w, r, ex, serving, sse, ans, to)
	if err == nil {
		return // answered, or the client left
	}
	if g.mayFallBack(r, ex, sse, ctx, err) {
		primaryRoute := w.Header().Get(routeHeader) // written by this goroutine alone
		for _, name := range m.Fallbacks {
			fm := g.fallbackModel(r, ex, name)
			if fm == nil || refusedMember(fm, ex) != "" {
				continue // nor one whose policy refuses what the body carries
			}
			ex.Fallback, ans.Model = fm.Name, fm.Name
			ferr := g.tryModel(ctx, w, r, ex, fm, sse, ans, fm.Timeouts.withDefaults())
			if ferr == nil {
				return
			}
			if !g.mayFallBack(r, ex, sse, ctx, ferr) {
				// The fallback's replicas took the request and failed it
				// (a timeout, the model's refusal): that is the answer.
				g.fail(w, sse, fm, ex, ans, ferr)
				return
			}
		}
		// No fallback could take it either: the model asked for is the
		// one that is unavailable, and its route is the one to show.
		if ex.Fallback != "" {
			if sse != nil {
				sse.restoreHeader(routeHeader, primaryRoute)
			} else {
				restoreHeader(w.Header(), routeHeader, primaryRoute)
			}
		}
		ex.Fallback, ans.Model = "", chat.Name()
	}
	if ctx.Err() != nil && r.Context().Err() == nil {
		err = &protocols.Error{Kind: protocols.KindTimeout, Message: "the request exceeded its total time limit", Err: ctx.Err()}
	}
	g.fail(w, sse, m, ex, ans, err)
}

// tryModel runs the request's attempts on m's replicas. It returns nil
// once the client has its answer (or has left), and otherwise the error
// that ended the attempts, with nothing answered yet (but a stream that
// has started).
func (g *Gateway) tryModel(ctx context.Context, w http.ResponseWriter, r *http.Request, ex *Exchange,
	m *Model, sse *sseWriter, ans *Answer, to Timeouts) error {
	chat := &ex.Chat
	call := m.call(chat)
	if r := ex.Admission.Reply; r > 0 {
		// What the limits reserved for each generation is the most any
		// may take, under every name the engine honours.
		if chat.Wire != nil && (call.CapTokens == 0 || r < call.CapTokens) {
			call.CapTokens = r
		}
		if call.MaxTokens == 0 || r < call.MaxTokens {
			call.MaxTokens = r
		}
	}
	if len(m.EnginePriority) == len(api.Priorities) {
		class := ex.Priority.Index()
		call.Priority = &m.EnginePriority[class]
		if f := m.EngineFair; f != nil {
			// The tenant's level from its share before this request, which
			// is then counted by its prompt (its reply when it ends).
			tenant := ex.tenant()
			ex.enginePriority = f.Priority(m.EnginePriority[class], class, tenant)
			call.Priority = &ex.enginePriority
			f.Charge(class, tenant, promptEstimate(call.Messages))
		}
	}
	preq := &ex.preq
	*preq = pool.Request{Model: m.Name, Messages: call.Messages, Header: r.Header, Priority: ex.Priority,
		Partition: g.indexKey(m, ex), NoWait: ex.batch != nil, EngineByClass: byClass(m)}
	if chat.Wire != nil && chat.Wire.Format == api.FormatOpenAIEmbeddings {
		preq.Messages = nil // an embedding reuses no cached prefix: no affinity to it
	}
	adapter := ""
	if ex.Adapter != "" && m.Adapters != nil {
		adapter = ex.Adapter
		preq.Messages = adapterKeyed(preq.Messages, adapter)
	}
	if ex.Principal != nil {
		preq.User = ex.Principal.Subject
		if t := ex.Principal.Tier; t != "" && g.Shares != nil {
			preq.Share = g.Shares[t]
		}
	}
	content := &ex.content
	content.Reset()
	var tried []*pool.Replica
	var lastErr error
	sp := &ex.splice // in the exchange: no allocation of its own on the hot path
	cur := call      // the call of the attempt: a continuation's holds the text so far
	maxAttempts := g.maxAttempts(m)
	// Continuations do not spend the tries before the first token.
	for attempt := 1; attempt <= maxAttempts+len(sp.after); attempt++ {
		if attempt > 1 && !sp.continuing && m.TryDuration > 0 && time.Since(ex.Start) >= m.TryDuration {
			break // no time left for another try
		}
		queued := time.Now()
		preq.Waited = ex.Queue // the queue limit bounds the request's waits together
		lease, err := g.acquire(ctx, m, ex, preq, adapter, tried)
		if err != nil && sp.continuing && errors.Is(err, pool.ErrNoReplicas) && len(sp.failed) < len(tried) {
			// Every replica has failed this stream once: those that
			// failed before it last brought text may be back (a rolling
			// restart takes them down in turn).
			lease, err = g.acquire(ctx, m, ex, preq, adapter, sp.failed)
		}
		ex.Queue += time.Since(queued)
		if errors.Is(err, pool.ErrShed) {
			ex.Shed = true
		}
		ex.traceSelect(ctx, attempt, queued, lease.Choice, err)
		if err != nil {
			if r.Context().Err() != nil {
				ex.Status = statusClientGone
				return nil // the client left while queued
			}
			if lastErr == nil {
				lastErr = err
			}
			break
		}
		rep := lease.Replica
		if sp.continuing && !continues(m.backendFor(rep), cur) {
			// A replica whose protocol cannot continue an answer (another
			// llmedge): the stream ends with the failure it had.
			lease.Release(pool.Excluded)
			break
		}
		endAdapter := noAdapter
		if adapter != "" {
			endAdapter = m.Adapters.Begin(rep, adapter) // not unloaded under the attempt
		}
		if sp.continuing {
			ex.Continued = sp.after
		}
		tried = append(tried, rep)
		ex.Attempts++
		ex.Replica, ex.Choice = rep.URL, lease.Choice
		ex.Policy = m.Policy
		rv := routeValue(m.Policy, lease.Choice)
		if ex.Rollout == m.Name {
			rv += "; rollout=" + m.Name
		}
		if ex.Fallback != "" {
			rv += "; model=" + m.Name + "; fallback_from=" + ex.Chat.Model
		}
		switch {
		case sp.continuing:
			// The headers are out: where the stream went on is told in
			// the trailer of the same name.
			sse.setTrailer(routeHeader, string(appendContinued([]byte(rv), sp.after)))
		case sse != nil:
			sse.setHeader(routeHeader, rv)
		default:
			w.Header()[routeHeader] = []string{rv}
		}
		if !sp.continuing {
			content.Reset()
			ans.Deltas, ans.Relayed = 0, false
		}
		ans.State = nil
		sp.tokens = 0
		actx, aspan := ex.traceAttempt(ctx, attempt, lease.Choice)
		res, err := g.attempt(actx, m, rep, cur, sse, ans, content, to, ex, sp, lease.FirstToken)
		endAttempt(aspan, err)
		clientGone := r.Context().Err() != nil || errors.Is(err, errClientGone)
		if err == nil {
			out := completionTokens(res, content.Len())
			lease.Charge(out) // the fair queue's counters
			if f := m.EngineFair; f != nil && call.Priority != nil {
				f.Charge(ex.Priority.Index(), ex.tenant(), out)
			}
			prompt := -1 // unknown: the pool estimates it
			if res.UsageKnown && res.Usage.PromptTokens > 0 {
				// What the replica prefilled: a prefix-cache hit is no
				// slower replica's merit.
				prompt = res.Usage.PromptTokens
				if res.Usage.CachedKnown {
					prompt = max(prompt-res.Usage.CachedTokens, 0)
				}
			}
			lease.Tokens(prompt, out) // the replica's latency, in proportion
		}
		lease.Release(outcome(err, clientGone)) // exactly once per Acquire, streams included
		endAdapter()
		if err == nil {
			if sp.continuing && res.UsageKnown {
				res.Usage = ContinuedUsage(res.Usage, sp.before)
			}
			g.succeed(w, sse, ex, ans, res, content)
			return nil
		}
		lastErr = err
		if adapter != "" && adapterGone(err) {
			m.Adapters.Known.Forget(rep.URL, adapter) // the next try loads it anew
		}
		if clientGone {
			if res != nil && sp.continuing && res.UsageKnown {
				res.Usage = ContinuedUsage(res.Usage, sp.before)
			}
			g.clientLeft(ex, m, res) // what it used, read from the replica or estimated
			return nil               // nobody to answer; the replica request is over
		}
		g.logger().Warn("replica attempt failed",
			zap.String("request_id", ex.RequestID), zap.String("model_type", m.Name),
			zap.String("replica", rep.URL), zap.Int("attempt", attempt), zap.Error(err))
		if !retryable(err) || ctx.Err() != nil {
			if sp.continuing && sp.cause != nil {
				// A continuation refused (its replica's template takes no
				// final assistant message): the client is told of the
				// failure that broke its stream.
				lastErr = sp.cause
			}
			break
		}
		if sse != nil && sse.isStarted() {
			sp.failedOn(rep)
			next, ok := g.continueStream(m, ex, ans, sp, call, content, err)
			if !ok {
				if sp.continuing && sp.cause != nil {
					lastErr = sp.cause // the failure that broke the stream
				}
				break
			}
			cur = next
		}
	}
	if lastErr == nil {
		lastErr = pool.ErrNoReplicas // no attempt could start (try_duration)
	}
	return lastErr
}

// acquire takes a slot for an attempt on a replica of m not in exclude
// (and, for an adapter, one that has it or may load it).
func (g *Gateway) acquire(ctx context.Context, m *Model, ex *Exchange, preq *pool.Request, adapter string,
	exclude []*pool.Replica) (pool.Lease, error) {
	if adapter != "" {
		// Only the replicas that have the adapter (loading it on one
		// when none has).
		var err error
		if exclude, err = g.placeAdapter(ctx, m, ex, exclude); err != nil {
			return pool.Lease{}, err
		}
	}
	return m.Pool.AcquireWait(ctx, preq, exclude)
}

// routeHeader tells the client how its request was placed: the policy,
// its reason, the predicted cached share of the prompt and how many
// replicas were held back as slow; never the replica (an internal
// address).
const routeHeader = "Llmedge-Route"

func routeValue(policy string, c pool.Choice) string {
	b := make([]byte, 0, 64)
	b = append(b, "policy="...)
	b = append(b, policy...)
	b = append(b, "; reason="...)
	b = append(b, c.Reason...)
	if c.Cached >= 0 {
		b = append(b, "; cached="...)
		b = strconv.AppendFloat(b, c.Cached, 'f', 2, 64)
	}
	if c.SlowAvoided > 0 {
		b = append(b, "; slow_avoided="...)
		b = strconv.AppendInt(b, int64(c.SlowAvoided), 10)
	}
	return string(b)
}

// outcome classifies an attempt for the replica's breaker: connection
// errors, timeouts, 5xx and broken streams are failures; the replica's 4xx
// about the request is a working replica; the client's cancellation and
// the replica's "overloaded" say nothing either way.
func outcome(err error, clientGone bool) pool.Outcome {
	switch {
	case err == nil:
		return pool.Success
	case clientGone:
		return pool.Excluded
	}
	var be *protocols.Error
	if errors.As(err, &be) {
		switch be.Kind {
		case protocols.KindBadRequest:
			return pool.Success
		case protocols.KindOverloaded, protocols.KindUnsupported:
			return pool.Excluded
		case protocols.KindConnect:
			return pool.Unreachable // its process may be gone (restarting)
		}
	}
	return pool.Failure
}

// retryable reports whether another replica may succeed where this
// failed. One whose protocol cannot carry the request was not asked, and
// another replica of the model may speak another protocol.
func retryable(err error) bool {
	var be *protocols.Error
	if !errors.As(err, &be) {
		return false
	}
	return be.Kind != protocols.KindBadRequest
}

// continueStream prepares the continuation of a stream whose attempt
// failed with err after the client saw some of it, and reports whether
// there is to be one: call, asked to continue the text so far.
func (g *Gateway) continueStream(m *Model, ex *Exchange, ans *Answer, sp *splice,
	call protocols.Request, content *strings.Builder, err error) (protocols.Request, bool) {
	if !mayContinue(m, ex, sp, err) {
		return call, false
	}
	before := sp.before + sp.tokens
	next, ok := continuation(call, content.String(), before)
	if !ok || !ex.Door.(Continuer).Continue(ans, sp.last) {
		return call, false
	}
	if sp.cause == nil {
		sp.cause = err
	}
	sp.before, sp.continuing = before, true
	sp.after = append(sp.after, before)
	ans.Continued, ans.Before = len(sp.after), before
	g.logger().Info("stream continues on another replica",
		zap.String("request_id", ex.RequestID), zap.String("model_type", m.Name),
		zap.Int("after_tokens", before), zap.Int("continuation", len(sp.after)))
	return next, true
}

func (g *Gateway) succeed(w http.ResponseWriter, sse *sseWriter, ex *Exchange, ans *Answer, res *protocols.Result, content *strings.Builder) {
	if res.UsageKnown {
		ex.Usage, ex.UsageKnown = res.Usage, true
	}
	ex.Finish = res.FinishReason
	done := res.Done
	if done.IsZero() {
		done = time.Now()
	}
	ans.Content = content.String()
	if ans.Content == "" {
		ans.Content = res.Content // a non-streamed call delivers the text whole
		ex.Relayed += len(res.Content)
	}
	ans.FinishReason, ans.Usage, ans.UsageKnown = res.FinishReason, ex.Usage, res.UsageKnown
	ans.Raw, ans.RawFormat, ans.RawModel = res.Raw, res.Format, res.Model
	ans.Inference = done.Sub(res.Sent)
	total := time.Since(ex.Start)
	ans.Processing = total
	ex.Status = http.StatusOK
	if sse != nil {
		_ = sse.write(ex.Door.AppendEnd(nil, ans))
		return
	}
	w.Header()["Server-Timing"] = []string{serverTiming(ex, total)} // as Set would, without building the key again
	ex.Door.WriteAnswer(w, ans)
}

// statusClientGone is what logs and metrics call a request whose client
// left before the answer (nginx's convention).
const statusClientGone = 499

// Observe records ex in the metrics, once: the stage that ends the
// request calls it.
func (g *Gateway) Observe(ex *Exchange) { g.observe(ex) }

func (g *Gateway) observe(ex *Exchange) {
	if ex.observed || (g.Metrics == nil && g.Status == nil && g.Ledger == nil) {
		return
	}
	ex.observed = true
	if ex.Busy() {
		// A batch's line put off (no spare capacity, its owner's rate
		// window): nobody was answered, and it runs again. It counts as
		// deferred (llmedge_batch_lines_total), not as a refused request
		// of its owner's on the status page and in llmedge_requests_total.
		return
	}
	g.recordStatus(ex)
	g.recordLedger(ex)
	if g.Metrics == nil {
		return
	}
	model := ex.Model()
	if model == "" {
		model = "none"
	}
	g.Metrics.ObserveRequest(metrics.Request{
		ModelType: model, Status: ex.Status,
		Total: time.Since(ex.Start), Upstream: ex.Upstream, TTFT: ex.TTFT, Attempts: ex.Attempts,
		Continuations: len(ex.Continued), Failed: ex.Status != http.StatusOK || ex.StreamError,
		PromptTokens: ex.Usage.PromptTokens, CompletionTokens: ex.Usage.CompletionTokens,
		Reason: ex.Choice.Reason, Predicted: predicted(ex), CachedTokens: ex.Usage.CachedTokens, CachedKnown: ex.Usage.CachedKnown,
		Alias: ex.alias(), Fallback: ex.Fallback, Rollout: ex.Rollout, Adapter: g.adapterLabel(ex),
		Class: ex.Priority.String(), Routed: ex.routed(), Shed: ex.shed(), Queue: ex.Queue,
	})
}

// predicted is the share of the prompt the policy predicted cached on the
// replica that answered, or -1 when it predicted nothing (no prefix
// policy, no replica reached).
func predicted(ex *Exchange) float64 {
	if ex.Choice.Replica == nil {
		return -1
	}
	return ex.Choice.Cached
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
