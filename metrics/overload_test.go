package metrics

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
)

func TestObserveOverload(t *testing.T) {
	m, err := New(prometheus.NewRegistry(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []Request{
		{Class: "sheddable", Routed: true, Shed: true, Status: 429},
		{Class: "sheddable", Routed: true, Shed: true, Status: 429},
		{Class: "critical", Routed: true, Queue: 30 * time.Millisecond, Status: 200},
		{Class: "critical", Routed: true, Status: 200},
		{Class: "standard", Status: 400},         // refused before routing: not counted
		{Routed: true, Status: 403, Shed: false}, // no class: not counted
	} {
		r.ModelType = "qwen"
		m.ObserveRequest(r)
	}
	if got := testutil.ToFloat64(m.overload.shed.WithLabelValues("qwen", "sheddable")); got != 2 {
		t.Errorf("shed %v, want 2", got)
	}
	for class, want := range map[string]uint64{"critical": 2, "standard": 0, "sheddable": 0} {
		h := &dto.Metric{}
		if err := m.overload.wait.WithLabelValues("qwen", class).(prometheus.Histogram).Write(h); err != nil {
			t.Fatal(err)
		}
		if h.Histogram.GetSampleCount() != want {
			t.Errorf("%s waits: %d samples, want %d", class, h.Histogram.GetSampleCount(), want)
		}
	}
}
