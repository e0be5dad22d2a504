// Package metrics defines llmedge's Prometheus metrics, named llmedge_*.
// Request-path figures are recorded as they happen; figures about state
// (replicas, breakers) are read from a Source when Prometheus scrapes, so
// the request path does no bookkeeping for them.
package metrics

import (
	"errors"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the collectors of one gateway configuration.
type Metrics struct {
	overload     overload
	batch        batchMetrics
	ledger       ledgerMetrics
	requests     *prometheus.CounterVec
	overhead     *prometheus.HistogramVec
	upstream     *prometheus.HistogramVec
	ttft         *prometheus.HistogramVec
	tokens       *prometheus.CounterVec
	retries      *prometheus.CounterVec
	continued    *prometheus.CounterVec
	tokensIssued prometheus.Counter
	authFailures *prometheus.CounterVec
	decisions    *prometheus.CounterVec
	scrapeErrors *prometheus.CounterVec
	cacheTokens  *prometheus.CounterVec
	predictError *prometheus.HistogramVec
	aliases      *prometheus.CounterVec
	fallbacks    *prometheus.CounterVec
	rollouts     *prometheus.CounterVec
	adapterReqs  *prometheus.CounterVec
	adapterLoads *prometheus.CounterVec
}

// Source reports the state behind the scrape-time gauges.
type Source interface {
	// ReplicaStates returns, per model type, the number of replicas per
	// state ("usable", "open", "half_open", "unhealthy", ...).
	ReplicaStates() map[string]map[string]int
	// BreakerStates returns, per model type, each replica's breaker state:
	// 0 closed, 1 half-open, 2 open.
	BreakerStates() map[string]map[string]int
	// EngineLoads returns every replica's load as its engine reported it,
	// for the replicas whose figures are fresh.
	EngineLoads() []EngineLoad
	// PrefixStats returns, per model type with a prefix index, its figures.
	PrefixStats() map[string]PrefixStats
}

// SlowSource is implemented by a Source whose pools detect slow replicas.
type SlowSource interface {
	// SlowReplicas returns where each replica stands in the detection.
	SlowReplicas() []SlowReplica
}

// SlowReplica is one replica in the detection of slow replicas.
type SlowReplica struct {
	Model, Replica string
	// Score is its latency over the median of its peers'; 0 when not
	// judged.
	Score float64
	// State: 0 ok, 1 weighted down, 2 ejected, 3 probing.
	State int
	// Ejections counts its ejections as slow since it joined its pool.
	Ejections uint64
}

// EngineLoad is one replica's load as its engine reported it.
type EngineLoad struct {
	Model, Replica   string
	Running, Waiting float64
	// KVUsage is the used share of its KV cache; negative when unknown.
	KVUsage float64
	// Age is how old the figures are.
	Age time.Duration
}

// PrefixStats are a model's prefix-index figures.
type PrefixStats struct {
	// HitRate is the predicted share of prompt blocks cached on the
	// replicas chosen.
	HitRate     float64
	Blocks      int
	MemoryBytes int64
}

// Buckets for latencies: the gateway's own overhead lives in
// microseconds, model latencies in seconds.
var (
	overheadBuckets = []float64{25e-6, 50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3, 10e-3, 50e-3}
	latencyBuckets  = []float64{.05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300}
	// errorBuckets of the prediction error: symmetric, finer near zero
	// (a block or two of difference is the index's approximation).
	errorBuckets = []float64{-.75, -.5, -.25, -.1, -.05, .05, .1, .25, .5, .75}
)

// New registers the collectors in reg. Registering twice in the same
// registry (a config reload that reuses it) adopts the existing ones.
func New(reg prometheus.Registerer, src Source) (*Metrics, error) {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "llmedge_requests_total", Help: "Inference requests answered, by model type and HTTP status.",
		}, []string{"model_type", "status"}),
		overhead: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "llmedge_gateway_overhead_seconds", Help: "Time the gateway adds: total time minus time spent waiting on replicas.",
			Buckets: overheadBuckets,
		}, []string{"model_type"}),
		upstream: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "llmedge_upstream_seconds", Help: "Time spent on replica calls per request, all attempts.",
			Buckets: latencyBuckets,
		}, []string{"model_type"}),
		ttft: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "llmedge_time_to_first_token_seconds", Help: "Time from sending to a replica to its first token, successful attempts.",
			Buckets: latencyBuckets,
		}, []string{"model_type"}),
		tokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "llmedge_tokens_total", Help: "Tokens reported by replicas, by kind (prompt, completion).",
		}, []string{"model_type", "kind"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "llmedge_retries_total", Help: "Attempts beyond the first before the client saw a token, by model type.",
		}, []string{"model_type"}),
		continued: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "llmedge_continuations_total", Help: "Streams continued on another replica after theirs failed mid-stream, by outcome (completed: the stream ended with its answer; failed: with an error event).",
		}, []string{"model_type", "outcome"}),
		tokensIssued: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "llmedge_access_tokens_issued_total", Help: "Access tokens issued by /auth/token.",
		}),
		authFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "llmedge_auth_failures_total", Help: "Refused logins and tokens, by reason.",
		}, []string{"reason"}),
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "llmedge_routing_decisions_total", Help: "Replica choices by model type and reason (prefix, load, affinity, only, round_robin, random).",
		}, []string{"model_type", "reason"}),
		scrapeErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "llmedge_load_scrape_errors_total", Help: "Failed reads of replicas' own load metrics (their in-flight count stands in).",
		}, []string{"model_type"}),
		cacheTokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "llmedge_prefix_cache_tokens_total", Help: "Prompt tokens of the answers whose replica reported its cached tokens (usage.prompt_tokens_details.cached_tokens), by kind: prompt (all of them), cached (as the replica reported), predicted (as the routing policy predicted). cached/prompt is the replicas' hit rate, predicted/prompt the policy's expectation.",
		}, []string{"model_type", "kind"}),
		predictError: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "llmedge_prefix_prediction_error_ratio", Help: "Predicted minus reported cached share of each prompt (-1..1: positive when the policy expected more cached than the replica held), for answers that report cached tokens and requests a policy predicted.",
			Buckets: errorBuckets,
		}, []string{"model_type"}),
		aliases: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "llmedge_alias_requests_total", Help: "Inference requests that named a model by one of its aliases, by model type and alias.",
		}, []string{"model_type", "alias"}),
		fallbacks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "llmedge_fallbacks_total", Help: "Requests answered by a fallback model because no replica of the model asked for could take them, by model type and fallback.",
		}, []string{"model_type", "fallback"}),
		rollouts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "llmedge_rollout_requests_total", Help: "Requests for a model with a weighted rollout, by model type and the model (pool) of its share that took them.",
		}, []string{"model_type", "target"}),
		adapterReqs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "llmedge_adapter_requests_total", Help: "Inference requests for a LoRA adapter of a model, by model type, adapter and status.",
		}, []string{"model_type", "adapter", "status"}),
		adapterLoads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "llmedge_adapter_loads_total", Help: "LoRA adapter loads the gateway asked a replica for, by model type, adapter and outcome (loaded, failed).",
		}, []string{"model_type", "adapter", "outcome"}),
	}
	var err error
	m.requests = register(reg, m.requests, &err)
	m.overhead = register(reg, m.overhead, &err)
	m.upstream = register(reg, m.upstream, &err)
	m.ttft = register(reg, m.ttft, &err)
	m.tokens = register(reg, m.tokens, &err)
	m.retries = register(reg, m.retries, &err)
	m.continued = register(reg, m.continued, &err)
	m.tokensIssued = register(reg, m.tokensIssued, &err)
	m.authFailures = register(reg, m.authFailures, &err)
	m.decisions = register(reg, m.decisions, &err)
	m.scrapeErrors = register(reg, m.scrapeErrors, &err)
	m.cacheTokens = register(reg, m.cacheTokens, &err)
	m.predictError = register(reg, m.predictError, &err)
	m.aliases = register(reg, m.aliases, &err)
	m.fallbacks = register(reg, m.fallbacks, &err)
	m.rollouts = register(reg, m.rollouts, &err)
	m.overload = newOverload(reg, &err)
	m.ledger = newLedgerMetrics(reg, &err)
	m.batch = newBatchMetrics(reg, &err)
	m.adapterReqs = register(reg, m.adapterReqs, &err)
	m.adapterLoads = register(reg, m.adapterLoads, &err)
	if src != nil {
		if rerr := reg.Register(&stateCollector{src: src}); rerr != nil {
			var are prometheus.AlreadyRegisteredError
			if !errors.As(rerr, &are) {
				err = errors.Join(err, rerr)
			}
		}
	}
	return m, err
}

