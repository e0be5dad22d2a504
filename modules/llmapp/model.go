package llmapp

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/llmedge/llmedge/backends/pool"
	"github.com/llmedge/llmedge/backends/protocols"
	"github.com/llmedge/llmedge/ledger"
	"github.com/llmedge/llmedge/limits"
)

// ModelConfig configures one model type.
type ModelConfig struct {
	Name string `json:"name"`
	// SourceRaw says where the replicas come from: a module of namespace
	// llmedge.sources (static, consul). Default: a static list of none.
	SourceRaw json.RawMessage `json:"source,omitempty" caddy:"namespace=llmedge.sources inline_key=source"`
	// ProtocolRaw is the replicas' API: a module of namespace
	// llmedge.protocols. Default: openai. A replica may name another.
	ProtocolRaw json.RawMessage `json:"protocol,omitempty" caddy:"namespace=llmedge.protocols inline_key=protocol"`
	// PolicyRaw chooses a replica per request: a module of namespace
	// llmedge.policies. Default: prefix_cache.
	PolicyRaw json.RawMessage `json:"lb_policy,omitempty" caddy:"namespace=llmedge.policies inline_key=policy"`
	// LoadMetrics configures reading the replicas' own load from their
	// engines' Prometheus endpoint. Default: on for engines that have one.
	LoadMetrics *LoadMetricsConfig `json:"load_metrics,omitempty"`
	// UpstreamModel is the model name sent to replicas.
	UpstreamModel string `json:"upstream_model,omitempty"`
	// SystemMessage is added when a request carries none.
	SystemMessage string `json:"system_message,omitempty"`
	// MaxTokens caps replies.
	MaxTokens int `json:"max_tokens,omitempty"`
	// CapsConfig bounds what one request may ask: its generations and
	// its prompt's size.
	CapsConfig
	// Price is what the model's tokens cost, per million, for the usage
	// ledger's records.
	Price *ledger.Price `json:"price,omitempty"`
	// APIKey is sent to replicas as a Bearer token ({env.VAR} works).
	APIKey string `json:"api_key,omitempty"`
	// APIKeyEnv names an environment variable holding the API key; it
	// must be set and non-empty. Exclusive with APIKey.
	APIKeyEnv string `json:"api_key_env,omitempty"`
	// HealthInterval spaces active health probes of replicas that nobody
	// else checks (static ones). Default: 5s; negative turns probing off.
	HealthInterval caddy.Duration `json:"health_interval,omitempty"`
	// HealthTimeout bounds one probe. Default: 2s.
	HealthTimeout caddy.Duration `json:"health_timeout,omitempty"`
	// MaxConcurrency caps outstanding requests per replica.
	MaxConcurrency int `json:"max_concurrency,omitempty"`
	// Timeouts; zero takes the gateway's defaults (60s, 30s, 10m).
	FirstTokenTimeout caddy.Duration `json:"first_token_timeout,omitempty"`
	IdleTimeout       caddy.Duration `json:"idle_timeout,omitempty"`
	TotalTimeout      caddy.Duration `json:"total_timeout,omitempty"`
	// ResponseTimeout bounds a non-streamed replica call; zero leaves it
	// to total_timeout.
	ResponseTimeout caddy.Duration `json:"response_timeout,omitempty"`
	// StreamUpstream is "auto" (default: stream from the replica when the
	// client streams) or "always" (also for one-JSON answers, so that the
	// first-token and idle timeouts watch every call).
	StreamUpstream string `json:"stream_upstream,omitempty"`
	// Anthropic is how Anthropic's door (/v1/messages) reaches the
	// replicas: "auto" (default: carried through to /v1/messages,
	// translated to chat completions for a replica without it),
	// "passthrough" or "translate".
	Anthropic string `json:"anthropic,omitempty"`
	// Responses is how OpenAI's Responses API (/v1/responses) reaches the
	// replicas: "auto" (default: carried through to /v1/responses,
	// translated to chat completions for a replica without it),
	// "passthrough" or "translate".
	Responses string `json:"responses,omitempty"`
	// DialTimeout bounds connecting to this model's replicas; default: the
	// app's dial_timeout.
	DialTimeout caddy.Duration `json:"dial_timeout,omitempty"`
	// MaxAttempts bounds tries on distinct replicas; default: the app's.
	MaxAttempts int `json:"max_attempts,omitempty"`
	// Continuations bounds the continuations in a row of one stream that
	// bring no text (Caddyfile: continue <n>): a stream is continued on
	// another replica as often as its replica fails mid-stream, within
	// total_timeout and at most 16 times, until that many continuations
	// in a row failed before their first token; default 3, -1 turns
	// continuation off (continue off).
	Continuations int `json:"continuations,omitempty"`
	// TryDuration bounds the time, from the request's arrival, in which a
	// retry may start. Default 0: bounded by max_attempts and total_timeout.
	TryDuration caddy.Duration `json:"try_duration,omitempty"`
	// Breaker configures the per-replica circuit breakers.
	Breaker *BreakerConfig `json:"breaker,omitempty"`
	// Queue configures the wait for a slot when every replica is at its
	// max_concurrency.
	Queue *QueueConfig `json:"queue,omitempty"`
	// SlowReplicas configures the detection of replicas much slower than
	// their peers (docs/resilience.md); on by default.
	SlowReplicas *SlowReplicasConfig `json:"slow_replicas,omitempty"`
	// MaxBodyBytes and MaxMessages, when set, replace the app's
	// max_body_size and max_messages for this model's requests.
	MaxBodyBytes int64 `json:"max_body_bytes,omitempty"`
	MaxMessages  int   `json:"max_messages,omitempty"`
	// RateLimits limit each user's requests to this model, on top of the
	// user's own limits.
	RateLimits *limits.Limit `json:"rate_limits,omitempty"`
	// Aliases are other names of this model that requests may use, in
	// every door; none may be another model's name or alias.
	Aliases []string `json:"aliases,omitempty"`
	// Fallbacks are the models (or aliases) that serve a request in this
	// one's place when none of its replicas can take it, tried in order
	// among those the caller may use.
	Fallbacks []string `json:"fallbacks,omitempty"`
	// Required makes the instance's /readyz answer 503 while nothing can
	// serve the model (no usable replica of its own, no ready fallback).
	// A model not required never makes the instance unready.
	Required bool `json:"required,omitempty"`

	// refs are the models its Caddyfile lines name, where they name them.
	refs []modelRef
	// Rollout makes this model a weighted split of other models: each
	// conversation is served by one of them, by weight, sticky per
	// conversation. Such a model has no replicas of its own.
	Rollout []RolloutShare `json:"rollout,omitempty"`
	// EnginePriority, when set, is the "priority" sent to the model's
	// OpenAI-protocol replicas for each class of work: critical, standard,
	// sheddable (vLLM started with --scheduling-policy priority; lower
	// runs earlier). Default: none sent.
	EnginePriority []int `json:"engine_priority,omitempty"`
	// EngineFair (engine_priority fair) spreads each class's number over
	// gateway.FairLevels by the tenant's recent share of the model's
	// tokens within its class: number*FairLevels + level.
	EngineFair bool `json:"engine_fair,omitempty"`
	// Adapters configures the model's LoRA adapters (adapters.go); nil
	// for a model without.
	Adapters *AdaptersConfig `json:"adapters,omitempty"`
	// CacheSharing says who shares a cache partition (the prefix index,
	// the engines' salt): principal (default), team or model.
	CacheSharing string `json:"cache_sharing,omitempty"`
	// CacheSalt says which replicas get the partition's cache_salt: auto
	// (default: those whose protocol is vllm), on (every one), off.
	CacheSalt string `json:"cache_salt,omitempty"`
	// AllowMembers are engine-control members clients may send to the
	// model's engines as they wrote them (boundary/members).
	AllowMembers []string `json:"allow_members,omitempty"`
}

