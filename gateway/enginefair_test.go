package gateway

import (
	"net/http/httptest"
	"testing"
	"time"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/auth"
)

// A tenant's engine priority is its class's number spread by its share
// of the class's recent tokens: the lighter, the sooner.
func TestEngineSharesPriority(t *testing.T) {
	type charge struct {
		after  time.Duration // since the start
		class  int
		tenant string
		tokens int
	}
	tests := []struct {
		name    string
		charges []charge
		at      time.Duration
		base    int
		class   int
		tenant  string
		want    int
	}{
		{name: "nobody yet", base: 0, class: 1, tenant: "a", want: 0},
		{name: "alone has all of it", charges: []charge{{0, 1, "a", 100}},
			base: 0, class: 1, tenant: "a", want: FairLevels - 1},
		{name: "the light one", charges: []charge{{0, 1, "heavy", 950}, {0, 1, "light", 50}},
			base: 0, class: 1, tenant: "light", want: 0},
		{name: "the heavy one", charges: []charge{{0, 1, "heavy", 950}, {0, 1, "light", 50}},
			base: 0, class: 1, tenant: "heavy", want: 9},
		{name: "a newcomer beside a heavy one", charges: []charge{{0, 1, "heavy", 950}},
			base: 0, class: 1, tenant: "new", want: 0},
		{name: "even shares", charges: []charge{{0, 1, "a", 100}, {0, 1, "b", 100}},
			base: 0, class: 1, tenant: "a", want: 5},
		{name: "within its class only", charges: []charge{{0, 0, "crit", 1000}, {0, 1, "a", 10}},
			base: 0, class: 1, tenant: "a", want: FairLevels - 1},
		{name: "classes keep their order", charges: []charge{{0, 0, "a", 10}},
			base: -1, class: 0, tenant: "a", want: -1},
		{name: "sheddable band", charges: []charge{{0, 2, "a", 10}, {0, 2, "b", 990}},
			base: 1, class: 2, tenant: "a", want: 10},
		{name: "old use fades", charges: []charge{{0, 1, "a", 1000}, {6 * FairHalfLife, 1, "b", 100}},
			at: 6 * FairHalfLife, base: 0, class: 1, tenant: "a", want: 1},
		{name: "faded out after a long idle (rescaled)", charges: []charge{{0, 1, "a", 1000}, {50 * FairHalfLife, 1, "b", 100}},
			at: 50 * FairHalfLife, base: 0, class: 1, tenant: "a", want: 0},
		{name: "recent use after a rescale", charges: []charge{{0, 1, "a", 1000}, {50 * FairHalfLife, 1, "b", 100}, {50 * FairHalfLife, 1, "a", 100}},
			at: 50 * FairHalfLife, base: 0, class: 1, tenant: "a", want: 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := NewEngineShares()
			start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			for _, c := range tt.charges {
				s.now = func() time.Time { return start.Add(c.after) }
				s.Charge(c.class, c.tenant, c.tokens)
			}
			if got := s.Priority(tt.base, tt.class, tt.tenant); got != tt.want {
				t.Errorf("priority %d, want %d", got, tt.want)
			}
		})
	}
}

// Computing a share allocates nothing; a known tenant's charge neither.
func TestEngineSharesAllocs(t *testing.T) {
	s := NewEngineShares()
	s.Charge(1, "a", 10)
	if n := testing.AllocsPerRun(100, func() {
		s.Charge(1, "a", s.Priority(0, 1, "a")+1)
	}); n != 0 {
		t.Errorf("%v allocations per request", n)
	}
}

// Through the routing stage: with engine_priority fair the engine gets
// the heavy tenant's priority worse than the light one's, both in the
// class's band, and the tenants' tokens are counted; without it, the
// class's number.
func TestEnginePriorityFair(t *testing.T) {
	g, fb := newTestGateway(t, map[string]script{"http://a": {deltas: []string{"a", "b", "c"}}}, "http://a")
	m := g.Models["qwen"]
	m.EnginePriority = []int{-1, 0, 1}
	sent := func(user string, class api.Priority) int {
		t.Helper()
		w := httptest.NewRecorder()
		r := httptest.NewRequest("POST", "/tasks/assistant_inference", nil)
		ex := newExchange(w, r, testDoor{})
		ex.Stage, ex.Chat, ex.Priority = StageAuthorized, request(false).Chat(), class
		ex.Principal = &auth.Principal{Subject: user}
		g.Serve(w, r, ex)
		if w.Code != 200 || fb.last == nil || fb.last.Priority == nil {
			t.Fatalf("status %d, priority %v", w.Code, fb.last.Priority)
		}
		return *fb.last.Priority
	}
	if got := sent("heavy", api.PriorityStandard); got != 0 {
		t.Fatalf("class mode: priority %d, want the class's 0", got)
	}
	m.EngineFair = NewEngineShares()
	first := sent("heavy", api.PriorityStandard)
	for range 20 {
		sent("heavy", api.PriorityStandard)
	}
	heavy := sent("heavy", api.PriorityStandard)
	light := sent("light", api.PriorityStandard)
	crit := sent("heavy", api.PriorityCritical)
	if first != 0 || heavy != FairLevels-1 || light != 0 || crit != -FairLevels {
		t.Errorf("priorities: heavy's first %d, heavy %d, light %d, heavy critical %d; want 0, %d, 0, %d",
			first, heavy, light, crit, FairLevels-1, -FairLevels)
	}
}
