package metrics

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestAdapterUnloaded: an adapter the gateway unloads loses its series,
// the others keep theirs.
func TestAdapterUnloaded(t *testing.T) {
	m, err := New(prometheus.NewRegistry(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, ad := range []string{"gone", "kept"} {
		m.AdapterLoad("qwen", ad, true)
		m.ObserveRequest(Request{ModelType: "qwen", Adapter: ad, Status: 200})
		m.ObserveRequest(Request{ModelType: "qwen", Adapter: ad, Status: 503})
	}
	m.AdapterUnloaded("qwen", "gone")
	if n := testutil.CollectAndCount(m.adapterReqs); n != 2 {
		t.Errorf("request series %d, want kept's 2", n)
	}
	if n := testutil.CollectAndCount(m.adapterLoads); n != 1 {
		t.Errorf("load series %d, want kept's 1", n)
	}
	var nilM *Metrics
	nilM.AdapterUnloaded("qwen", "x") // records nothing, no panic
}
