package metrics

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

type fakeSource map[string]map[string]int

func (f fakeSource) ReplicaStates() map[string]map[string]int { return f }
func (f fakeSource) BreakerStates() map[string]map[string]int {
	return map[string]map[string]int{"qwen": {"http://a:1": 2}}
}

func TestObserveAndScrape(t *testing.T) {
	reg := prometheus.NewRegistry()
	src := fakeSource{"qwen": {"usable": 2, "open": 1}}
	m, err := New(reg, src)
	if err != nil {
		t.Fatal(err)
	}
	m.ObserveRequest(Request{ModelType: "qwen", Status: 200, Total: 110 * time.Millisecond, Upstream: 100 * time.Millisecond,
		TTFT: 20 * time.Millisecond, Attempts: 2, PromptTokens: 5, CompletionTokens: 7})
	m.ObserveRequest(Request{ModelType: "qwen", Status: 503, Total: time.Millisecond})
	m.TokenIssued()
	m.AuthFailure("invalid_token")

	checks := []struct {
		c    prometheus.Collector
		want float64
	}{
		{m.requests.WithLabelValues("qwen", "200"), 1},
		{m.requests.WithLabelValues("qwen", "503"), 1},
		{m.retries.WithLabelValues("qwen"), 1},
		{m.tokens.WithLabelValues("qwen", "prompt"), 5},
		{m.tokens.WithLabelValues("qwen", "completion"), 7},
		{m.tokensIssued, 1},
		{m.authFailures.WithLabelValues("invalid_token"), 1},
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
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(expected), "llmedge_replicas", "llmedge_breaker_state"); err != nil {
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
