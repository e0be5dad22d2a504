package batch

import (
	"context"
	"errors"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// pausingClock is a settable clock that can hold a validator as it
// finishes: armed, the first call made from (*validator).finish (outside
// any transaction, so the other workers' statements are not blocked)
// waits until release, after saying so on paused. It stands for a
// validator that stalls (a GC pause, a slow disk) while its lease runs
// out.
type pausingClock struct {
	clock
	mu    sync.Mutex
	armed bool
	// in is the validator's function the pause happens in, skip the
	// calls from it to let by first.
	in      string
	skip    int
	paused  chan struct{}
	release chan struct{}
}

func newPausingClock() *pausingClock {
	return &pausingClock{clock: clock{t: time.Now()}, in: "(*validator).finish", paused: make(chan struct{}), release: make(chan struct{})}
}

func (c *pausingClock) arm() { c.mu.Lock(); c.armed = true; c.mu.Unlock() }

func (c *pausingClock) now() time.Time {
	c.mu.Lock()
	hold := c.armed && calledFrom(c.in)
	if hold && c.skip > 0 {
		c.skip, hold = c.skip-1, false
	}
	if hold {
		c.armed = false
	}
	c.mu.Unlock()
	if hold {
		close(c.paused)
		<-c.release
	}
	return c.clock.now()
}

// calledFrom reports whether fn is on the caller's stack.
func calledFrom(fn string) bool {
	pcs := make([]uintptr, 32)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(2, pcs)])
	for {
		f, more := frames.Next()
		if strings.HasSuffix(f.Function, fn) {
			return true
		}
		if !more {
			return false
		}
	}
}

// validating starts validating a batch of n lines as worker in the
// background, and returns once the validator has stored every line and
// is held before it finishes; done delivers Validate's answer once
// released.
func validating(t *testing.T, s *SQLStore, c *pausingClock, worker string, n int) (Batch, <-chan error) {
	t.Helper()
	ctx := context.Background()
	f, err := s.PutFile(ctx, File{Owner: alice, Purpose: "batch"}, strings.NewReader(chatLines(n, "m")))
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.CreateBatch(ctx, Batch{Owner: alice, Endpoint: "/v1/chat/completions", InputFileID: f.ID})
	if err != nil {
		t.Fatal(err)
	}
	c.arm()
	done := make(chan error, 1)
	go func() {
		v, err := s.Validate(ctx, worker, time.Minute)
		if err == nil && v.ID != b.ID {
			err = errors.New("validated " + v.ID)
		}
		if err == nil && v.Status != StatusCancelling {
			err = errors.New("validated as " + string(v.Status))
		}
		done <- err
	}()
	select {
	case <-c.paused:
	case err := <-done:
		t.Fatalf("the validator finished without being held: %v", err)
	case <-time.After(time.Minute):
		t.Fatal("the validator never reached its end")
	}
	return b, done
}

