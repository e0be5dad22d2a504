package simulator

import (
	"context"
	"testing"
	"time"
)

// waitFor polls cond until it holds, or fails the test after 5s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestFIFOOrderAndCancel(t *testing.T) {
	tests := []struct {
		name   string
		cancel []int // waiters whose clients leave
		want   []int // the order the others are granted
	}{
		{"in arrival order", nil, []int{0, 1, 2, 3}},
		{"a cancelled waiter is skipped", []int{1}, []int{0, 2, 3}},
		{"first and last cancelled", []int{0, 3}, []int{1, 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fifo{limit: 1}
			if !f.acquire(t.Context()) {
				t.Fatal("the first acquire waited")
			}
			granted := make(chan int, 4)
			cancels := make([]context.CancelFunc, 4)
			for i := range 4 {
				ctx, cancel := context.WithCancel(t.Context())
				cancels[i] = cancel
				go func() {
					if f.acquire(ctx) {
						granted <- i
					} else {
						granted <- -1 - i
					}
				}()
				waitFor(t, "the waiter to queue", func() bool { return f.waiting() == i+1 })
			}
			for _, i := range tt.cancel {
				cancels[i]()
				if got := <-granted; got != -1-i {
					t.Fatalf("cancelling waiter %d: got %d", i, got)
				}
			}
			if n := f.waiting(); n != 4-len(tt.cancel) {
				t.Errorf("%d waiting after cancels, want %d", n, 4-len(tt.cancel))
			}
			for _, want := range tt.want {
				f.release() // the holder's unit passes to the next waiter
				if got := <-granted; got != want {
					t.Fatalf("granted %d, want %d", got, want)
				}
			}
			f.release()
			if f.held != 0 || f.waiting() != 0 {
				t.Errorf("held %d waiting %d at the end", f.held, f.waiting())
			}
			for _, c := range cancels {
				c()
			}
		})
	}
}

func TestFIFOSetLimit(t *testing.T) {
	f := &fifo{limit: 1}
	f.acquire(t.Context())
	done := make(chan bool, 3)
	for range 3 {
		go func() { done <- f.acquire(t.Context()) }()
	}
	waitFor(t, "3 waiters", func() bool { return f.waiting() == 3 })
	f.setLimit(3) // two more fit now
	for range 2 {
		if !<-done {
			t.Fatal("acquire failed")
		}
	}
	if f.waiting() != 1 {
		t.Fatalf("%d waiting, want 1", f.waiting())
	}
	f.setLimit(0) // no limit
	if !<-done {
		t.Fatal("acquire failed")
	}
	f.setLimit(1)
	for range 4 {
		f.release()
	}
	if !f.acquire(t.Context()) || f.held != 1 {
		t.Errorf("after draining, held %d", f.held)
	}

	// A context already over does not queue.
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if f.acquire(ctx) {
		t.Error("acquired with a cancelled context while full")
	}
}

// TestFIFOGrantRacesCancel grants units while their waiters leave: whatever
// wins, no unit is lost or duplicated.
func TestFIFOGrantRacesCancel(t *testing.T) {
	f := &fifo{limit: 2}
	for range 200 {
		ctx, cancel := context.WithCancel(t.Context())
		f.acquire(t.Context())
		f.acquire(t.Context())
		res := make(chan bool, 1)
		go func() { res <- f.acquire(ctx) }()
		waitFor(t, "the waiter", func() bool { return f.waiting() == 1 })
		go cancel()
		f.release()
		if <-res {
			f.release()
		}
		f.release()
		if f.held != 0 || f.waiting() != 0 {
			t.Fatalf("held %d waiting %d", f.held, f.waiting())
		}
	}
}
