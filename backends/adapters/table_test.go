package adapters

import (
	"slices"
	"testing"
	"time"

	"github.com/llmedge/llmedge/backends/pool"
)

func urls(rs []*pool.Replica) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.URL
	}
	return out
}

func TestTableHolders(t *testing.T) {
	rs := replicas(t, "http://a:1", "http://b:1", "http://c:1")
	now := time.Now()
	a := NewTable()
	a.SetListed("http://a:1", []string{"sql"}, now)
	a.SetListed("http://b:1", []string{"sql", "poem"}, now)
	a.SetRunning("http://b:1", []string{"sql"}, nil, 4, now.Add(time.Minute))
	a.SetRunning("http://c:1", []string{"old"}, nil, 4, now.Add(-time.Second)) // stale
	for _, tc := range []struct {
		name            string
		running, loaded []string
	}{
		{"sql", []string{"http://b:1"}, []string{"http://a:1", "http://b:1"}},
		{"poem", nil, []string{"http://b:1"}},
		{"old", nil, nil},
		{"none", nil, nil},
	} {
		running, loaded := a.Holders(rs, tc.name)
		if !slices.Equal(urls(running), tc.running) || !slices.Equal(urls(loaded), tc.loaded) {
			t.Errorf("%s: running %v loaded %v, want %v %v", tc.name, urls(running), urls(loaded), tc.running, tc.loaded)
		}
	}
}

func TestTableOwnLoadsAndListings(t *testing.T) {
	rs := replicas(t, "http://a:1")
	a := NewTable()
	before := time.Now()
	a.MarkLoaded("http://a:1", "x")
	if _, l := a.Holders(rs, "x"); len(l) != 1 {
		t.Fatal("own load not known")
	}
	// A listing asked for before the load does not undo it...
	a.SetListed("http://a:1", nil, before)
	if _, l := a.Holders(rs, "x"); len(l) != 1 {
		t.Fatal("an older listing undid the load")
	}
	// ...one asked for after does (the engine restarted).
	a.SetListed("http://a:1", nil, time.Now())
	if _, l := a.Holders(rs, "x"); len(l) != 0 {
		t.Fatal("a newer listing without the adapter did not settle it")
	}
	a.SetListed("http://a:1", []string{"y"}, time.Now())
	a.Forget("http://a:1", "y")
	if _, l := a.Holders(rs, "y"); len(l) != 0 {
		t.Fatal("forgotten adapter still held")
	}
	a.Retain(nil)
	if v := a.View("http://a:1"); v.Loaded != nil {
		t.Fatalf("retained: %+v", v)
	}
}

func TestTableLoadTarget(t *testing.T) {
	rs := replicas(t, "http://a:1", "http://b:1", "http://c:1")
	a := NewTable()
	now := time.Now()
	a.SetListed("http://a:1", []string{"1", "2"}, now)
	a.SetListed("http://b:1", []string{"1"}, now)
	a.SetListed("http://c:1", []string{"1", "2", "3"}, now)
	// b is busier, but has fewer adapters
	rs[1].SetEngineLoad(pool.EngineLoad{Running: 5, KVUsage: -1, At: now, Until: now.Add(time.Minute)})
	for _, tc := range []struct {
		limit int
		want  string
	}{
		{0, "http://b:1"}, {2, "http://b:1"}, {1, ""}, {3, "http://b:1"},
	} {
		got := ""
		if r := a.LoadTarget(rs, tc.limit); r != nil {
			got = r.URL
		}
		if got != tc.want {
			t.Errorf("limit %d: %q, want %q", tc.limit, got, tc.want)
		}
	}
	// Equal counts: the least loaded.
	a.SetListed("http://b:1", []string{"1", "2"}, now)
	if r := a.LoadTarget(rs, 0); r == nil || r.URL != "http://a:1" {
		t.Errorf("tie: %v", r)
	}
	v := a.View("http://c:1")
	if !slices.Equal(v.Loaded, []string{"1", "2", "3"}) {
		t.Errorf("view: %+v", v)
	}
}

func replicas(t testing.TB, urls ...string) []*pool.Replica {
	t.Helper()
	var rs []*pool.Replica
	for _, u := range urls {
		r, err := pool.NewReplica(u)
		if err != nil {
			t.Fatal(err)
		}
		rs = append(rs, r)
	}
	return rs
}

