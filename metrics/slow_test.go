package metrics

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// slowSource is a Source whose pools detect slow replicas.
type slowSource struct{ fakeSource }

func (slowSource) SlowReplicas() []SlowReplica {
	return []SlowReplica{
		{Model: "qwen", Replica: "http://a:1", Score: 9.5, State: 2, Ejections: 3},
		{Model: "qwen", Replica: "http://b:1"}, // not judged: no score
	}
}

func TestSlowReplicaMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	if _, err := New(reg, slowSource{fakeSource{}}); err != nil {
		t.Fatal(err)
	}
	expected := `
# HELP llmedge_replica_latency_score A replica's latency over the median of its peers' (1: as fast); only for replicas judged.
# TYPE llmedge_replica_latency_score gauge
llmedge_replica_latency_score{model_type="qwen",replica="http://a:1"} 9.5
# HELP llmedge_replica_slow_state A replica in the detection of slow replicas: 0 ok, 1 weighted down, 2 ejected, 3 probing.
# TYPE llmedge_replica_slow_state gauge
llmedge_replica_slow_state{model_type="qwen",replica="http://a:1"} 2
llmedge_replica_slow_state{model_type="qwen",replica="http://b:1"} 0
# HELP llmedge_replica_slow_ejections_total Ejections of a replica as slow since it joined its pool (the configuration's).
# TYPE llmedge_replica_slow_ejections_total counter
llmedge_replica_slow_ejections_total{model_type="qwen",replica="http://a:1"} 3
llmedge_replica_slow_ejections_total{model_type="qwen",replica="http://b:1"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(expected), "llmedge_replica_latency_score",
		"llmedge_replica_slow_state", "llmedge_replica_slow_ejections_total"); err != nil {
		t.Fatal(err)
	}
	// A source without the detection has none of these series.
	reg = prometheus.NewRegistry()
	if _, err := New(reg, fakeSource{}); err != nil {
		t.Fatal(err)
	}
	if n, err := testutil.GatherAndCount(reg, "llmedge_replica_slow_state"); err != nil || n != 0 {
		t.Fatalf("%d series, %v", n, err)
	}
}