// RolloutShare is one model of a rollout and its weight.
type RolloutShare struct {
	Model  string `json:"model"`
	Weight int    `json:"weight"`
}

// Values of ModelConfig.StreamUpstream.
const (
	StreamUpstreamAuto   = "auto"
	StreamUpstreamAlways = "always"
)

// validate reports the first out-of-range option, by its Caddyfile name.
func (mc *ModelConfig) validate() error {
	if mc.Name == "" {
		return fmt.Errorf("a model has no name")
	}
	for _, d := range []struct {
		name string
		v    caddy.Duration
	}{
		{"health_timeout", mc.HealthTimeout}, {"first_token_timeout", mc.FirstTokenTimeout},
		{"idle_timeout", mc.IdleTimeout}, {"total_timeout", mc.TotalTimeout},
		{"response_timeout", mc.ResponseTimeout}, {"dial_timeout", mc.DialTimeout},
		{"try_duration", mc.TryDuration},
	} {
		if d.v < 0 {
			return fmt.Errorf("model %q: %s must be positive, got %s", mc.Name, d.name, time.Duration(d.v))
		}
	}
	for _, n := range []struct {
		name string
		v    int
	}{{"max_tokens", mc.MaxTokens}, {"max_concurrency", mc.MaxConcurrency}, {"max_attempts", mc.MaxAttempts},
		{"max_messages", mc.MaxMessages}} {
		if n.v < 0 {
			return fmt.Errorf("model %q: %s must be positive, got %d", mc.Name, n.name, n.v)
		}
	}
	if mc.MaxBodyBytes < 0 {
		return fmt.Errorf("model %q: max_body_size must be positive, got %d", mc.Name, mc.MaxBodyBytes)
	}
	if err := mc.CapsConfig.validate("model " + mc.Name); err != nil {
		return err
	}
	if mc.Continuations < -1 {
		return fmt.Errorf("model %q: continuations must be positive, or -1 (off), got %d", mc.Name, mc.Continuations)
	}
	switch mc.StreamUpstream {
	case "", StreamUpstreamAuto, StreamUpstreamAlways:
	default:
		return fmt.Errorf("model %q: stream_upstream must be auto or always, got %q", mc.Name, mc.StreamUpstream)
	}
	switch mc.Anthropic {
	case "", "auto", "passthrough", "translate":
	default:
		return fmt.Errorf("model %q: anthropic must be auto, passthrough or translate, got %q", mc.Name, mc.Anthropic)
	}
	switch mc.Responses {
	case "", "auto", "passthrough", "translate":
	default:
		return fmt.Errorf("model %q: responses must be auto, passthrough or translate, got %q", mc.Name, mc.Responses)
	}
	if err := mc.Adapters.validate(); err != nil {
		return fmt.Errorf("model %q: %w", mc.Name, err)
	}
	if mc.Adapters != nil && len(mc.Rollout) > 0 {
		return fmt.Errorf("model %q: a model with a rollout has no adapters of its own (its rollout's models may)", mc.Name)
	}
	if mc.APIKey != "" && mc.APIKeyEnv != "" {
		return fmt.Errorf("model %q: api_key and api_key_env are exclusive", mc.Name)
	}
	if mc.RateLimits != nil {
		if err := mc.RateLimits.Validate(); err != nil {
			return fmt.Errorf("model %q: limits: %w", mc.Name, err)
		}
	}
	for _, err := range []error{mc.Queue.validate(), mc.Queue.validateShed(), mc.validateEnginePriority(), mc.LoadMetrics.validate()} {
		if err != nil {
			return fmt.Errorf("model %q: %w", mc.Name, err)
		}
	}
	if err := mc.SlowReplicas.settings().Validate(); err != nil {
		return fmt.Errorf("model %q: %w", mc.Name, err)
	}
	return mc.Breaker.settings().Validate()
}

