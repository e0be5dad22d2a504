package bench

import (
	"math"
	"reflect"
	"strings"
	"testing"
	"time"
)

// longSpec is a workload long enough for its statistics to settle.
func longSpec(hot float64, inProgress bool) workloadSpec {
	c := DefaultRoutingConfig()
	s := c.spec(WorkloadUniform)
	s.HotShare, s.InProgress = hot, inProgress
	s.Span = 300 * time.Second
	return s
}

func TestWorkloadShape(t *testing.T) {
	tests := []struct {
		name       string
		spec       workloadSpec
		wantHot    float64 // share of tenant 0, ±0.03
		inProgress bool
	}{
		{"uniform", longSpec(0, false), 1.0 / 32, false},
		{"skewed", longSpec(0.8, false), 0.8, false},
		{"uniform, joined in progress", longSpec(0, true), 1.0 / 32, true},
		{"skewed, joined in progress", longSpec(0.8, true), 0.8, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := tt.spec
			w := newWorkload(s)
			// Poisson at Rate: the count is within 4 standard deviations.
			want := s.Rate * s.Span.Seconds()
			if got := float64(len(w.Turns)); math.Abs(got-want) > 4*math.Sqrt(want) {
				t.Errorf("%v turns, want about %v", got, want)
			}
			if got := w.hotShare(0); math.Abs(got-tt.wantHot) > 0.03 {
				t.Errorf("tenant 0 sent %.3f of the turns, want %.3f", got, tt.wantHot)
			}
			if len(w.System) != s.Tenants {
				t.Fatalf("%d system prompts, want %d", len(w.System), s.Tenants)
			}
			for k, p := range w.System {
				// The name adds 7 words to the drawn length.
				if n := len(strings.Fields(p)) - 7; n < s.SystemWords[0] || n > s.SystemWords[1] {
					t.Errorf("tenant %d: system prompt of %d words, want %v", k, n, s.SystemWords)
				}
			}
			checkConversations(t, s, w, tt.inProgress)
		})
	}
}

// checkConversations asserts that every conversation's turns are numbered
// in order, spaced by MinGap, stay with one tenant and carry their
// history on their first turn exactly when joined in progress.
func checkConversations(t *testing.T, s workloadSpec, w *workload, inProgress bool) {
	t.Helper()
	type seen struct {
		tenant, n int
		at        time.Duration
	}
	last := map[int]seen{}
	joinedLate := 0
	for i, tr := range w.Turns {
		if i > 0 && tr.At < w.Turns[i-1].At {
			t.Fatalf("turn %d due before the one before it", i)
		}
		prev, ok := last[tr.Conv]
		switch {
		case !ok:
			if len(tr.Prior) != 2*(tr.N-1) {
				t.Errorf("conversation %d starts at turn %d with %d prior messages", tr.Conv, tr.N, len(tr.Prior))
			}
			if !inProgress && tr.N != 1 {
				t.Errorf("conversation %d starts at turn %d without joining in progress", tr.Conv, tr.N)
			}
			if tr.N > 1 {
				joinedLate++
			}
		case tr.Prior != nil:
			t.Errorf("conversation %d turn %d carries prior history", tr.Conv, tr.N)
		case tr.N != prev.n+1 || tr.Tenant != prev.tenant:
			t.Errorf("conversation %d: turn %d (tenant %d) after turn %d (tenant %d)", tr.Conv, tr.N, tr.Tenant, prev.n, prev.tenant)
		case tr.At-prev.at < s.MinGap:
			t.Errorf("conversation %d: turns %v apart, want at least %v", tr.Conv, tr.At-prev.at, s.MinGap)
		}
		if tr.N > s.Turns[1] {
			t.Errorf("conversation %d reached turn %d, more than %d", tr.Conv, tr.N, s.Turns[1])
		}
		if n := len(strings.Fields(tr.User)) - 4; n < s.UserWords[0] || n > s.UserWords[1] {
			t.Errorf("user message of %d words, want %v", n, s.UserWords)
		}
		last[tr.Conv] = seen{tr.Tenant, tr.N, tr.At}
	}
	if len(last) != w.Convs {
		t.Errorf("%d conversations seen, %d started", len(last), w.Convs)
	}
	if inProgress && joinedLate == 0 {
		t.Error("no conversation joined in progress")
	}
}

func TestWorkloadIsSeeded(t *testing.T) {
	s := DefaultRoutingConfig().spec(WorkloadSkewed)
	a, b := newWorkload(s), newWorkload(s)
	if !reflect.DeepEqual(a, b) {
		t.Error("the same spec gave two workloads")
	}
	s.Seed++
	if c := newWorkload(s); reflect.DeepEqual(a.Turns, c.Turns) {
		t.Error("another seed gave the same schedule")
	}
}

func TestSystemPromptsDifferFromTheStart(t *testing.T) {
	w := newWorkload(DefaultRoutingConfig().spec(WorkloadUniform))
	// Tenants must not share a cache block: the gateway's index cuts
	// blocks of 64 bytes, the simulator of 16 words.
	firsts := map[string]int{}
	for k, p := range w.System {
		key := strings.Join(strings.Fields(p)[:16], " ")
		if len(key) > 64 {
			key = key[:64]
		}
		if j, ok := firsts[key]; ok {
			t.Errorf("tenants %d and %d share their first block %q", j, k, key)
		}
		firsts[key] = k
	}
}