func lineCount(t *testing.T, s *SQLStore, id string) int {
	t.Helper()
	var n int
	if err := s.queryRow(context.Background(), `SELECT COUNT(*) FROM batch_lines WHERE batch_id = ?`, id).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// testCancelWhileValidating: a batch cancelled while a large input is
// being validated ends cancelled, with no lines to run and no files, and
// its validator gives it up without an error.
func testCancelWhileValidating(t *testing.T, s *SQLStore) {
	ctx := context.Background()
	c := newPausingClock()
	s.now = c.now
	const n = 2500 // a dozen transactions of lines
	b, done := validating(t, s, c, "v", n)
	if got := lineCount(t, s, b.ID); got != n {
		t.Fatalf("%d lines stored before the end, want %d", got, n)
	}
	cb, err := s.Cancel(ctx, b.ID)
	if err != nil || cb.Status != StatusCancelling {
		t.Fatalf("Cancel while validating = %+v, %v", cb, err)
	}
	// The validator still holds the batch: nobody finalizes it yet.
	if fin, err := s.Finalize(ctx, "f", c.clock.now()); err != nil || len(fin) != 0 {
		t.Fatalf("Finalize while the validator holds it = %+v, %v", fin, err)
	}
	close(c.release)
	if err := <-done; err != nil {
		t.Fatalf("the validator of a cancelled batch: %v", err)
	}
	if got := lineCount(t, s, b.ID); got != 0 {
		t.Fatalf("%d lines left of a cancelled batch", got)
	}
	if ls, err := s.Claim(ctx, "w", "m", 10, time.Minute); err != nil || len(ls) != 0 {
		t.Fatalf("Claim of a cancelled batch's lines = %d, %v", len(ls), err)
	}
	fin, err := s.Finalize(ctx, "f", c.clock.now())
	if err != nil || len(fin) != 1 || fin[0].Status != StatusCancelled || fin[0].OutputFileID != "" || fin[0].ErrorFileID != "" ||
		fin[0].Counts.Completed+fin[0].Counts.Failed != 0 {
		t.Fatalf("Finalize = %+v, %v", fin, err)
	}
}

// testValidatorLosesLease: a validator stalls after storing every line,
// its lease lapses, another worker validates the batch over; the first
// one's end is refused, and the batch has each line once.
func testValidatorLosesLease(t *testing.T, s *SQLStore) {
	ctx := context.Background()
	c := newPausingClock()
	s.now = c.now
	const n = 1200
	b, done := validating(t, s, c, "slow", n)
	c.add(2 * time.Minute) // past the slow validator's lease
	v, err := s.Validate(ctx, "quick", time.Minute)
	if err != nil || v.ID != b.ID || v.Status != StatusInProgress || v.Counts.Total != n {
		t.Fatalf("Validate by the second worker = %+v, %v", v, err)
	}
	close(c.release)
	if err := <-done; !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("the slow validator's end = %v, want ErrLeaseLost", err)
	}
	if got, _ := s.Batch(ctx, b.ID); got.Status != StatusInProgress || got.Counts.Total != n {
		t.Fatalf("batch after both = %+v", got)
	}
	if got := lineCount(t, s, b.ID); got != n {
		t.Fatalf("%d lines, want %d", got, n)
	}
	seen := map[string]bool{}
	for {
		ls, err := s.Claim(ctx, "w", "m", 500, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if len(ls) == 0 {
			break
		}
		for _, l := range ls {
			if seen[l.CustomID] {
				t.Fatalf("%s claimed twice", l.CustomID)
			}
			seen[l.CustomID] = true
			if err := s.Complete(ctx, "w", ok(l)); err != nil {
				t.Fatal(err)
			}
		}
	}
	fin, err := s.Finalize(ctx, "f", c.clock.now())
	if err != nil || len(fin) != 1 || fin[0].Status != StatusCompleted || fin[0].Counts != (Counts{Total: n, Completed: n}) {
		t.Fatalf("Finalize = %+v, %v", fin, err)
	}
	if out := outLines(t, s, fin[0].OutputFileID); len(out) != n || len(seen) != n {
		t.Fatalf("%d output lines, %d claimed, want %d", len(out), len(seen), n)
	}
}

// testExpiredBeforeRun: a batch whose window ended before any of its
// lines ran (validated late, its lines never claimed) expires with every
// line answered batch_expired in the error file, none claimable after.
func testExpiredBeforeRun(t *testing.T, s *SQLStore) {
	ctx := context.Background()
	c := &clock{t: time.Now()}
	s.now = c.now
	f, _ := s.PutFile(ctx, File{Owner: alice, Purpose: "batch"}, strings.NewReader(chatLines(5, "m")))
	b, err := s.CreateBatch(ctx, Batch{Owner: alice, Endpoint: "/v1/chat/completions", InputFileID: f.ID})
	if err != nil {
		t.Fatal(err)
	}
	c.add(b.CompletionWindow + time.Minute)
	if v, err := s.Validate(ctx, "v", time.Minute); err != nil || v.Status != StatusInProgress {
		t.Fatalf("Validate = %+v, %v", v, err)
	}
	fin, err := s.Finalize(ctx, "f", c.now())
	if err != nil || len(fin) != 1 || fin[0].Status != StatusExpired || fin[0].OutputFileID != "" ||
		fin[0].Counts != (Counts{Total: 5, Failed: 5}) {
		t.Fatalf("Finalize = %+v, %v", fin, err)
	}
	var ids []string
	for _, e := range outLines(t, s, fin[0].ErrorFileID) {
		if e.Error == nil || e.Error.Code != "batch_expired" {
			t.Fatalf("error line %+v", e)
		}
		ids = append(ids, e.CustomID)
	}
	sort.Strings(ids)
	if strings.Join(ids, ",") != "req-0,req-1,req-2,req-3,req-4" {
		t.Fatalf("expired lines %v", ids)
	}
	if ls, err := s.Claim(ctx, "w", "m", 10, time.Minute); err != nil || len(ls) != 0 {
		t.Fatalf("Claim after expiry = %+v, %v", ls, err)
	}
}

// testUnfinished: the status page's list holds the batches not yet
// final, the oldest first, within its limit.
func testUnfinished(t *testing.T, s *SQLStore) {
	ctx := context.Background()
	done := validBatch(t, s, chatLines(1, "m"))
	ls, _ := s.Claim(ctx, "w", "m", 1, time.Minute)
	if err := s.Complete(ctx, "w", ok(ls[0])); err != nil {
		t.Fatal(err)
	}
	if fin, err := s.Finalize(ctx, "f", time.Now()); err != nil || len(fin) != 1 {
		t.Fatalf("Finalize = %+v, %v", fin, err)
	}
	running := validBatch(t, s, chatLines(3, "m"))
	f, _ := s.PutFile(ctx, File{Owner: alice, Purpose: "batch"}, strings.NewReader(chatLines(2, "m")))
	waiting, _ := s.CreateBatch(ctx, Batch{Owner: alice, Endpoint: "/v1/chat/completions", InputFileID: f.ID})
	all, err := s.Unfinished(ctx, 10)
	if err != nil || len(all) != 2 || all[0].ID != running.ID || all[1].ID != waiting.ID {
		t.Fatalf("Unfinished = %+v, %v", all, err)
	}
	if all[0].Status != StatusInProgress || all[0].Counts.Total != 3 || all[0].Model != "m" || all[0].Owner.Subject != "alice" ||
		all[1].Status != StatusValidating {
		t.Fatalf("Unfinished = %+v", all)
	}
	if one, _ := s.Unfinished(ctx, 1); len(one) != 1 || one[0].ID != running.ID {
		t.Fatalf("Unfinished(1) = %+v", one)
	}
	for _, b := range all {
		if b.ID == done.ID {
			t.Fatal("a completed batch is listed")
		}
	}
}

// testCancelMidValidation: a cancel that lands while a large input's
// lines are being stored ends the validation at its next transaction:
// Validate answers the cancelling batch (no error for the runner to
// log), its lines are dropped, and the batch ends cancelled.
func testCancelMidValidation(t *testing.T, s *SQLStore) {
	ctx := context.Background()
	const n = 20000 // a hundred transactions of lines
	f, err := s.PutFile(ctx, File{Owner: alice, Purpose: "batch"}, strings.NewReader(chatLines(n, "m")))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := s.CreateBatch(ctx, Batch{Owner: alice, Endpoint: "/v1/chat/completions", InputFileID: f.ID})
	type answer struct {
		b   Batch
		err error
	}
	done := make(chan answer, 1)
	go func() {
		v, err := s.Validate(ctx, "v", time.Minute)
		done <- answer{v, err}
	}()
	deadline := time.Now().Add(time.Minute)
	for lineCount(t, s, b.ID) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no line stored in a minute")
		}
		time.Sleep(time.Millisecond)
	}
	if _, err := s.Cancel(ctx, b.ID); err != nil {
		t.Fatal(err)
	}
	a := <-done
	if a.err == nil && a.b.Status == StatusInProgress {
		t.Skip("the validation ended before the cancel landed (the machine is fast): nothing midway to test")
	}
	if a.err != nil || a.b.ID != b.ID || a.b.Status != StatusCancelling {
		t.Fatalf("Validate cancelled midway = %+v, %v", a.b, a.err)
	}
	if got := lineCount(t, s, b.ID); got != 0 {
		t.Fatalf("%d lines left", got)
	}
	fin, err := s.Finalize(ctx, "f", time.Now())
	if err != nil || len(fin) != 1 || fin[0].Status != StatusCancelled || fin[0].Counts.Total != 0 {
		t.Fatalf("Finalize = %+v, %v", fin, err)
	}
}