// apiKey resolves the key sent to the replicas.
func (mc *ModelConfig) apiKey(repl *caddy.Replacer) (string, error) {
	if mc.APIKeyEnv == "" {
		return repl.ReplaceAll(mc.APIKey, ""), nil
	}
	key := os.Getenv(mc.APIKeyEnv)
	if key == "" {
		return "", fmt.Errorf("api_key_env: environment variable %s is not set", mc.APIKeyEnv)
	}
	return key, nil
}

// LoadMetricsConfig configures the scrape of the replicas' metrics.
type LoadMetricsConfig struct {
	// Disabled leaves every replica's load to the gateway's own count.
	Disabled bool `json:"disabled,omitempty"`
	// Interval between scrapes of a replica. Default 1s.
	Interval caddy.Duration `json:"interval,omitempty"`
	// Timeout of one scrape. Default: the interval.
	Timeout caddy.Duration `json:"timeout,omitempty"`
	// Path of the endpoint. Default /metrics.
	Path string `json:"path,omitempty"`
	// Dialect names the engine's metrics (vllm, sglang, tgi, llamacpp,
	// auto), overriding what the protocol says.
	Dialect string `json:"dialect,omitempty"`
}

// Defaults of LoadMetricsConfig.
const (
	DefaultLoadInterval = time.Second
	DefaultLoadPath     = "/metrics"
)

func (l *LoadMetricsConfig) validate() error {
	switch {
	case l == nil:
	case l.Interval < 0 || l.Timeout < 0:
		return fmt.Errorf("load_metrics interval and timeout must be positive")
	case l.Path != "" && l.Path[0] != '/':
		return fmt.Errorf("load_metrics path must start with /, got %q", l.Path)
	}
	return nil
}

// BreakerConfig configures each replica's circuit breaker (gobreaker v2).
// It trips on consecutive_failures or, with failure_ratio set, on the
// share of failures once min_requests outcomes were seen in the window.
type BreakerConfig struct {
	Disabled            bool           `json:"disabled,omitempty"`
	ConsecutiveFailures uint32         `json:"consecutive_failures,omitempty"`
	FailureRatio        float64        `json:"failure_ratio,omitempty"`
	MinRequests         uint32         `json:"min_requests,omitempty"`
	Window              caddy.Duration `json:"window,omitempty"`
	OpenTimeout         caddy.Duration `json:"open_timeout,omitempty"`
	HalfOpenRequests    uint32         `json:"half_open_requests,omitempty"`
}