// register adds c to reg, or returns the collector already registered
// under the same description.
func register[C prometheus.Collector](reg prometheus.Registerer, c C, errp *error) C {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing
			}
		}
		*errp = errors.Join(*errp, err)
	}
	return c
}

// Request is what one inference request contributes.
type Request struct {
	ModelType       string
	Status          int
	Total, Upstream time.Duration
	TTFT            time.Duration // 0 when no token arrived
	Attempts        int
	// Continuations counts the attempts that continued a stream on
	// another replica (they are among Attempts, not among the retries);
	// Failed: the request ended with an error.
	Continuations    int
	Failed           bool
	PromptTokens     int
	CompletionTokens int
	// Reason is why the last attempt's replica was chosen.
	Reason string
	// Predicted is the share of the prompt the policy predicted cached on
	// the replica (0..1), negative when it predicted nothing.
	Predicted float64
	// CachedTokens is what the replica reported its prefix cache held of
	// the prompt, when it reported it (CachedKnown).
	CachedTokens int
	CachedKnown  bool
	// Alias is the alias of ModelType the request named; "" when it
	// named the model itself.
	Alias string
	// Fallback is the model that answered in ModelType's place; "" when
	// ModelType's own replicas did (or nobody did).
	Fallback string
	// Rollout is the model whose share of ModelType's weighted rollout
	// took the request; "" without a rollout.
	Rollout string
	// Class is the request's class of work (critical, standard,
	// sheddable); "" for a request refused before it had one.
	Class string
	// Routed: the request reached a model's queue (Queue is its wait
	// there); Shed: it was refused there as sheddable work.
	Routed, Shed bool
	Queue        time.Duration
	// Adapter is the LoRA adapter of ModelType the request asked for; ""
	// for the model's own weights.
	Adapter string
}

