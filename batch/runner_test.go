package batch

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeDispatcher answers lines with answer, counting calls and the
// most lines running at once.
type fakeDispatcher struct {
	answer func(ctx context.Context, l Line, call int) (Result, error)

	mu      sync.Mutex
	calls   map[string]int
	attempt map[string][]int // the Attempts each call saw
	now     int
	most    int
}

func (d *fakeDispatcher) Dispatch(ctx context.Context, l Line) (Result, error) {
	d.mu.Lock()
	if d.calls == nil {
		d.calls, d.attempt = map[string]int{}, map[string][]int{}
	}
	d.calls[l.CustomID]++
	call := d.calls[l.CustomID]
	d.attempt[l.CustomID] = append(d.attempt[l.CustomID], l.Attempts)
	d.now++
	d.most = max(d.most, d.now)
	d.mu.Unlock()
	defer func() { d.mu.Lock(); d.now--; d.mu.Unlock() }()
	return d.answer(ctx, l, call)
}

func (d *fakeDispatcher) stats(id string) (calls int, attempts []int, most int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.calls[id], append([]int(nil), d.attempt[id]...), d.most
}

// fakeGate gives room up to limit lines running.
type fakeGate struct{ limit atomic.Int64 }

func (g *fakeGate) Room(_ string, running int) int { return max(int(g.limit.Load())-running, 0) }

func gate(n int) *fakeGate {
	g := &fakeGate{}
	g.limit.Store(int64(n))
	return g
}

func answerOK(_ context.Context, l Line, _ int) (Result, error) { return ok(l), nil }