func (b *BreakerConfig) settings() pool.BreakerSettings {
	if b == nil {
		return pool.BreakerSettings{}
	}
	return pool.BreakerSettings{
		Disabled:            b.Disabled,
		ConsecutiveFailures: b.ConsecutiveFailures,
		FailureRatio:        b.FailureRatio,
		MinRequests:         b.MinRequests,
		Window:              time.Duration(b.Window),
		OpenTimeout:         time.Duration(b.OpenTimeout),
		HalfOpenRequests:    b.HalfOpenRequests,
	}
}

// SlowReplicasConfig configures the detection of slow replicas: zero
// fields take pool's defaults (factor 3, min_samples 20, half_life 30s,
// cooldown 30s, max_cooldown 300s, max_ejected 50%).
type SlowReplicasConfig struct {
	Disabled    bool           `json:"disabled,omitempty"`
	Factor      float64        `json:"factor,omitempty"`
	MinSamples  int            `json:"min_samples,omitempty"`
	HalfLife    caddy.Duration `json:"half_life,omitempty"`
	Cooldown    caddy.Duration `json:"cooldown,omitempty"`
	MaxCooldown caddy.Duration `json:"max_cooldown,omitempty"`
	// MaxEjected is a share of the pool, 0..1 (Caddyfile: 50% or 0.5).
	MaxEjected float64 `json:"max_ejected,omitempty"`
}

func (c *SlowReplicasConfig) settings() pool.SlowSettings {
	if c == nil {
		return pool.SlowSettings{}
	}
	return pool.SlowSettings{
		Disabled:    c.Disabled,
		Factor:      c.Factor,
		MinSamples:  c.MinSamples,
		HalfLife:    time.Duration(c.HalfLife),
		Cooldown:    time.Duration(c.Cooldown),
		MaxCooldown: time.Duration(c.MaxCooldown),
		MaxEjected:  c.MaxEjected,
	}
}

// QueueConfig bounds the wait for a free replica slot.
type QueueConfig struct {
	// Disabled answers 429 at once when every replica is at its cap.
	Disabled bool `json:"disabled,omitempty"`
	// Length is how many requests may wait. Default 100.
	Length int `json:"length,omitempty"`
	// Timeout is how long one request may wait. Default 5s.
	Timeout caddy.Duration `json:"timeout,omitempty"`
	// Order is who gets a freed slot: "fair" (default) serves waiting
	// tenants in turn, by the tokens each was served; "fifo" in arrival
	// order.
	Order string `json:"order,omitempty"`
	// Reserve is the number of the model's slots that sheddable requests
	// may not take, kept for the higher classes. Default 0.
	Reserve int `json:"reserve,omitempty"`
	// Shed is "on" (default: a sheddable request is refused at once with
	// 429 while the model is saturated) or "off" (it waits, last).
	Shed string `json:"shed,omitempty"`
	// ShedKV is the KV-cache usage (0..1] from which a replica's engine
	// counts as saturated for sheddable work. Default 0.95.
	ShedKV float64 `json:"shed_kv,omitempty"`
}

// Wait queue defaults.
const (
	DefaultQueueLength  = 100
	DefaultQueueTimeout = 5 * time.Second
)

func (q *QueueConfig) validate() error {
	switch {
	case q == nil:
	case q.Length < 0:
		return fmt.Errorf("queue length must be positive, got %d", q.Length)
	case q.Timeout < 0:
		return fmt.Errorf("queue timeout must be positive, got %s", time.Duration(q.Timeout))
	}
	if q != nil {
		if _, err := pool.ParseQueueOrder(q.Order); err != nil {
			return err
		}
	}
	return nil
}

// order is the queue's order, fair by default.
func (q *QueueConfig) order() pool.QueueOrder {
	if q == nil {
		return pool.OrderFair
	}
	o, _ := pool.ParseQueueOrder(q.Order) // validated
	return o
}

func (q *QueueConfig) options() (length int, timeout time.Duration) {
	if q != nil && q.Disabled {
		return 0, 0
	}
	length, timeout = DefaultQueueLength, DefaultQueueTimeout
	if q != nil && q.Length > 0 {
		length = q.Length
	}
	if q != nil && q.Timeout > 0 {
		timeout = time.Duration(q.Timeout)
	}
	return length, timeout
}

// newReplicaClient is the HTTP client for replicas, with its dial timeout.
// Its idle pool is sized for the concurrency a gateway sees, so that
// connections to replicas are reused under load rather than redialed.
func newReplicaClient(dial time.Duration) *http.Client {
	return &http.Client{Transport: &http.Transport{
		Proxy:               nil, // replicas are reached directly, never through an env proxy
		DialContext:         protocols.Dialer(dial),
		MaxIdleConns:        4096,
		MaxIdleConnsPerHost: 1024,
		IdleConnTimeout:     90 * time.Second,
		ForceAttemptHTTP2:   false,
	}}
}
