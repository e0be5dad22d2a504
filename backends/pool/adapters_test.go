package pool

import (
	"slices"
	"testing"
	"time"
)

func urls(rs []*Replica) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.URL
	}
	return out
}

func TestAdaptersHolders(t *testing.T) {
	rs := replicas(t, "http://a:1", "http://b:1", "http://c:1")
	now := time.Now()
	a := NewAdapters()
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

func TestAdaptersOwnLoadsAndListings(t *testing.T) {
	rs := replicas(t, "http://a:1")
	a := NewAdapters()
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

func TestAdaptersLoadTarget(t *testing.T) {
	rs := replicas(t, "http://a:1", "http://b:1", "http://c:1")
	a := NewAdapters()
	now := time.Now()
	a.SetListed("http://a:1", []string{"1", "2"}, now)
	a.SetListed("http://b:1", []string{"1"}, now)
	a.SetListed("http://c:1", []string{"1", "2", "3"}, now)
	rs[1].outstanding.Add(5) // b is busier, but has fewer adapters
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
	rs[0].SetHealthy(false)
	if u := Usable(rs, []*Replica{rs[2]}); len(u) != 1 || u[0] != rs[1] {
		t.Errorf("usable: %v", urls(u))
	}
	v := a.View("http://c:1")
	if !slices.Equal(v.Loaded, []string{"1", "2", "3"}) {
		t.Errorf("view: %+v", v)
	}
}
