package adapters

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llmedge/llmedge/backends/pool"
)

// engine is a replica's runtime LoRA endpoints: it records the calls, as
// "load <name> <path>" and "unload <name>".
type engine struct {
	*httptest.Server
	mu    sync.Mutex
	calls []string
}

func newEngine(t *testing.T) *engine {
	e := &engine{}
	e.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var b loadBody
		_ = json.NewDecoder(r.Body).Decode(&b)
		e.mu.Lock()
		defer e.mu.Unlock()
		switch r.URL.Path {
		case pathLoad:
			e.calls = append(e.calls, "load "+b.Name+" "+b.Path)
		case pathUnload:
			e.calls = append(e.calls, "unload "+b.Name)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(e.Close)
	return e
}

func (e *engine) took() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := e.calls
	e.calls = nil
	return out
}

// observer records what the set told the metrics.
type observer struct{ loads, unloaded []string }

func (o *observer) AdapterLoad(model, label string, ok bool) { o.loads = append(o.loads, label) }
func (o *observer) AdapterUnloaded(model, adapter string)    { o.unloaded = append(o.unloaded, adapter) }

func TestSetCheck(t *testing.T) {
	re, err := CompilePattern("team-[a-z]+")
	if err != nil {
		t.Fatal(err)
	}
	static := &Set{Names: []string{"sql"}}
	dynamic := &Set{Names: []string{"sql"}, Dynamic: true}
	narrow := &Set{Names: []string{"sql"}, Dynamic: true, Pattern: re}
	for _, tc := range []struct {
		set  *Set
		name string
		want error
	}{
		{static, "sql", nil},
		{static, "other", ErrUnknown},
		{static, "../x", ErrBadName},
		{dynamic, "anything", nil},
		{dynamic, "/etc/shadow", ErrBadName},
		{dynamic, "../../../etc/passwd", ErrBadName},
		{narrow, "sql", nil}, // configured names need not match
		{narrow, "team-a", nil},
		{narrow, "team-a1", ErrBadName},
		{narrow, "xteam-a", ErrBadName},
	} {
		if err := tc.set.Check(tc.name); !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
			t.Errorf("%q: %v, want %v", tc.name, err, tc.want)
		}
	}
}

func TestSetLabel(t *testing.T) {
	s := &Set{Names: []string{"sql"}, Dynamic: true, Known: NewTable()}
	s.Known.MarkLoaded("http://a:1", "held")
	for name, want := range map[string]string{"sql": "sql", "held": "held", "invented": Other} {
		if got := s.Label(name); got != want {
			t.Errorf("%s: %q, want %q", name, got, want)
		}
	}
}

// placeOn runs Place for one request and tells the replica it may use.
func placeOn(t *testing.T, s *Set, h *Host, tenant, adapter string, all []*pool.Replica) (string, error) {
	t.Helper()
	exclude, err := s.Place(context.Background(), h, tenant, adapter, all, nil)
	if err != nil {
		return "", err
	}
	var left []string
	for _, r := range all {
		if !slices.Contains(exclude, r) {
			left = append(left, r.URL)
		}
	}
	if len(left) != 1 {
		t.Fatalf("%s: may go to %v", adapter, left)
	}
	return left[0], nil
}

// TestSetBounds: a full replica makes room by unloading an idle adapter
// (never one in use); a configured adapter may push out one that is not
// configured; a tenant's loads are bounded; every replica full of
// adapters in use is SlotsFullError.
func TestSetBounds(t *testing.T) {
	e := newEngine(t)
	all := replicas(t, e.URL)
	url := e.URL
	obs := &observer{}
	h := &Host{Model: "qwen", Client: e.Client(), Observer: obs}
	newSet := func(idle time.Duration) *Set {
		return &Set{Names: []string{"sql"}, Dynamic: true, Path: "/loras/{adapter}", Cap: 2, Idle: idle,
			TenantLoads: 3, TenantWindow: time.Hour, Known: NewTable()}
	}

	t.Run("idle adapter unloaded to make room", func(t *testing.T) {
		s := newSet(time.Minute)
		s.Known.SetListed(url, []string{"old", "recent"}, time.Now().Add(-time.Hour))
		end := s.Begin(all[0], "recent") // in use, and so not idle
		end()
		if got, err := placeOn(t, s, h, "a", "new", all); err != nil || got != url {
			t.Fatalf("%q %v", got, err)
		}
		if got := e.took(); !slices.Equal(got, []string{"unload old", "load new /loras/new"}) {
			t.Errorf("calls %q", got)
		}
		if !slices.Equal(s.Known.View(url).Loaded, []string{"new", "recent"}) {
			t.Errorf("held %v", s.Known.View(url).Loaded)
		}
		if !slices.Equal(obs.unloaded, []string{"old"}) {
			t.Errorf("metrics told of unloads %v", obs.unloaded)
		}
	})

	t.Run("slots full of adapters in use", func(t *testing.T) {
		s := newSet(time.Hour)
		s.Known.MarkLoaded(url, "x1")
		s.Known.MarkLoaded(url, "x2")
		defer s.Begin(all[0], "x1")()
		_, err := placeOn(t, s, h, "a", "x3", all)
		var full *SlotsFullError
		if !errors.As(err, &full) || full.Cap != 2 || full.RetryAfter <= 0 || full.RetryAfter > time.Hour ||
			!strings.Contains(err.Error(), "adapter slots full") {
			t.Fatalf("%v", err)
		}
		if got := e.took(); len(got) != 0 {
			t.Errorf("calls %q", got)
		}
	})

	t.Run("configured adapter pushes out an invented one", func(t *testing.T) {
		s := newSet(time.Hour)
		s.Known.MarkLoaded(url, "x1")
		s.Known.MarkLoaded(url, "x2")
		defer s.Begin(all[0], "x1")() // in use: stays
		if got, err := placeOn(t, s, h, "b", "sql", all); err != nil || got != url {
			t.Fatalf("%q %v", got, err)
		}
		if got := e.took(); !slices.Equal(got, []string{"unload x2", "load sql /loras/sql"}) {
			t.Errorf("calls %q", got)
		}
		// An invented name does not push out the configured one.
		if _, err := placeOn(t, s, h, "a", "x3", all); !errors.As(err, new(*SlotsFullError)) {
			t.Errorf("x3: %v", err)
		}
	})

	t.Run("loads per tenant", func(t *testing.T) {
		s := newSet(time.Nanosecond) // everything idle: room is never the limit
		for i, name := range []string{"t1", "t2", "t3"} {
			if _, err := placeOn(t, s, h, "a", name, all); err != nil {
				t.Fatalf("%d: %v", i, err)
			}
		}
		_, err := placeOn(t, s, h, "a", "t4", all)
		var limit *TenantLimitError
		if !errors.As(err, &limit) || limit.Loads != 3 || limit.RetryAfter <= 0 {
			t.Fatalf("t4: %v", err)
		}
		// Another tenant, and a configured adapter, are not held back.
		if _, err := placeOn(t, s, h, "b", "t4", all); err != nil {
			t.Errorf("b: %v", err)
		}
		if _, err := placeOn(t, s, h, "a", "sql", all); err != nil {
			t.Errorf("sql: %v", err)
		}
		e.took()
	})

	t.Run("a name that leaves the folder never reaches the engine", func(t *testing.T) {
		s := newSet(time.Hour)
		if _, err := placeOn(t, s, h, "a", "../etc", all); !errors.Is(err, ErrBadName) {
			t.Errorf("%v", err)
		}
		if got := e.took(); len(got) != 0 {
			t.Errorf("calls %q", got)
		}
	})
}
