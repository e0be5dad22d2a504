package status

import (
	"time"
)

// TopUsers is how many users each tenant list shows.
const TopUsers = 5

// Snapshot is what the status page shows at one instant, as JSON. The
// replicas' state (Model.Replicas and the fields above them) comes from
// whoever owns the pools; Recorder.Snapshot adds the windowed figures.
// Nothing in it is message content or a credential.
type Snapshot struct {
	Time          time.Time `json:"time"`
	UptimeSeconds float64   `json:"uptime_seconds"`
	// RateWindowSeconds is the span of the per-second rates,
	// WindowSeconds that of the quantiles and of the users' figures.
	RateWindowSeconds float64 `json:"rate_window_seconds"`
	WindowSeconds     float64 `json:"window_seconds"`
	// Readiness is what the instance's /readyz answers, with the
	// reasons the public answer leaves out.
	Readiness *Readiness `json:"readiness,omitempty"`
	Models    []Model    `json:"models"`
	Tenants   Tenants    `json:"tenants"`
	// IdentityProviders are the trusted issuers' keys, when any is
	// trusted.
	IdentityProviders []IdentityProvider `json:"identity_providers,omitempty"`
	// RoutingShare is the sharing of routing decisions with the other
	// instances, when it is on.
	RoutingShare *RoutingShare `json:"routing_share,omitempty"`
	// Budgets are the budgets seen in their current periods, the most
	// used first, when any is configured.
	Budgets []Budget `json:"budgets,omitempty"`
	// UsageToday is today's top tenants from the usage ledger, when one
	// is kept.
	UsageToday *UsageToday `json:"usage_today,omitempty"`
	// Batches are the batches under way, when batches are on.
	Batches *Batches `json:"batches,omitempty"`
}

// Readiness is the instance's readiness as /readyz decides it.
type Readiness struct {
	// Status is "ready", "degraded" (ready, with a dependency or a model
	// that is not required down) or "not ready".
	Status string `json:"status"`
	// Checks are the conditions of readiness (the configuration, the
	// credentials and shared stores, every required model).
	Checks []ReadinessCheck `json:"checks"`
	// Detail lists the failed checks' reasons.
	Detail []string `json:"detail,omitempty"`
}

// ReadinessCheck is one condition of readiness.
type ReadinessCheck struct {
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail,omitempty"`
}

// RoutingShare is the state of the routing decisions shared between
// instances.
type RoutingShare struct {
	// Up is false while Redis is unreachable: each instance then routes
	// on its own view.
	Up bool `json:"up"`
	// Published, Dropped and Applied count insertions: this instance's
	// sent, lost, and the others' applied here.
	Published uint64 `json:"published"`
	Dropped   uint64 `json:"dropped"`
	Applied   uint64 `json:"applied"`
	// Line says it in a sentence, for the page.
	Line string `json:"line"`
}

// IdentityProvider is one trusted issuer's keys as the gateway holds them.
type IdentityProvider struct {
	Issuer string `json:"issuer"`
	// Keys are the verifying keys in use.
	Keys int `json:"keys"`
	// LastRefresh is when they were last fetched; null before the first.
	LastRefresh *time.Time `json:"last_refresh"`
	// Stale: the provider cannot be reached and the last known good keys
	// are in use.
	Stale bool `json:"stale"`
	// Error is the last fetch's failure, when it failed.
	Error string `json:"error,omitempty"`
	// Line says it in a sentence, for the page.
	Line string `json:"line"`
}

