package metrics

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
)

type fakeSource map[string]map[string]int

func (f fakeSource) ReplicaStates() map[string]map[string]int { return f }
func (f fakeSource) BreakerStates() map[string]map[string]int {
	return map[string]map[string]int{"qwen": {"http://a:1": 2}}
}
func (f fakeSource) EngineLoads() []EngineLoad {
	return []EngineLoad{
		{Model: "qwen", Replica: "http://a:1", Running: 3, Waiting: 2, KVUsage: 0.5, Age: 1500 * time.Millisecond},
		{Model: "qwen", Replica: "http://b:1", Running: 1, KVUsage: -1},
	}
}
func (f fakeSource) PrefixStats() map[string]PrefixStats {
	return map[string]PrefixStats{"qwen": {HitRate: 0.75, Blocks: 100, MemoryBytes: 4096}}
}

func TestObserveAndScrape(t *testing.T) {
	reg := prometheus.NewRegistry()
	src := fakeSource{"qwen": {"usable": 2, "open": 1}}
	m, err := New(reg, src)
	if err != nil {
		t.Fatal(err)
	}
	m.ObserveRequest(Request{ModelType: "qwen", Status: 200, Total: 110 * time.Millisecond, Upstream: 100 * time.Millisecond,
		TTFT: 20 * time.Millisecond, Attempts: 2, PromptTokens: 5, CompletionTokens: 7, Reason: "prefix"})
	m.ObserveRequest(Request{ModelType: "qwen", Status: 503, Total: time.Millisecond})
	m.ObserveRequest(Request{ModelType: "qwen", Status: 200, Alias: "q", Fallback: "gemma"})
	m.TokenIssued()
	m.AuthFailure("invalid_token")
	m.ScrapeError("qwen")

	checks := []struct {
		c    prometheus.Collector
		want float64
	}{
		{m.requests.WithLabelValues("qwen", "200"), 2},
		{m.aliases.WithLabelValues("qwen", "q"), 1},
		{m.fallbacks.WithLabelValues("qwen", "gemma"), 1},
		{m.requests.WithLabelValues("qwen", "503"), 1},
		{m.retries.WithLabelValues("qwen"), 1},
		{m.tokens.WithLabelValues("qwen", "prompt"), 5},
		{m.tokens.WithLabelValues("qwen", "completion"), 7},
		{m.tokensIssued, 1},
		{m.authFailures.WithLabelValues("invalid_token"), 1},
		{m.decisions.WithLabelValues("qwen", "prefix"), 1},
		{m.scrapeErrors.WithLabelValues("qwen"), 1},
	}
	for i, c := range checks {
		if got := testutil.ToFloat64(c.c); got != c.want {
			t.Errorf("check %d: got %v want %v", i, got, c.want)
		}
	}
	if n := testutil.CollectAndCount(m.overhead); n != 1 {
		t.Errorf("overhead series %d", n)
	}
	expected := `
# HELP llmedge_replicas Replicas per model type and state.
# TYPE llmedge_replicas gauge
llmedge_replicas{model_type="qwen",state="open"} 1
llmedge_replicas{model_type="qwen",state="usable"} 2
# HELP llmedge_breaker_state Circuit breaker state per replica: 0 closed, 1 half-open, 2 open.
# TYPE llmedge_breaker_state gauge
llmedge_breaker_state{model_type="qwen",replica="http://a:1"} 2
# HELP llmedge_replica_engine_requests Requests a replica's engine reports running or waiting (fresh figures only).
# TYPE llmedge_replica_engine_requests gauge
llmedge_replica_engine_requests{model_type="qwen",replica="http://a:1",state="running"} 3
llmedge_replica_engine_requests{model_type="qwen",replica="http://a:1",state="waiting"} 2
llmedge_replica_engine_requests{model_type="qwen",replica="http://b:1",state="running"} 1
llmedge_replica_engine_requests{model_type="qwen",replica="http://b:1",state="waiting"} 0
# HELP llmedge_replica_kv_cache_usage_ratio Used share of a replica's KV cache as its engine reports it (fresh figures only).
# TYPE llmedge_replica_kv_cache_usage_ratio gauge
llmedge_replica_kv_cache_usage_ratio{model_type="qwen",replica="http://a:1"} 0.5
# HELP llmedge_replica_load_age_seconds Age of a replica's engine load figures.
# TYPE llmedge_replica_load_age_seconds gauge
llmedge_replica_load_age_seconds{model_type="qwen",replica="http://a:1"} 1.5
llmedge_replica_load_age_seconds{model_type="qwen",replica="http://b:1"} 0
# HELP llmedge_prefix_predicted_hit_ratio Predicted share of prompt blocks cached on the replicas chosen, per model type.
# TYPE llmedge_prefix_predicted_hit_ratio gauge
llmedge_prefix_predicted_hit_ratio{model_type="qwen"} 0.75
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(expected), "llmedge_replicas", "llmedge_breaker_state",
		"llmedge_replica_engine_requests", "llmedge_replica_kv_cache_usage_ratio", "llmedge_replica_load_age_seconds",
		"llmedge_prefix_predicted_hit_ratio"); err != nil {
		t.Fatal(err)
	}
	// A reload registering again in the same registry adopts the collectors.
	again, err := New(reg, src)
	if err != nil {
		t.Fatalf("second registration: %v", err)
	}
	again.TokenIssued()
	if got := testutil.ToFloat64(m.tokensIssued); got != 2 {
		t.Fatalf("collectors not shared across registrations: %v", got)
	}
	var nilM *Metrics
	nilM.ObserveRequest(Request{}) // must not panic
	nilM.TokenIssued()
}

// The routing-quality figures: only answers that report cached tokens
// count; a prediction is compared with what the replica held.
func TestObserveCachedTokens(t *testing.T) {
	cases := []struct {
		name                      string
		r                         Request
		prompt, cached, predicted float64
		errors                    uint64
		errSum                    float64
	}{
		{"not reported", Request{PromptTokens: 100, Predicted: 0.5}, 0, 0, 0, 0, 0},
		{"predicted right", Request{PromptTokens: 100, CachedTokens: 80, CachedKnown: true, Predicted: 0.8}, 100, 80, 80, 1, 0},
		{"predicted too much", Request{PromptTokens: 100, CachedTokens: 0, CachedKnown: true, Predicted: 0.5}, 100, 0, 50, 1, 0.5},
		{"no prediction", Request{PromptTokens: 100, CachedTokens: 64, CachedKnown: true, Predicted: -1}, 100, 64, 0, 0, 0},
		{"more cached than the prompt", Request{PromptTokens: 10, CachedTokens: 16, CachedKnown: true, Predicted: 1}, 10, 10, 10, 1, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, err := New(prometheus.NewRegistry(), nil)
			if err != nil {
				t.Fatal(err)
			}
			c.r.ModelType, c.r.Status = "qwen", 200
			m.ObserveRequest(c.r)
			for kind, want := range map[string]float64{"prompt": c.prompt, "cached": c.cached, "predicted": c.predicted} {
				if got := testutil.ToFloat64(m.cacheTokens.WithLabelValues("qwen", kind)); got != want {
					t.Errorf("%s tokens %v, want %v", kind, got, want)
				}
			}
			h := &dto.Metric{}
			if err := m.predictError.WithLabelValues("qwen").(prometheus.Histogram).Write(h); err != nil {
				t.Fatal(err)
			}
			if h.Histogram.GetSampleCount() != c.errors || math.Abs(h.Histogram.GetSampleSum()-c.errSum) > 1e-9 {
				t.Errorf("error histogram: %d samples summing %v, want %d and %v", h.Histogram.GetSampleCount(), h.Histogram.GetSampleSum(), c.errors, c.errSum)
			}
		})
	}
}