// ObserveRequest records one answered inference request. A nil *Metrics
// records nothing.
func (m *Metrics) ObserveRequest(r Request) {
	if m == nil {
		return
	}
	m.requests.WithLabelValues(r.ModelType, strconv.Itoa(r.Status)).Inc()
	over := r.Total - r.Upstream
	if over < 0 {
		over = 0
	}
	m.overhead.WithLabelValues(r.ModelType).Observe(over.Seconds())
	if r.Attempts > 0 {
		m.upstream.WithLabelValues(r.ModelType).Observe(r.Upstream.Seconds())
	}
	if r.TTFT > 0 {
		m.ttft.WithLabelValues(r.ModelType).Observe(r.TTFT.Seconds())
	}
	if r.Alias != "" {
		m.aliases.WithLabelValues(r.ModelType, r.Alias).Inc()
	}
	if r.Adapter != "" {
		m.adapterReqs.WithLabelValues(r.ModelType, r.Adapter, strconv.Itoa(r.Status)).Inc()
	}
	if r.Rollout != "" {
		m.rollouts.WithLabelValues(r.ModelType, r.Rollout).Inc()
	}
	if r.Fallback != "" {
		m.fallbacks.WithLabelValues(r.ModelType, r.Fallback).Inc()
	}
	if r.Reason != "" {
		m.decisions.WithLabelValues(r.ModelType, r.Reason).Inc()
	}
	if n := r.Attempts - 1 - r.Continuations; n > 0 {
		m.retries.WithLabelValues(r.ModelType).Add(float64(n))
	}
	if r.Continuations > 0 {
		outcome := "completed"
		if r.Failed {
			outcome = "failed"
		}
		m.continued.WithLabelValues(r.ModelType, outcome).Add(float64(r.Continuations))
	}
	if r.PromptTokens > 0 {
		m.tokens.WithLabelValues(r.ModelType, "prompt").Add(float64(r.PromptTokens))
	}
	if r.CompletionTokens > 0 {
		m.tokens.WithLabelValues(r.ModelType, "completion").Add(float64(r.CompletionTokens))
	}
	if r.CachedKnown && r.PromptTokens > 0 {
		m.observeCache(r)
	}
	m.observeOverload(r)
}

// observeCache compares what the policy predicted with what the replica
// reported its prefix cache held.
func (m *Metrics) observeCache(r Request) {
	prompt := float64(r.PromptTokens)
	cached := min(float64(r.CachedTokens), prompt)
	m.cacheTokens.WithLabelValues(r.ModelType, "prompt").Add(prompt)
	m.cacheTokens.WithLabelValues(r.ModelType, "cached").Add(cached)
	if r.Predicted >= 0 {
		m.cacheTokens.WithLabelValues(r.ModelType, "predicted").Add(r.Predicted * prompt)
		m.predictError.WithLabelValues(r.ModelType).Observe(r.Predicted - cached/prompt)
	}
}

// TokenIssued counts an access token issued.
func (m *Metrics) TokenIssued() {
	if m != nil {
		m.tokensIssued.Inc()
	}
}

// AuthFailure counts a refused login or token, by reason.
func (m *Metrics) AuthFailure(reason string) {
	if m != nil {
		m.authFailures.WithLabelValues(reason).Inc()
	}
}

// ScrapeError counts a failed read of a replica's load metrics.
func (m *Metrics) ScrapeError(model string) {
	if m != nil {
		m.scrapeErrors.WithLabelValues(model).Inc()
	}
}

// stateCollector turns Source's state into gauges at scrape time.
type stateCollector struct{ src Source }

