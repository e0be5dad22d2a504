package batch

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// TestPostgresExactlyOnce: two instances (two stores on one PostgreSQL,
// a runner each) race on one batch of 2,000 lines, while a third worker
// that claimed lines died holding them, and one of the two is stopped
// and started again midway: the batch completes, every custom_id is in
// the output exactly once and the counts are right.
func TestPostgresExactlyOnce(t *testing.T) {
	dsn := postgres(t)
	ctx := context.Background()
	a, b := openPostgres(t, dsn), openPostgres(t, dsn)
	const n = 2000
	batch := created(t, a, chatLines(n, "m"))
	if v, err := a.Validate(ctx, "v", time.Minute); err != nil || v.Status != StatusInProgress {
		t.Fatalf("Validate = %+v, %v", v, err)
	}
	// The dead worker: its lines come back when its lease lapses.
	dead, err := b.Claim(ctx, "dead", "m", 40, time.Second)
	if err != nil || len(dead) != 40 {
		t.Fatalf("Claim = %d, %v", len(dead), err)
	}
	answer := func(_ context.Context, l Line, _ int) (Result, error) {
		time.Sleep(time.Duration(rand.IntN(3)) * time.Millisecond)
		return ok(l), nil
	}
	da, db := &fakeDispatcher{answer: answer}, &fakeDispatcher{answer: answer}
	ra := NewRunner(a, da, gate(16), fastOptions("a"))
	rb := NewRunner(b, db, gate(16), fastOptions("b"))
	ra.Start()
	rb.Start()
	defer rb.Stop()
	waitUntil(t, 60*time.Second, func() bool {
		cur, err := a.Batch(ctx, batch.ID)
		return err == nil && cur.Counts.Completed >= n/4
	})
	ra.Stop() // a restart: its running lines are cancelled and given back
	ra = NewRunner(a, da, gate(16), fastOptions("a2"))
	ra.Start()
	defer ra.Stop()
	got := waitFor(t, a, batch.ID, 90*time.Second)
	if got.Status != StatusCompleted || got.Counts != (Counts{Total: n, Completed: n}) || got.ErrorFileID != "" {
		t.Fatalf("batch = %s %+v error file %q", got.Status, got.Counts, got.ErrorFileID)
	}
	seen := map[string]int{}
	for _, o := range outLines(t, b, got.OutputFileID) {
		seen[o.CustomID]++
	}
	if len(seen) != n {
		t.Fatalf("%d custom_ids in the output, want %d", len(seen), n)
	}
	for i := range n {
		if id := fmt.Sprintf("req-%d", i); seen[id] != 1 {
			t.Fatalf("%s in the output %d times", id, seen[id])
		}
	}
	ca, cb := 0, 0
	for i := range n {
		x, _, _ := da.stats(fmt.Sprintf("req-%d", i))
		y, _, _ := db.stats(fmt.Sprintf("req-%d", i))
		ca, cb = ca+x, cb+y
	}
	t.Logf("instance a ran %d lines, b %d", ca, cb)
	if ca == 0 || cb == 0 {
		t.Fatalf("one instance ran every line (a %d, b %d): they did not share the batch", ca, cb)
	}
	for _, l := range dead {
		if _, attempts, _ := da.stats(l.CustomID); len(attempts) > 0 && attempts[0] != 1 {
			t.Fatalf("the dead worker's line %s taken over with Attempts %v, want 1", l.CustomID, attempts)
		}
	}
}
