package ledger

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// memStore is a Store in memory whose writes can be made to fail or to
// wait, to drive the Writer through a database's troubles.
type memStore struct {
	mu      sync.Mutex
	recs    []Record
	batches []int
	fail    bool
	// gate, when set, makes Write signal entered and wait for a value.
	gate    chan struct{}
	entered chan struct{}
	pruned  []time.Time
	calls   int
}

var errDown = errors.New("store down")

func (m *memStore) Write(_ context.Context, recs []Record) error {
	m.mu.Lock()
	gate := m.gate
	m.mu.Unlock()
	if gate != nil {
		m.entered <- struct{}{}
		<-gate
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls++
	if m.fail {
		return errDown
	}
	m.recs = append(m.recs, recs...)
	m.batches = append(m.batches, len(recs))
	return nil
}

func (m *memStore) Sum(context.Context, Filter) ([]Sum, error) { return nil, nil }

func (m *memStore) Prune(_ context.Context, before time.Time) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.pruned = append(m.pruned, before)
	return 0, nil
}

func (m *memStore) Close() error { return nil }

func (m *memStore) setFail(f bool) {
	m.mu.Lock()
	m.fail = f
	m.mu.Unlock()
}

func (m *memStore) snapshot() ([]Record, []int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]Record(nil), m.recs...), append([]int(nil), m.batches...)
}

// waitFor polls cond until it holds, failing the test after 5 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func rec(i int) Record {
	return Record{Time: time.Unix(1700000000, 0), RequestID: fmt.Sprint("r", i), User: "u", Model: "qwen",
		PromptTokens: 10, CompletionTokens: 5}
}

