package metrics

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestKeptAcrossRegistries: a reload builds its metrics in a new
// registry; the kept counters carry on from where they were, and the
// scrape-time collectors are the new configuration's.
func TestKeptAcrossRegistries(t *testing.T) {
	k := NewKept()
	first := prometheus.NewPedanticRegistry()
	m1, err := New(k.In(first), nil)
	if err != nil {
		t.Fatal(err)
	}
	m1.ObserveRequest(Request{ModelType: "qwen", Status: 200})
	m1.ObserveRequest(Request{ModelType: "qwen", Status: 200})

	second := prometheus.NewPedanticRegistry()
	m2, err := New(k.In(second), nil)
	if err != nil {
		t.Fatal(err)
	}
	m2.ObserveRequest(Request{ModelType: "qwen", Status: 200})
	want := `
# HELP llmedge_requests_total Inference requests answered, by model type and HTTP status.
# TYPE llmedge_requests_total counter
llmedge_requests_total{model_type="qwen",status="200"} 3
`
	if err := testutil.GatherAndCompare(second, strings.NewReader(want), "llmedge_requests_total"); err != nil {
		t.Error(err)
	}
	// The same registry twice (a module provisioned again) adopts too.
	if _, err := New(k.In(second), nil); err != nil {
		t.Fatal(err)
	}
	// Without the keeper, a new registry starts at zero: what this fixes.
	third := prometheus.NewPedanticRegistry()
	m3, _ := New(third, nil)
	m3.ObserveRequest(Request{ModelType: "qwen", Status: 200})
	if n := testutil.ToFloat64(m3.requests.WithLabelValues("qwen", "200")); n != 1 {
		t.Errorf("a fresh registry: %v", n)
	}
}
