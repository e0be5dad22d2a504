package pool

import (
	"context"
	"testing"
	"time"

	"github.com/llmedge/llmedge/api"
)

// A tenant of share 3 is served about three requests for each of a tenant
// of share 1 while both wait (every request costing the same).
func TestQueueShares(t *testing.T) {
	p, rs := newTestPool(t, Options{QueueLength: 32, QueueTimeout: time.Minute, QueueOrder: OrderFair}, "http://a:1")
	rs[0].MaxConcurrency = 1
	held, _ := p.Acquire(nil, nil)
	out := make(chan waitResult, 16)
	for i := range 8 {
		for _, tc := range []struct {
			user  string
			share float64
		}{{"plain", 0}, {"gold", 3}} {
			before := p.Waiting()
			go func() {
				l, err := p.AcquireWait(context.Background(), &Request{User: tc.user, Share: tc.share,
					Messages: []api.Message{{Role: "user", Content: "some prompt text"}}}, nil)
				out <- waitResult{tc.user, l, err}
			}()
			for deadline := time.Now().Add(10 * time.Second); p.Waiting() != before+1; time.Sleep(time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("waiter %d never queued", i)
				}
			}
		}
	}
	got := serveOrder(t, p, held, 8, out)
	gold := 0
	for _, u := range got {
		if u == "gold" {
			gold++
		}
	}
	if gold < 5 || gold > 7 {
		t.Fatalf("gold served %d of the first 8 (%v), want about 6", gold, got)
	}
	for range 8 {
		r := <-out
		r.lease.Release(Success)
	}
}