// testValidatorLosesLeaseMidway: a validator stalls inside the
// transaction of its third chunk of lines, its lease lapses, another
// worker validates the batch over (dropping the first one's lines); the
// first one's chunk is refused, and the batch has each line once. Only
// on PostgreSQL: SQLite's one writer would hold the second worker behind
// the stalled transaction (its takeover is the one at the end, above).
func testValidatorLosesLeaseMidway(t *testing.T, s *SQLStore) {
	if s.d.name != "postgres" {
		t.Skip("SQLite has one writer: a validator stalled in its transaction holds every other")
	}
	ctx := context.Background()
	c := newPausingClock()
	c.in, c.skip = "(*validator).store", 2
	s.now = c.now
	const n = 1200
	b, done := validating(t, s, c, "slow", n)
	if got := lineCount(t, s, b.ID); got != 2*linesPerInsert {
		t.Fatalf("%d lines stored when the validator stalled, want %d", got, 2*linesPerInsert)
	}
	c.add(2 * time.Minute)
	v, err := s.Validate(ctx, "quick", time.Minute)
	if err != nil || v.ID != b.ID || v.Status != StatusInProgress || v.Counts.Total != n {
		t.Fatalf("Validate by the second worker = %+v, %v", v, err)
	}
	close(c.release)
	if err := <-done; !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("the stalled validator = %v, want ErrLeaseLost", err)
	}
	if got := lineCount(t, s, b.ID); got != n {
		t.Fatalf("%d lines, want %d", got, n)
	}
	var distinct int
	if err := s.queryRow(ctx, `SELECT COUNT(DISTINCT custom_id) FROM batch_lines WHERE batch_id = ?`, b.ID).Scan(&distinct); err != nil || distinct != n {
		t.Fatalf("%d distinct custom_ids, %v", distinct, err)
	}
}
