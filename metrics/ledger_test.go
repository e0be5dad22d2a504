package metrics

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestLedgerUnrecorded(t *testing.T) {
	m, err := New(prometheus.NewRegistry(), nil)
	if err != nil {
		t.Fatal(err)
	}
	m.LedgerUnrecorded(UnrecordedUnauthenticated)
	m.LedgerUnrecorded(UnrecordedUnauthenticated)
	m.LedgerUnrecorded(UnrecordedBeforeBody)
	m.LedgerUnrecorded("invented") // not a reason: no series of its own
	for reason, want := range map[string]float64{UnrecordedUnauthenticated: 2, UnrecordedBeforeBody: 1, UnrecordedRefused: 0} {
		if got := testutil.ToFloat64(m.ledger.vec.WithLabelValues(reason)); got != want {
			t.Errorf("%s: %g, want %g", reason, got, want)
		}
	}
	if n := testutil.CollectAndCount(m.ledger.vec); n != 3 {
		t.Errorf("%d series, want the 3 reasons", n)
	}
	var nilM *Metrics
	nilM.LedgerUnrecorded(UnrecordedRefused) // no panic
}