func TestWriterBatches(t *testing.T) {
	st := &memStore{}
	w := NewWriter(st, WriterOptions{Batch: 3, Interval: time.Hour})
	for i := range 7 {
		if !w.Add(rec(i)) {
			t.Fatalf("Add %d refused", i)
		}
	}
	// Two full batches go at once, without waiting for the interval.
	waitFor(t, "two full batches", func() bool { _, b := st.snapshot(); return len(b) >= 2 })
	if _, b := st.snapshot(); b[0] != 3 || b[1] != 3 {
		t.Fatalf("written in batches %v, want [3 3 ...]", b)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	recs, b := st.snapshot()
	if len(recs) != 7 {
		t.Fatalf("after Close: %d records in batches %v, want 7", len(recs), b)
	}
	for i, r := range recs {
		if r.RequestID != fmt.Sprint("r", i) {
			t.Fatalf("record %d is %s: out of order", i, r.RequestID)
		}
	}
	if w.Written() != 7 || w.Dropped() != 0 {
		t.Fatalf("Written %d Dropped %d, want 7 and 0", w.Written(), w.Dropped())
	}
}

func TestWriterInterval(t *testing.T) {
	st := &memStore{}
	w := NewWriter(st, WriterOptions{Batch: 500, Interval: 10 * time.Millisecond})
	defer w.Close()
	w.Add(rec(1))
	w.Add(rec(2))
	waitFor(t, "a partial batch written on the interval", func() bool { r, _ := st.snapshot(); return len(r) == 2 })
}

func TestWriterBufferFullDrops(t *testing.T) {
	st := &memStore{gate: make(chan struct{}), entered: make(chan struct{})}
	core, logs := observer.New(zap.WarnLevel)
	w := NewWriter(st, WriterOptions{Buffer: 3, Batch: 1, Interval: time.Hour, Logger: zap.New(core)})
	w.Add(rec(0))
	<-st.entered // the writer holds record 0, its write waiting: it counts in the buffer
	for i := 1; i <= 2; i++ {
		if !w.Add(rec(i)) {
			t.Fatalf("Add %d refused with room in the buffer", i)
		}
	}
	for i := 3; i <= 5; i++ {
		if w.Add(rec(i)) {
			t.Fatalf("Add %d accepted into a full buffer", i)
		}
	}
	if w.Dropped() != 3 {
		t.Fatalf("Dropped = %d, want 3", w.Dropped())
	}
	// Release the held write; the next ones pass without a gate.
	st.mu.Lock()
	gate := st.gate
	st.gate = nil
	st.mu.Unlock()
	close(gate)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if recs, _ := st.snapshot(); len(recs) != 3 {
		t.Fatalf("written %d records, want the 3 accepted", len(recs))
	}
	// The drops were logged, with their number, once the writer went on.
	dropped := logs.FilterMessage("ledger: records dropped, the buffer being full").All()
	if len(dropped) != 1 || dropped[0].ContextMap()["dropped"] != uint64(3) {
		t.Fatalf("logged %v, want one warning of 3 records dropped", logs.All())
	}
}

func TestWriterStoreDownThenBack(t *testing.T) {
	st := &memStore{fail: true}
	w := NewWriter(st, WriterOptions{Batch: 2, Interval: 5 * time.Millisecond})
	for i := range 7 {
		if !w.Add(rec(i)) {
			t.Fatalf("Add %d refused", i)
		}
	}
	// While the store is down nothing is written, nothing dropped: the
	// records wait (a failed batch in hand, the rest in the buffer).
	waitFor(t, "three failed writes", func() bool { st.mu.Lock(); defer st.mu.Unlock(); return st.calls >= 3 })
	if recs, _ := st.snapshot(); len(recs) != 0 {
		t.Fatalf("written %d records to a store that is down", len(recs))
	}
	if w.Dropped() != 0 || w.Pending() != 7 {
		t.Fatalf("Dropped %d Pending %d while the store is down, want 0 and 7", w.Dropped(), w.Pending())
	}
	st.setFail(false)
	waitFor(t, "the waiting records written", func() bool { r, _ := st.snapshot(); return len(r) == 7 })
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if w.Written() != 7 || w.Dropped() != 0 {
		t.Fatalf("Written %d Dropped %d, want 7 and 0", w.Written(), w.Dropped())
	}
}

func TestWriterCloseFlushes(t *testing.T) {
	st := &memStore{}
	w := NewWriter(st, WriterOptions{Interval: time.Hour})
	for i := range 10 {
		w.Add(rec(i))
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if recs, _ := st.snapshot(); len(recs) != 10 {
		t.Fatalf("Close wrote %d records, want 10", len(recs))
	}
	if w.Add(rec(11)) {
		t.Fatal("Add after Close accepted a record")
	}
	if err := w.Close(); err != nil { // a second Close is harmless
		t.Fatal(err)
	}
}

func TestWriterCloseStoreDownLoses(t *testing.T) {
	st := &memStore{fail: true}
	w := NewWriter(st, WriterOptions{Interval: 5 * time.Millisecond, CloseTimeout: 30 * time.Millisecond})
	for i := range 4 {
		w.Add(rec(i))
	}
	err := w.Close()
	if !errors.Is(err, errDown) || !errors.Is(err, errLost) {
		t.Fatalf("Close = %v, want the store's error and the loss", err)
	}
	if w.Dropped() != 4 {
		t.Fatalf("Dropped = %d, want the 4 records lost", w.Dropped())
	}
}

func TestWriterPricesRecords(t *testing.T) {
	st := &memStore{}
	w := NewWriter(st, WriterOptions{Interval: time.Hour, Prices: map[string]Price{"qwen": {Input: 1, Cached: 0.5, Output: 2}}})
	r := rec(0)
	r.PromptTokens, r.CachedTokens, r.CompletionTokens = 1000, 400, 100
	w.Add(r)
	g := rec(1)
	g.Model = "gemma" // no price
	w.Add(g)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	recs, _ := st.snapshot()
	if want := (600*1 + 400*0.5 + 100*2) / 1e6; recs[0].Cost != want {
		t.Errorf("qwen's cost = %g, want %g", recs[0].Cost, want)
	}
	if recs[1].Cost != 0 {
		t.Errorf("gemma's cost = %g, want 0 (no price)", recs[1].Cost)
	}
}

// TestWriterPricesTheModelThatAnswered: a record is priced at the price
// of the model that answered it (a fallback, a rollout's share), not at
// the price of the one asked for; without one, at the one asked for's.
func TestWriterPricesTheModelThatAnswered(t *testing.T) {
	prices := map[string]Price{"cheap": {Input: 1, Output: 1}, "dear": {Input: 100, Output: 100}}
	tests := []struct {
		name, model, served string
		want                float64 // per token
	}{
		{"no fallback", "cheap", "cheap", 1},
		{"a dear fallback of a cheap model", "cheap", "dear", 100},
		{"a cheap fallback of a dear model", "dear", "cheap", 1},
		{"a fallback without a price", "dear", "free", 0},
		{"no model reached", "dear", "", 100},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := &memStore{}
			w := NewWriter(st, WriterOptions{Interval: time.Hour, Prices: prices})
			r := rec(0)
			r.Model, r.ServedModel = tt.model, tt.served
			r.PromptTokens, r.CompletionTokens = 1000, 1000
			w.Add(r)
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			recs, _ := st.snapshot()
			if want := tt.want * 2000 / 1e6; recs[0].Cost != want {
				t.Errorf("cost = %g, want %g", recs[0].Cost, want)
			}
		})
	}
}

func TestWriterRetentionSweep(t *testing.T) {
	st := &memStore{}
	now := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
	w := NewWriter(st, WriterOptions{Retention: 90 * 24 * time.Hour, Now: func() time.Time { return now }})
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if len(st.pruned) != 1 || !st.pruned[0].Equal(now.Add(-90*24*time.Hour)) {
		t.Fatalf("pruned %v, want once before %v", st.pruned, now.Add(-90*24*time.Hour))
	}
}
