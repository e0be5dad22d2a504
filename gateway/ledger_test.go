package gateway

import (
	"context"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/ledger"
	"github.com/llmedge/llmedge/metrics"
)

// recordStore keeps what the ledger's writer writes.
type recordStore struct {
	mu   sync.Mutex
	recs []ledger.Record
}

func (s *recordStore) Write(_ context.Context, recs []ledger.Record) error {
	s.mu.Lock()
	s.recs = append(s.recs, recs...)
	s.mu.Unlock()
	return nil
}
func (s *recordStore) Sum(context.Context, ledger.Filter) ([]ledger.Sum, error) { return nil, nil }
func (s *recordStore) Prune(context.Context, time.Time) (int64, error)          { return 0, nil }
func (s *recordStore) Close() error                                             { return nil }

// TestLedgerRecordsAdmittedRequests: a request that passed authentication
// and admission is recorded under the gateway's id, with the client's
// X-Request-ID beside it and the model that answered (a fallback); one
// refused before is counted by reason, not recorded.
func TestLedgerRecordsAdmittedRequests(t *testing.T) {
	p, _, adm := modelsGateway(t, map[string]script{"http://qwen:1": {err: errConnect}, "http://gemma:1": {deltas: []string{"gem"}}}, "http://qwen:1")
	st := &recordStore{}
	w := ledger.NewWriter(st, ledger.WriterOptions{Interval: time.Hour})
	p.Gateway.Ledger = w
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	p.Gateway.Metrics = m

	// Served by the fallback, twice with one X-Request-ID.
	for range 2 {
		if w := post(p, "model:qwen model:gemma", "qwen", false, "X-Request-ID", "job-7"); w.Code != 200 {
			t.Fatalf("%d %s", w.Code, w.Body)
		}
	}
	// Markup in the X-Request-ID: dropped.
	post(p, "model:qwen model:gemma", "qwen", true, "X-Request-ID", `<img src=x onerror="alert(1)">`)
	// Refused: no credential; a body that cannot be read; a model out of
	// scope; a limit.
	post(p, "", "qwen", false, "Authorization", "")
	r := httptest.NewRequest("POST", "/tasks/assistant_inference", strings.NewReader(`{"model_type":`))
	r.Header.Set("Authorization", "Bearer ok:model:qwen")
	p.Serve(httptest.NewRecorder(), r, modelsDoor)
	post(p, "model:gemma", "qwen", false)
	adm.refuse = api.NewError(429, "Rate limit reached")
	post(p, "model:qwen", "qwen", false)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}

	if len(st.recs) != 3 {
		t.Fatalf("%d records, want the 3 admitted requests: %+v", len(st.recs), st.recs)
	}
	ids := map[string]bool{}
	for i, rec := range st.recs {
		if rec.Model != "qwen" || rec.ServedModel != "gemma" || rec.Status != 200 || len(rec.RequestID) != 32 || ids[rec.RequestID] {
			t.Errorf("record %d: %+v", i, rec)
		}
		ids[rec.RequestID] = true
		if want := []string{"job-7", "job-7", ""}[i]; rec.ClientRequestID != want {
			t.Errorf("record %d: client request id %q, want %q", i, rec.ClientRequestID, want)
		}
	}
	for reason, want := range map[string]float64{metrics.UnrecordedUnauthenticated: 1, metrics.UnrecordedBeforeBody: 1, metrics.UnrecordedRefused: 2} {
		got := counterValue(t, reg, "llmedge_ledger_unrecorded_total", reason)
		if got != want {
			t.Errorf("unrecorded, %s: %g, want %g", reason, got, want)
		}
	}
}

// counterValue is the value of counter name with label reason in reg.
func counterValue(t *testing.T, reg *prometheus.Registry, name, reason string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, mt := range mf.GetMetric() {
			for _, l := range mt.GetLabel() {
				if l.GetName() == "reason" && l.GetValue() == reason {
					return mt.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatalf("no %s{reason=%q}", name, reason)
	return 0
}
