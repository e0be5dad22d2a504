package gateway

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/auth"
	"github.com/llmedge/llmedge/backends/pool"
)

// The class is the credential's, lowered (never raised) by the header; a
// header naming no class is refused before any replica is asked.
func TestClassify(t *testing.T) {
	tests := []struct {
		name       string
		cred       api.Priority
		header     []string // nil: no header
		want       api.Priority
		wantStatus int
		wantEngine int // the engine priority sent (critical -1, standard 0, sheddable 1)
	}{
		{name: "the credential's", cred: api.PriorityCritical, want: api.PriorityCritical, wantStatus: 200, wantEngine: -1},
		{name: "lowered", cred: api.PriorityCritical, header: []string{"sheddable"}, want: api.PrioritySheddable, wantStatus: 200, wantEngine: 1},
		{name: "raising ignored", cred: api.PrioritySheddable, header: []string{"critical"}, want: api.PrioritySheddable, wantStatus: 200, wantEngine: 1},
		{name: "case and spaces", cred: api.PriorityStandard, header: []string{" Sheddable "}, want: api.PrioritySheddable, wantStatus: 200, wantEngine: 1},
		{name: "unknown class", cred: api.PriorityStandard, header: []string{"urgent"}, wantStatus: 400},
		{name: "empty", cred: api.PriorityStandard, header: []string{""}, wantStatus: 400},
		{name: "twice", cred: api.PriorityStandard, header: []string{"standard", "sheddable"}, wantStatus: 400},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, fb := newTestGateway(t, map[string]script{"http://a": {deltas: []string{"a"}}}, "http://a")
			g.Models["qwen"].EnginePriority = []int{-1, 0, 1}
			g.PriorityOf = func(*auth.Principal) api.Priority { return tt.cred }
			p := &Pipeline{Gateway: g}
			w := httptest.NewRecorder()
			r := httptest.NewRequest("POST", "/tasks/assistant_inference", nil)
			if tt.header != nil {
				r.Header[api.PriorityHeader] = tt.header
			}
			ex := newExchange(w, r, testDoor{})
			ex.Stage, ex.Chat = StageAuthorized, request(false).Chat()
			ex.Principal = &auth.Principal{Subject: "alice", Scopes: []string{"model:qwen"}}
			r = r.WithContext(context.WithValue(r.Context(), exchangeKey{}, ex))
			p.Through(w, r, testDoor{}, StageRouted)
			if w.Code != tt.wantStatus {
				t.Fatalf("status %d, want %d: %s", w.Code, tt.wantStatus, w.Body)
			}
			if tt.wantStatus != 200 {
				if len(fb.calls) != 0 || !strings.Contains(w.Body.String(), api.PriorityHeader) {
					t.Errorf("refusal %s after %d replica calls", w.Body, len(fb.calls))
				}
				return
			}
			if ex.Priority != tt.want {
				t.Errorf("class %v, want %v", ex.Priority, tt.want)
			}
			if fb.last == nil || fb.last.Priority == nil || *fb.last.Priority != tt.wantEngine {
				t.Errorf("engine priority %v, want %d", fb.last.Priority, tt.wantEngine)
			}
		})
	}
}

// Without engine_priority, no priority goes to the replica.
func TestNoEnginePriority(t *testing.T) {
	g, fb := newTestGateway(t, map[string]script{"http://a": {deltas: []string{"a"}}}, "http://a")
	if w := serve(g, request(false)); w.Code != 200 || fb.last.Priority != nil {
		t.Fatalf("status %d, priority %v", w.Code, fb.last.Priority)
	}
}

// A sheddable request meets a saturated model: 429 at once with
// Retry-After, in the door's shape; a standard one waits its queue limit
// and is refused with 429 too, not later.
func TestOverloadRefusals(t *testing.T) {
	g, _ := newTestGatewayOpts(t, pool.Options{QueueLength: 10, QueueTimeout: 300 * time.Millisecond},
		map[string]script{"http://a": {deltas: []string{"a"}}}, "http://a")
	m := g.Models["qwen"]
	m.Pool.Replicas()[0].MaxConcurrency = 1
	held, err := m.Pool.Acquire(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release(pool.Success)
	for _, tc := range []struct {
		prio     api.Priority
		min, max time.Duration
		want     string
		shed     bool
	}{
		{api.PrioritySheddable, 0, 100 * time.Millisecond, "sheddable requests are refused", true},
		{api.PriorityStandard, 250 * time.Millisecond, 2 * time.Second, "within the queue limit (300ms)", false},
	} {
		w := httptest.NewRecorder()
		r := httptest.NewRequest("POST", "/tasks/assistant_inference", nil)
		ex := newExchange(w, r, testDoor{})
		ex.Stage, ex.Chat, ex.Priority = StageAuthorized, request(false).Chat(), tc.prio
		start := time.Now()
		g.Serve(w, r, ex)
		took := time.Since(start)
		if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") == "" ||
			!strings.Contains(w.Body.String(), tc.want) || took < tc.min || took > tc.max || ex.Shed != tc.shed {
			t.Errorf("%v: %d after %v (Retry-After %q, shed %v): %s", tc.prio, w.Code, took,
				w.Header().Get("Retry-After"), ex.Shed, w.Body)
		}
	}
}