// Model is one model type.
type Model struct {
	Name string `json:"name"`
	// Source is where the replicas come from ("static", "consul", ...).
	Source string `json:"source"`
	// Policy is the balancing policy's name.
	Policy string `json:"policy"`
	// Aliases are the model's other names; Fallbacks the models that
	// answer in its place when none of its replicas can, in the order
	// they are tried.
	Aliases   []string `json:"aliases"`
	Fallbacks []string `json:"fallbacks"`
	// Rollout are the models that serve this one's conversations, by
	// weight, when it is a weighted rollout; absent otherwise.
	Rollout []Share `json:"rollout,omitempty"`
	// Adapters are the model's LoRA adapters as configured; absent for a
	// model without.
	Adapters *Adapters `json:"adapters,omitempty"`
	Ready    bool      `json:"ready"`
	// NotReady says why the model cannot serve, when it cannot.
	NotReady string `json:"not_ready,omitempty"`
	// Required: the instance is ready only while the model is Routable
	// (served by its replicas, or through Via, a fallback).
	Required       bool   `json:"required,omitempty"`
	Routable       bool   `json:"routable"`
	Via            string `json:"via,omitempty"`
	Synced         bool   `json:"synced"`
	DiscoveryError string `json:"discovery_error,omitempty"`
	// QueueWaiting counts the requests waiting for a free replica slot.
	QueueWaiting int `json:"queue_waiting"`
	// PrefixHitRate is the predicted share of prompt blocks found cached
	// on the replicas chosen; null when the policy keeps no prefix index.
	PrefixHitRate *float64 `json:"prefix_hit_rate"`

	// Per second over RateWindowSeconds: requests answered, those that
	// failed (5xx, broken streams), those refused with 429.
	RequestsPerSecond float64 `json:"requests_per_second"`
	ErrorsPerSecond   float64 `json:"errors_per_second"`
	RefusedPerSecond  float64 `json:"refused_per_second"`
	// ContinuedPerSecond counts the streams continued on another replica
	// after theirs failed mid-stream (docs/resilience.md).
	ContinuedPerSecond float64 `json:"continued_per_second"`
	// TTFT is the replicas' time to first token over WindowSeconds.
	TTFT Latency `json:"ttft"`
	// FallbacksTaken counts, over WindowSeconds, the requests for this
	// model that a fallback model answered.
	FallbacksTaken uint64 `json:"fallbacks_taken"`
	// Overload is the model's state under overload: the queue by class of
	// work, whether it is saturated for sheddable work, and the knobs.
	Overload *Overload `json:"overload,omitempty"`
	// Shed counts, over WindowSeconds, the sheddable requests refused at
	// once because the model was saturated.
	Shed uint64 `json:"shed"`

	Replicas []Replica `json:"replicas"`
}

// Adapters are a model's LoRA adapters as configured: the names listed
// and whether others are loaded on demand.
type Adapters struct {
	Names   []string `json:"names"`
	Dynamic bool     `json:"dynamic"`
	// Cap is the most adapters the gateway has one replica hold.
	Cap int `json:"cap"`
}

// ReplicaAdapters are the LoRA adapters one replica holds: Loaded (its
// engine lists them, or the gateway loaded them) and Running (its
// requests use them now).
type ReplicaAdapters struct {
	Loaded  []string `json:"loaded"`
	Running []string `json:"running"`
}

// Share is one model of a weighted rollout and its weight.
type Share struct {
	Model  string `json:"model"`
	Weight int    `json:"weight"`
}

// Latency holds quantiles in seconds; null when no sample was taken.
type Latency struct {
	P50     *float64 `json:"p50"`
	P90     *float64 `json:"p90"`
	Samples uint64   `json:"samples"`
}

// Replica is one replica of a model.
type Replica struct {
	// URL is the replica's address, without any user information.
	URL string `json:"url"`
	// State is "usable", "unhealthy" (failing health probes), "open" or
	// "half_open" (breaker).
	State string `json:"state"`
	// Healthy: not failing its health probes.
	Healthy bool `json:"healthy"`
	// Breaker is "closed", "half-open" or "open".
	Breaker string `json:"breaker"`
	// InFlight counts the gateway's requests on the replica now.
	InFlight int64 `json:"in_flight"`
	// Served counts the requests it was given since it joined the pool
	// (the page derives a rate from two snapshots).
	Served         uint64 `json:"served"`
	Weight         int64  `json:"weight"`
	MaxConcurrency int    `json:"max_concurrency,omitempty"`
	// Engine is the load its engine reports; null when no fresh figure is
	// known (no metrics endpoint, or it stopped answering).
	Engine *Engine `json:"engine"`
	// PrefixHitRate is the predicted share of prompt blocks found cached
	// on it when it was chosen, PrefixBlocks the blocks the index thinks it
	// holds; null without a prefix index.
	PrefixHitRate *float64 `json:"prefix_hit_rate"`
	PrefixBlocks  *int     `json:"prefix_blocks"`
	// Adapters are the LoRA adapters it holds; absent for a model
	// without adapters.
	Adapters *ReplicaAdapters `json:"adapters,omitempty"`
	// LatencyScore is its latency over the median of its peers' (1: as
	// fast, 3: three times slower); null until it is judged, or with the
	// detection of slow replicas off.
	LatencyScore *float64 `json:"latency_score"`
	// Slow is "ok", "weighted_down", "ejected" or "probing": where it
	// stands in the detection of slow replicas; SlowUntil is the end of an
	// ejection.
	Slow      string     `json:"slow,omitempty"`
	SlowUntil *time.Time `json:"slow_until,omitempty"`
}

// Engine is a replica's load as its engine reports it.
type Engine struct {
	// Running and Waiting are the requests in its batch and its queue.
	Running float64 `json:"running"`
	Waiting float64 `json:"waiting"`
	// KVCacheUsage is the used share of its KV cache; null when the
	// engine does not report it.
	KVCacheUsage *float64 `json:"kv_cache_usage"`
	// AgeSeconds is how old these figures are.
	AgeSeconds float64 `json:"age_seconds"`
}