// TestTableVictim: the adapter to unload is the longest idle one that no
// request uses, through this gateway or (the engine says) another way.
func TestTableVictim(t *testing.T) {
	rs := replicas(t, "http://a:1", "http://b:1")
	a := NewTable()
	now := time.Now()
	a.SetListed("http://a:1", []string{"old", "older"}, now.Add(-time.Hour))
	a.SetListed("http://b:1", []string{"fresh"}, now)
	a.mu.Lock()
	a.byURL["http://a:1"].used["older"] = now.Add(-2 * time.Hour)
	a.mu.Unlock()
	idle := 10 * time.Minute
	byIdle := func(_ string, d time.Duration) bool { return d >= idle }
	for _, tc := range []struct {
		name     string
		setup    func() (undo func())
		replica  string
		victim   string
		wantWait bool
	}{
		{"the longest idle", func() func() { return func() {} }, "http://a:1", "older", false},
		{"not one in use here", func() func() { return a.begin("http://a:1", "older") }, "http://a:1", "old", false},
		{"not one the engine runs", func() func() {
			a.SetRunning("http://a:1", []string{"older", "old"}, nil, 0, time.Now().Add(time.Minute))
			return func() { a.SetRunning("http://a:1", nil, nil, 0, time.Now()) }
		}, "", "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			undo := tc.setup()
			defer undo()
			r, victim, wait := a.victim(rs, 2, idle, byIdle)
			got := ""
			if r != nil {
				got = r.URL
			}
			if got != tc.replica || victim != tc.victim || (r == nil && (wait > 0) != tc.wantWait) {
				t.Errorf("victim %q on %q, wait %v; want %q on %q (wait: %v)", victim, got, wait, tc.victim, tc.replica, tc.wantWait)
			}
		})
	}
}

// TestTableTenants: a tenant may cause n distinct adapters to be loaded
// per window; a name already counted is free, and the window slides.
func TestTableTenants(t *testing.T) {
	a := NewTable()
	t0 := time.Now()
	const n, window = 2, time.Minute
	for i, tc := range []struct {
		tenant, name string
		at           time.Duration
		ok           bool
		retry        time.Duration
	}{
		{"a", "x1", 0, true, 0},
		{"a", "x2", time.Second, true, 0},
		{"a", "x3", 2 * time.Second, false, window - 2*time.Second},
		{"a", "x1", 3 * time.Second, true, 0}, // counted already
		{"b", "x3", 3 * time.Second, true, 0}, // another tenant
		{"a", "x3", window, true, 0},          // x1 left the window
		{"a", "x4", window + 500*time.Millisecond, false, 500 * time.Millisecond},
	} {
		ok, retry := a.admitTenant(tc.tenant, tc.name, n, window, t0.Add(tc.at))
		if ok != tc.ok || retry != tc.retry {
			t.Errorf("%d: %s %s: %v %v, want %v %v", i, tc.tenant, tc.name, ok, retry, tc.ok, tc.retry)
		}
	}
}

// TestTableClaim: a load under way holds its slot, so a second load at
// the same time goes elsewhere, and the slot is free again once let go.
func TestTableClaim(t *testing.T) {
	rs := replicas(t, "http://a:1", "http://b:1")
	a := NewTable()
	now := time.Now()
	a.SetListed("http://a:1", []string{"x"}, now)
	a.SetListed("http://b:1", []string{"y", "z"}, now)
	if r := a.claim(rs, 2, "n1"); r == nil || r.URL != "http://a:1" {
		t.Fatalf("first claim: %v", r)
	}
	if r := a.claim(rs, 2, "n2"); r != nil {
		t.Fatalf("second claim took %s, a full replica", r.URL)
	}
	if _, loaded := a.Holders(rs, "n1"); len(loaded) != 0 {
		t.Error("an adapter being loaded takes requests")
	}
	a.unclaim("http://a:1", "n1")
	if r := a.claim(rs, 2, "n2"); r == nil || r.URL != "http://a:1" {
		t.Fatalf("after unclaim: %v", r)
	}
}

// TestTableRunningIsUse: an adapter the engine's metrics say runs is in
// use now, whoever sent its requests: its idle time starts again.
func TestTableRunningIsUse(t *testing.T) {
	rs := replicas(t, "http://a:1")
	a := NewTable()
	a.SetListed("http://a:1", []string{"theirs", "idle"}, time.Now().Add(-time.Hour))
	a.SetRunning("http://a:1", []string{"theirs"}, nil, 0, time.Now().Add(-time.Second)) // already stale
	byIdle := func(_ string, d time.Duration) bool { return d >= time.Minute }
	if _, victim, _ := a.victim(rs, 2, time.Minute, byIdle); victim != "idle" {
		t.Fatalf("victim %q, want idle", victim)
	}
	a.Forget("http://a:1", "idle")
	if r, victim, _ := a.victim(rs, 1, time.Minute, byIdle); r != nil {
		t.Fatalf("%q, used a moment ago, may go", victim)
	}
}
