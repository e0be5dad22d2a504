package metrics

import "github.com/prometheus/client_golang/prometheus"

// The reasons a request is not written to the usage ledger
// (LedgerUnrecorded).
const (
	// UnrecordedUnauthenticated: refused before its credential was
	// accepted (401, 431): nobody's usage.
	UnrecordedUnauthenticated = "unauthenticated"
	// UnrecordedBeforeBody: authenticated, but refused or reset before
	// its body was read and decoded (an HTTP/2 stream reset, a body too
	// large, late or malformed, a credential that covers no model).
	UnrecordedBeforeBody = "before_body"
	// UnrecordedRefused: its body was read, then it was refused before
	// admission (its model's scope, its team, its rate limits, budgets).
	UnrecordedRefused = "refused"
)

// ledgerMetrics counts what the usage ledger does not record. The
// counters of the reasons are made once: counting costs the request no
// label lookup and no allocation.
type ledgerMetrics struct {
	vec     *prometheus.CounterVec
	reasons map[string]prometheus.Counter
}

func newLedgerMetrics(reg prometheus.Registerer, err *error) ledgerMetrics {
	l := ledgerMetrics{vec: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "llmedge_ledger_unrecorded_total",
		Help: "Requests not written to the usage ledger, by reason: unauthenticated, before_body (refused or reset before their body was read), refused (before admission).",
	}, []string{"reason"})}
	l.vec = register(reg, l.vec, err)
	l.reasons = map[string]prometheus.Counter{}
	for _, r := range []string{UnrecordedUnauthenticated, UnrecordedBeforeBody, UnrecordedRefused} {
		l.reasons[r] = l.vec.WithLabelValues(r)
	}
	return l
}

// LedgerUnrecorded counts a request the ledger does not record, for
// reason (one of the Unrecorded constants). A nil *Metrics records
// nothing.
func (m *Metrics) LedgerUnrecorded(reason string) {
	if m == nil {
		return
	}
	if c, ok := m.ledger.reasons[reason]; ok {
		c.Inc()
	}
}