// waitFor polls the batch until it is in a final state.
func waitFor(t *testing.T, s Store, id string, within time.Duration) Batch {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		b, err := s.Batch(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if b.Status.Terminal() {
			return b
		}
		if time.Now().After(deadline) {
			t.Fatalf("batch %s is %s after %s (counts %+v)", id, b.Status, within, b.Counts)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func fastOptions(worker string) RunnerOptions {
	return RunnerOptions{Worker: worker, Lease: 3 * time.Second, Poll: 20 * time.Millisecond}
}

// created stores content and creates a batch of it, not validated (the
// runner validates).
func created(t testing.TB, s Store, content string) Batch {
	t.Helper()
	ctx := context.Background()
	f, err := s.PutFile(ctx, File{Owner: alice, Purpose: "batch"}, strings.NewReader(content))
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.CreateBatch(ctx, Batch{Owner: alice, Endpoint: "/v1/chat/completions", InputFileID: f.ID})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestRunnerRunsABatch(t *testing.T) {
	s := openSQLite(t)
	d := &fakeDispatcher{answer: answerOK}
	r := NewRunner(s, d, gate(4), fastOptions("w"))
	r.Start()
	defer r.Stop()
	b := waitFor(t, s, created(t, s, chatLines(50, "m")).ID, 10*time.Second)
	if b.Status != StatusCompleted || b.Counts != (Counts{Total: 50, Completed: 50}) || b.ErrorFileID != "" {
		t.Fatalf("batch = %s %+v error file %q", b.Status, b.Counts, b.ErrorFileID)
	}
	seen := map[string]int{}
	for _, o := range outLines(t, s, b.OutputFileID) {
		seen[o.CustomID]++
	}
	for i := range 50 {
		if id := fmt.Sprintf("req-%d", i); seen[id] != 1 {
			t.Errorf("%s in the output %d times", id, seen[id])
		}
	}
	if _, _, most := d.stats(""); most > 4 {
		t.Fatalf("%d lines ran at once; the gate gave room for 4", most)
	}
}

func TestRunnerRetries(t *testing.T) {
	s := openSQLite(t)
	d := &fakeDispatcher{answer: func(_ context.Context, l Line, call int) (Result, error) {
		res := ok(l)
		switch {
		case l.CustomID == "req-0": // the replica fails every time
			res.StatusCode, res.Body = 503, []byte(`{"error":{"message":"overloaded","type":"server_error"}}`)
		case l.CustomID == "req-1" && call == 1: // a replica dies once
			res.StatusCode, res.Body = 0, nil
		case l.CustomID == "req-2": // the line's own fault
			res.StatusCode, res.Body = 400, []byte(`{"error":{"message":"bad","code":"invalid_value"}}`)
		case l.CustomID == "req-3" && call <= 3: // the gateway refuses it, three times
			return Result{}, errors.New("saturated")
		}
		return res, nil
	}}
	o := fastOptions("w")
	o.MaxAttempts = 3
	r := NewRunner(s, d, gate(4), o)
	r.Start()
	defer r.Stop()
	b := waitFor(t, s, created(t, s, chatLines(5, "m")).ID, 20*time.Second)
	if b.Status != StatusCompleted || b.Counts != (Counts{Total: 5, Completed: 3, Failed: 2}) {
		t.Fatalf("batch = %s %+v", b.Status, b.Counts)
	}
	for _, c := range []struct {
		id       string
		attempts string
	}{
		{"req-0", "[0 1 2]"},   // tried MaxAttempts times, then written failed
		{"req-1", "[0 1]"},     // retried once
		{"req-2", "[0]"},       // a 4xx is written at once
		{"req-3", "[0 0 0 0]"}, // refusals count no attempt
		{"req-4", "[0]"},
	} {
		if _, attempts, _ := d.stats(c.id); fmt.Sprint(attempts) != c.attempts {
			t.Errorf("%s dispatched with Attempts %v, want %s", c.id, attempts, c.attempts)
		}
	}
	errs := outLines(t, s, b.ErrorFileID)
	sort.Slice(errs, func(i, j int) bool { return errs[i].CustomID < errs[j].CustomID })
	if len(errs) != 2 || errs[0].CustomID != "req-0" || errs[0].Response.StatusCode != 503 || errs[1].CustomID != "req-2" || errs[1].Error.Code != "invalid_value" {
		t.Fatalf("error file = %+v", errs)
	}
}

// TestRunnerGate: no line starts while the gate gives no room, as many
// as it gives start, and closing it stops new starts at once.
func TestRunnerGate(t *testing.T) {
	s := openSQLite(t)
	release := make(chan struct{})
	var started atomic.Int64
	d := &fakeDispatcher{answer: func(ctx context.Context, l Line, _ int) (Result, error) {
		started.Add(1)
		select {
		case <-release:
		case <-ctx.Done():
			return Result{}, ctx.Err()
		}
		return ok(l), nil
	}}
	g := gate(0)
	r := NewRunner(s, d, g, fastOptions("w"))
	r.Start()
	defer r.Stop()
	b := created(t, s, chatLines(40, "m"))
	time.Sleep(300 * time.Millisecond)
	if n := started.Load(); n != 0 {
		t.Fatalf("%d lines started with no room", n)
	}
	g.limit.Store(3)
	waitUntil(t, time.Second, func() bool { return started.Load() == 3 && r.Running("m") == 3 })
	time.Sleep(150 * time.Millisecond)
	if n := started.Load(); n != 3 {
		t.Fatalf("%d lines started with room for 3", n)
	}
	// Online load rises: the gate closes; the running lines finish and
	// nothing new starts.
	g.limit.Store(0)
	close(release)
	time.Sleep(300 * time.Millisecond)
	if n := started.Load(); n != 3 {
		t.Fatalf("%d lines started after the gate closed", n)
	}
	// It opens again: the rest run (ramping up within a second).
	g.limit.Store(8)
	b = waitFor(t, s, b.ID, 10*time.Second)
	if b.Counts.Completed != 40 {
		t.Fatalf("counts = %+v", b.Counts)
	}
}

func waitUntil(t *testing.T, within time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %s", within)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestRunnerStop: Stop cancels the running lines, gives them back
// (without an attempt) and leaves no goroutine behind.
func TestRunnerStop(t *testing.T) {
	s := openSQLite(t)
	ctx := context.Background()
	before := runtime.NumGoroutine()
	d := &fakeDispatcher{answer: func(ctx context.Context, l Line, _ int) (Result, error) {
		<-ctx.Done()
		return Result{}, ctx.Err()
	}}
	r := NewRunner(s, d, gate(5), fastOptions("w"))
	r.Start()
	b := created(t, s, chatLines(20, "m"))
	waitUntil(t, 5*time.Second, func() bool { return r.Running("m") == 5 })
	r.Stop()
	if n := r.Running("m"); n != 0 {
		t.Fatalf("Running after Stop = %d", n)
	}
	lines, err := s.Claim(ctx, "other", "m", 100, time.Minute)
	if err != nil || len(lines) != 20 {
		t.Fatalf("Claim after Stop = %d lines, %v; want all 20", len(lines), err)
	}
	for _, l := range lines {
		if l.Attempts != 0 {
			t.Fatalf("line %d given back with Attempts %d", l.Index, l.Attempts)
		}
	}
	if got, _ := s.Batch(ctx, b.ID); got.Counts.Completed != 0 {
		t.Fatalf("counts = %+v", got.Counts)
	}
	waitUntil(t, 2*time.Second, func() bool { return runtime.NumGoroutine() <= before })
}
