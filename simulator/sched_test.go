package simulator

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"
)

// The scheduler's decisions, step by step: "+name:prio" arrives (joins
// the waiting requests), "-name" ends (releases its slot or its wait).
func TestSchedulerOrder(t *testing.T) {
	tests := []struct {
		name        string
		policy      string
		limit       int
		steps       []string
		running     []string // sorted
		waiting     []string // in the order they will run
		preemptions int64
		preempted   []string // those preempted at least once
	}{
		{name: "fcfs ignores priority", policy: SchedulingFCFS, limit: 2,
			steps:   []string{"+a:5", "+b:5", "+c:9", "+d:-3", "-a"},
			running: []string{"b", "c"}, waiting: []string{"d"}},
		{name: "fcfs never preempts", policy: SchedulingFCFS, limit: 1,
			steps:   []string{"+a:9", "+b:-9"},
			running: []string{"a"}, waiting: []string{"b"}},
		{name: "priority admits lower value first", policy: SchedulingPriority, limit: 1,
			steps:   []string{"+a:0", "+b:2", "+c:1", "+d:2"},
			running: []string{"a"}, waiting: []string{"c", "b", "d"}},
		{name: "arrival order within a priority", policy: SchedulingPriority, limit: 1,
			steps:   []string{"+a:1", "+b:1", "+c:1", "-a"},
			running: []string{"b"}, waiting: []string{"c"}},
		{name: "a better priority preempts the worst running, the latest of equals", policy: SchedulingPriority, limit: 3,
			steps:       []string{"+a:1", "+b:2", "+c:2", "+d:0"},
			running:     []string{"a", "b", "d"},
			waiting:     []string{"c"},
			preemptions: 1, preempted: []string{"c"}},
		{name: "an equal priority does not preempt", policy: SchedulingPriority, limit: 2,
			steps:   []string{"+a:1", "+b:1", "+c:1"},
			running: []string{"a", "b"}, waiting: []string{"c"}},
		{name: "a worse priority waits", policy: SchedulingPriority, limit: 1,
			steps:   []string{"+a:0", "+b:1"},
			running: []string{"a"}, waiting: []string{"b"}},
		{name: "the preempted resumes before later arrivals of its priority", policy: SchedulingPriority, limit: 1,
			steps:       []string{"+a:1", "+b:1", "+c:0", "-c"},
			running:     []string{"a"},
			waiting:     []string{"b"},
			preemptions: 1, preempted: []string{"a"}},
		{name: "each better arrival preempts one", policy: SchedulingPriority, limit: 2,
			steps:       []string{"+h1:1", "+h2:1", "+h3:1", "+l1:0", "+l2:0"},
			running:     []string{"l1", "l2"},
			waiting:     []string{"h1", "h2", "h3"},
			preemptions: 2, preempted: []string{"h1", "h2"}},
		{name: "a request leaving the wait passes nothing on", policy: SchedulingPriority, limit: 1,
			steps:   []string{"+a:1", "+b:0", "-b"},
			running: []string{"a"}, preemptions: 1, preempted: []string{"a"}},
		{name: "no cap runs everyone", policy: SchedulingPriority, limit: 0,
			steps:   []string{"+a:1", "+b:0", "+c:2"},
			running: []string{"a", "b", "c"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var s scheduler
			s.configure(tt.limit, tt.policy)
			reqs := map[string]*slotReq{}
			names := map[*slotReq]string{}
			for _, step := range tt.steps {
				name, prio, _ := strings.Cut(step[1:], ":")
				if step[0] == '-' {
					s.release(reqs[name])
					continue
				}
				r := s.request(atoi(t, prio))
				reqs[name], names[r] = r, name
				s.mu.Lock()
				s.joinLocked(r)
				s.mu.Unlock()
			}
			var running, waiting, preempted []string
			for _, r := range s.running {
				running = append(running, names[r])
			}
			slices.Sort(running)
			order := slices.Clone(s.waiting)
			slices.SortFunc(order, func(a, b *slotReq) int {
				if s.ahead(a, b) {
					return -1
				}
				return 1
			})
			for _, r := range order {
				waiting = append(waiting, names[r])
			}
			for r, n := range names {
				if r.preempted > 0 {
					preempted = append(preempted, n)
				}
			}
			slices.Sort(preempted)
			if !slices.Equal(running, tt.running) || !slices.Equal(waiting, tt.waiting) ||
				s.preemptions.Load() != tt.preemptions || !slices.Equal(preempted, tt.preempted) {
				t.Errorf("running %v waiting %v preemptions %d (%v); want %v %v %d (%v)",
					running, waiting, s.preemptions.Load(), preempted,
					tt.running, tt.waiting, tt.preemptions, tt.preempted)
			}
		})
	}
}

func atoi(t *testing.T, s string) int {
	n := 0
	neg := strings.HasPrefix(s, "-")
	for _, c := range strings.TrimPrefix(s, "-") {
		if c < '0' || c > '9' {
			t.Fatalf("bad number %q", s)
		}
		n = n*10 + int(c-'0')
	}
	if neg {
		return -n
	}
	return n
}

// A preempted request, in the engine: its decoding stops while the
// better one runs, and it recomputes its prompt and the tokens it had
// before going on, at PrefillPerToken each; its client sees the stall.
func TestEnginePreemptionRecomputes(t *testing.T) {
	const (
		itl     = 10 * time.Millisecond
		perTok  = time.Millisecond
		tokens  = 20 // the reply's
		preempt = 5 * itl
	)
	cfg := Config{MaxNumSeqs: 1, SchedulingPolicy: SchedulingPriority, ITL: Duration(itl),
		PrefillPerToken: Duration(perTok), NoPrefixCache: true}
	e := newEngine(cfg)
	heavy := e.sequence(cfg, plan{PromptTokens: 30})
	heavy.prio = 1
	ctx := context.Background()
	start := time.Now()
	heavyDone := make(chan time.Duration, 1)
	go func() {
		defer heavy.end()
		if !heavy.firstToken(ctx) {
			heavyDone <- -1
			return
		}
		for range tokens - 1 {
			if !heavy.decode(ctx, itl) {
				heavyDone <- -1
				return
			}
		}
		heavyDone <- time.Since(start)
	}()
	time.Sleep(preempt)
	light := e.sequence(cfg, plan{PromptTokens: 10})
	light.prio = 0
	lightStart := time.Now()
	if !light.firstToken(ctx) {
		t.Fatal("light request refused")
	}
	lightTTFT := time.Since(lightStart)
	for range 4 {
		light.decode(ctx, itl)
	}
	light.end()
	lightTook := time.Since(lightStart)
	heavyTook := <-heavyDone
	if heavyTook < 0 {
		t.Fatal("heavy request cancelled")
	}
	if e.seqs.preemptions.Load() != 1 {
		t.Fatalf("preemptions %d, want 1", e.seqs.preemptions.Load())
	}
	// The light request waited for no slot: its own prefill (10 ms), not
	// the heavy reply's remaining 150 ms.
	if lightTTFT > 60*time.Millisecond {
		t.Errorf("light TTFT %v: it did not preempt", lightTTFT)
	}
	// The heavy one: its prefill, its whole decode, the light one's run,
	// and the recompute of 30 prompt tokens and about 5 generated ones.
	undisturbed := 30*perTok + (tokens-1)*itl
	recompute := 35 * perTok
	if min := undisturbed + lightTook + recompute - 15*time.Millisecond; heavyTook < min {
		t.Errorf("heavy took %v, want at least %v (no stall or no recompute)", heavyTook, min)
	}
}