// Tenants are the users' figures over WindowSeconds.
type Tenants struct {
	// TopTokens are the users who used the most tokens.
	TopTokens []User `json:"top_tokens"`
	// Refused are the users refused most often (403, 429).
	Refused []User `json:"refused"`
}

// Snapshot completes models (their state filled by the caller) with the
// windowed figures, and adds the users'.
func (rec *Recorder) Snapshot(models []Model) *Snapshot {
	now := rec.now()
	cur := epochOf(now)
	up := now.Sub(rec.start)
	snap := &Snapshot{
		// Milliseconds: what every browser's Date.parse reads.
		Time: now.UTC().Truncate(time.Millisecond), UptimeSeconds: up.Seconds(),
		RateWindowSeconds: RateWindow.Seconds(), WindowSeconds: Window.Seconds(),
		Models: models,
	}
	rateBuckets := int(RateWindow / BucketWidth)
	// The rates divide by the time the summed buckets cover: the full
	// ones before the current bucket plus the elapsed part of it, and no
	// more than the recorder has lived.
	span := time.Duration(rateBuckets-1)*BucketWidth + now.Sub(time.Unix(0, cur*int64(BucketWidth)))
	span = min(span, up)
	for i := range snap.Models {
		m := &snap.Models[i]
		v, ok := rec.models.Load(m.Name)
		if !ok {
			continue
		}
		s := v.(*series)
		if span > 0 {
			var r totals
			s.sum(cur, rateBuckets, false, &r)
			m.RequestsPerSecond = float64(r.requests) / span.Seconds()
			m.ErrorsPerSecond = float64(r.errors) / span.Seconds()
			m.RefusedPerSecond = float64(r.refusals) / span.Seconds()
			m.ContinuedPerSecond = float64(r.continued) / span.Seconds()
		}
		var w totals
		s.sum(cur, ringSize, true, &w)
		m.TTFT.Samples = w.ttft.samples()
		m.FallbacksTaken = w.fallbacks
		m.Shed = w.shed
		if p, ok := w.ttft.quantile(0.5); ok {
			m.TTFT.P50 = &p
		}
		if p, ok := w.ttft.quantile(0.9); ok {
			m.TTFT.P90 = &p
		}
	}
	snap.Tenants.TopTokens, snap.Tenants.Refused = rec.users.top(cur, ringSize, TopUsers)
	if snap.Tenants.TopTokens == nil {
		snap.Tenants.TopTokens = []User{}
	}
	if snap.Tenants.Refused == nil {
		snap.Tenants.Refused = []User{}
	}
	if snap.Models == nil {
		snap.Models = []Model{}
	}
	for i := range snap.Models {
		// Empty lists, not null: the page iterates them.
		if snap.Models[i].Aliases == nil {
			snap.Models[i].Aliases = []string{}
		}
		if snap.Models[i].Fallbacks == nil {
			snap.Models[i].Fallbacks = []string{}
		}
	}
	return snap
}

// Budget is one budget's use in its current period, as this instance
// last saw its counter.
type Budget struct {
	// Scope is user, api_key or team; Name the tenant.
	Scope    string    `json:"scope"`
	Name     string    `json:"name"`
	Unit     string    `json:"unit"`
	Per      string    `json:"per"`
	Budget   float64   `json:"budget"`
	Used     float64   `json:"used"`
	Fraction float64   `json:"fraction"`
	ResetAt  time.Time `json:"reset_at"`
	// Warning: the budget is used at or past the warning threshold.
	Warning bool `json:"warning"`
	// Line says it in a sentence, for the page.
	Line string `json:"line"`
}

// TopBudgets bounds the budgets a snapshot lists (the most used first).
const TopBudgets = 20

// UsageToday is the usage ledger's view of the current UTC day: the top
// users, teams and API keys by tokens, with their cost.
type UsageToday struct {
	// Since is the day's start; AsOf when the ledger was read (the
	// figures are cached, not read per snapshot).
	Since time.Time  `json:"since"`
	AsOf  time.Time  `json:"as_of"`
	Users []UsageTop `json:"users"`
	Teams []UsageTop `json:"teams"`
	Keys  []UsageTop `json:"keys"`
	// Error is the last read's failure, when it failed.
	Error string `json:"error,omitempty"`
}

// UsageTop is one tenant's use today.
type UsageTop struct {
	Name     string  `json:"name"`
	Requests int64   `json:"requests"`
	Tokens   int64   `json:"tokens"`
	Cost     float64 `json:"cost"`
}