var (
	replicasDesc = prometheus.NewDesc("llmedge_replicas", "Replicas per model type and state.", []string{"model_type", "state"}, nil)
	breakerDesc  = prometheus.NewDesc("llmedge_breaker_state", "Circuit breaker state per replica: 0 closed, 1 half-open, 2 open.", []string{"model_type", "replica"}, nil)
	engineDesc   = prometheus.NewDesc("llmedge_replica_engine_requests", "Requests a replica's engine reports running or waiting (fresh figures only).", []string{"model_type", "replica", "state"}, nil)
	kvDesc       = prometheus.NewDesc("llmedge_replica_kv_cache_usage_ratio", "Used share of a replica's KV cache as its engine reports it (fresh figures only).", []string{"model_type", "replica"}, nil)
	loadAgeDesc  = prometheus.NewDesc("llmedge_replica_load_age_seconds", "Age of a replica's engine load figures.", []string{"model_type", "replica"}, nil)
	prefixDesc   = prometheus.NewDesc("llmedge_prefix_predicted_hit_ratio", "Predicted share of prompt blocks cached on the replicas chosen, per model type.", []string{"model_type"}, nil)
	blocksDesc   = prometheus.NewDesc("llmedge_prefix_index_blocks", "Prompt blocks the prefix index remembers, per model type.", []string{"model_type"}, nil)
	indexMemDesc = prometheus.NewDesc("llmedge_prefix_index_bytes", "Estimated memory of the prefix index, per model type.", []string{"model_type"}, nil)
	scoreDesc    = prometheus.NewDesc("llmedge_replica_latency_score", "A replica's latency over the median of its peers' (1: as fast); only for replicas judged.", []string{"model_type", "replica"}, nil)
	slowDesc     = prometheus.NewDesc("llmedge_replica_slow_state", "A replica in the detection of slow replicas: 0 ok, 1 weighted down, 2 ejected, 3 probing.", []string{"model_type", "replica"}, nil)
	ejectDesc    = prometheus.NewDesc("llmedge_replica_slow_ejections_total", "Ejections of a replica as slow since it joined its pool (the configuration's).", []string{"model_type", "replica"}, nil)
)

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{replicasDesc, breakerDesc, engineDesc, kvDesc, loadAgeDesc, prefixDesc, blocksDesc, indexMemDesc, adaptersDesc,
		scoreDesc, slowDesc, ejectDesc} {
		ch <- d
	}
}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	for model, states := range c.src.ReplicaStates() {
		for state, n := range states {
			ch <- prometheus.MustNewConstMetric(replicasDesc, prometheus.GaugeValue, float64(n), model, state)
		}
	}
	for model, replicas := range c.src.BreakerStates() {
		for replica, state := range replicas {
			ch <- prometheus.MustNewConstMetric(breakerDesc, prometheus.GaugeValue, float64(state), model, replica)
		}
	}
	for _, l := range c.src.EngineLoads() {
		ch <- prometheus.MustNewConstMetric(engineDesc, prometheus.GaugeValue, l.Running, l.Model, l.Replica, "running")
		ch <- prometheus.MustNewConstMetric(engineDesc, prometheus.GaugeValue, l.Waiting, l.Model, l.Replica, "waiting")
		if l.KVUsage >= 0 {
			ch <- prometheus.MustNewConstMetric(kvDesc, prometheus.GaugeValue, l.KVUsage, l.Model, l.Replica)
		}
		ch <- prometheus.MustNewConstMetric(loadAgeDesc, prometheus.GaugeValue, l.Age.Seconds(), l.Model, l.Replica)
	}
	for model, p := range c.src.PrefixStats() {
		ch <- prometheus.MustNewConstMetric(prefixDesc, prometheus.GaugeValue, p.HitRate, model)
		ch <- prometheus.MustNewConstMetric(blocksDesc, prometheus.GaugeValue, float64(p.Blocks), model)
		ch <- prometheus.MustNewConstMetric(indexMemDesc, prometheus.GaugeValue, float64(p.MemoryBytes), model)
	}
	collectAdapters(c.src, ch)
	if ss, ok := c.src.(SlowSource); ok {
		for _, r := range ss.SlowReplicas() {
			if r.Score > 0 {
				ch <- prometheus.MustNewConstMetric(scoreDesc, prometheus.GaugeValue, r.Score, r.Model, r.Replica)
			}
			ch <- prometheus.MustNewConstMetric(slowDesc, prometheus.GaugeValue, float64(r.State), r.Model, r.Replica)
			ch <- prometheus.MustNewConstMetric(ejectDesc, prometheus.CounterValue, float64(r.Ejections), r.Model, r.Replica)
		}
	}
}
