package routing

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/llmedge/llmedge/backends/pool"
)

func TestAffinityKeys(t *testing.T) {
	h := http.Header{}
	h.Set("X-Session-ID", "s-42")
	h.Add("Cookie", "theme=dark; sid=abc")
	req := &pool.Request{User: "alice", Header: h}
	for _, tc := range []struct {
		name string
		key  func(*pool.Request) string
		want string
	}{
		{"user", ByUser, "alice"},
		{"header", ByHeader("x-session-id"), "s-42"},
		{"cookie", ByCookie("sid"), "abc"},
		{"missing cookie", ByCookie("nope"), ""},
		{"missing header", ByHeader("X-Other"), ""},
	} {
		if got := tc.key(req); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
	if ByHeader("X-Session-ID")(&pool.Request{}) != "" || ByCookie("sid")(&pool.Request{}) != "" {
		t.Error("a request without headers has a key")
	}
}

func sessionReq(id string) *pool.Request {
	h := http.Header{}
	if id != "" {
		h.Set("X-Session-ID", id)
	}
	return &pool.Request{Model: "m", Header: h}
}

// Sessions stay on their replica, spread over all, and only the sessions
// of a replica that leaves move.
func TestAffinityIsConsistent(t *testing.T) {
	a := &Affinity{Key: ByHeader("X-Session-ID"), Inner: &RoundRobin{}}
	p := pool.New("m", a)
	rs := replicas(t, "http://a:1", "http://b:1", "http://c:1", "http://d:1")
	p.Set(rs)
	where := map[string]*pool.Replica{}
	count := map[*pool.Replica]int{}
	for i := range 400 {
		id := fmt.Sprintf("session-%d", i)
		l, err := p.Acquire(sessionReq(id), nil)
		if err != nil {
			t.Fatal(err)
		}
		if l.Choice.Reason != pool.ReasonAffinity {
			t.Fatalf("reason %q", l.Choice.Reason)
		}
		where[id] = l.Replica
		count[l.Replica]++
		l.Release(pool.Success)
	}
	for _, r := range rs {
		if count[r] < 60 {
			t.Fatalf("uneven spread of sessions: %v", count)
		}
	}
	for id, r := range where { // again: same replica
		l, _ := p.Acquire(sessionReq(id), nil)
		if l.Replica != r {
			t.Fatalf("%s moved from %s to %s", id, r.URL, l.Replica.URL)
		}
		l.Release(pool.Success)
	}
	p.Set(rs[:3]) // d leaves
	for id, r := range where {
		l, _ := p.Acquire(sessionReq(id), nil)
		if r != rs[3] && l.Replica != r {
			t.Fatalf("%s moved off %s though only d left", id, r.URL)
		}
		l.Release(pool.Success)
	}
}

// A session's replica loaded beyond the bound hands the session on; a
// request without a key goes to the inner policy.
func TestAffinityBoundedAndFallback(t *testing.T) {
	a := &Affinity{Key: ByHeader("X-Session-ID"), Inner: LeastRequests{}}
	p := pool.New("m", a)
	rs := replicas(t, "http://a:1", "http://b:1")
	p.Set(rs)
	l, _ := p.Acquire(sessionReq("s1"), nil)
	home := l.Replica
	l.Release(pool.Success)
	var held []pool.Lease
	for range 5 {
		h, _ := p.Acquire(nil, otherThan(rs, home))
		held = append(held, h)
	}
	if l, _ := p.Acquire(sessionReq("s1"), nil); l.Replica == home {
		t.Fatal("the session stayed on an overloaded replica")
	}
	if l, _ := p.Acquire(sessionReq(""), nil); l.Replica == home || l.Choice.Reason != pool.ReasonLoad {
		t.Fatalf("no key: %s %+v, want the inner policy's least loaded", l.Replica.URL, l.Choice)
	}
	for _, h := range held {
		h.Release(pool.Success)
	}
}
