package pool

import (
	"testing"
	"time"
)

// Load counts the gateway's own requests as they are now, plus what the
// engine reported beyond the gateway's own requests when it was read.
func TestLoad(t *testing.T) {
	future, past := time.Now().Add(time.Hour), time.Now().Add(-time.Hour)
	for _, tc := range []struct {
		name        string
		outstanding int64
		weight      int
		engine      *EngineLoad
		want        float64
	}{
		{"no engine figure", 3, 0, nil, 3},
		{"others' requests add", 2, 0, &EngineLoad{Running: 4, Waiting: 6, Own: 2, Until: future}, 10},
		{"own requests since finished do not linger", 0, 0, &EngineLoad{Running: 1, Own: 1, Until: future}, 0},
		{"engine behind the gateway's count", 5, 0, &EngineLoad{Running: 2, Own: 5, Until: future}, 5},
		{"stale figure ignored", 1, 0, &EngineLoad{Running: 40, Until: past}, 1},
		{"per unit of weight", 4, 2, &EngineLoad{Waiting: 4, Until: future}, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, _ := NewReplica("http://a:1")
			r.Weight = tc.weight
			r.outstanding.Store(tc.outstanding)
			if tc.engine != nil {
				r.SetEngineLoad(*tc.engine)
			}
			if got := r.Load(); got != tc.want {
				t.Errorf("Load = %v, want %v", got, tc.want)
			}
		})
	}
}

// PendingPrefill counts this instance's queued prefill and the other
// instances'; only the own part is what this instance tells them.
func TestPendingPrefillCountsPeers(t *testing.T) {
	for _, tc := range []struct {
		name              string
		own, peer         int64
		wantPending, own2 int64
	}{
		{"own only", 30, 0, 30, 30},
		{"peers only", 0, 250, 250, 0},
		{"both", 30, 250, 280, 30},
		{"a negative peer figure counts as none", 30, -5, 30, 30},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, _ := NewReplica("http://a:1")
			r.pending.Store(tc.own)
			r.SetPeerPrefill(tc.peer)
			if got := r.PendingPrefill(); got != tc.wantPending {
				t.Errorf("PendingPrefill = %d, want %d", got, tc.wantPending)
			}
			if got := r.OwnPrefill(); got != tc.own2 {
				t.Errorf("OwnPrefill = %d, want %d", got, tc.own2)
			}
		})
	}
}

// The hook hears of every change of the replica's own pending prefill:
// when a request that queues prefill is placed, and at its first token.
func TestOnPendingChange(t *testing.T) {
	r, _ := NewReplica("http://a:1")
	p := New("m", fixedPrefill(40))
	p.Set([]*Replica{r})
	calls := 0
	p.Replicas()[0].OnPendingChange(func() { calls++ })
	l, err := p.Acquire(&Request{Model: "m"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if calls != 1 || r.OwnPrefill() != 40 {
		t.Fatalf("after the decision: %d calls, own prefill %d", calls, r.OwnPrefill())
	}
	l.FirstToken()
	l.Release(Success)
	if calls != 2 || r.OwnPrefill() != 0 {
		t.Fatalf("after the first token: %d calls, own prefill %d", calls, r.OwnPrefill())
	}
	r.OnPendingChange(nil)
	l, _ = p.Acquire(&Request{Model: "m"}, nil)
	l.Release(Success)
	if calls != 2 {
		t.Fatalf("%d calls after the hook was removed", calls)
	}
}

// fixedPrefill sends every request to the first replica, predicting n
// blocks of prefill.
type fixedPrefill int64

func (n fixedPrefill) Select(_ *Request, c []*Replica) Choice {
	return Choice{Replica: c[0], Reason: ReasonLoad, Prefill: int64(n)}
}
