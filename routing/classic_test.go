package routing

import (
	"testing"
	"time"

	"github.com/llmedge/llmedge/backends/pool"
)

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

// acquire takes a slot through p's policy, as the gateway does.
func acquire(t testing.TB, p *pool.Pool, req *pool.Request) *pool.Replica {
	t.Helper()
	l, err := p.Acquire(req, nil)
	if err != nil {
		t.Fatal(err)
	}
	return l.Replica
}

var classics = []struct {
	name      string
	policy    func() pool.Policy
	loadAware bool
}{
	{"p2c", func() pool.Policy { return P2C{} }, true},
	{"round_robin", func() pool.Policy { return &RoundRobin{} }, false},
	{"random", func() pool.Policy { return Random{} }, false},
	{"least_requests", func() pool.Policy { return LeastRequests{} }, true},
}

func TestClassicPoliciesSpreadAndWeights(t *testing.T) {
	for _, tc := range classics {
		t.Run(tc.name, func(t *testing.T) {
			p := pool.New("m", tc.policy())
			rs := replicas(t, "http://a:1", "http://b:1", "http://c:1")
			rs[2].Weight = 2
			p.Set(rs)
			const n = 4000
			// Hold slots so load-aware policies see real load, then release.
			var held []*pool.Replica
			for i := 0; i < n; i++ {
				held = append(held, acquire(t, p, nil))
				if i%4 == 3 {
					for _, h := range held {
						h.Release()
					}
					held = held[:0]
				}
			}
			for _, h := range held {
				h.Release()
			}
			for _, r := range rs {
				if r.Outstanding() != 0 {
					t.Fatalf("%s outstanding %d after release", r.URL, r.Outstanding())
				}
			}
			a, c := float64(rs[0].Served()), float64(rs[2].Served())
			if a < n/8 || rs[1].Served() < n/8 {
				t.Fatalf("unfair spread: %d %d %d", rs[0].Served(), rs[1].Served(), rs[2].Served())
			}
			if !tc.loadAware && (c/a < 1.5 || c/a > 2.5) {
				t.Fatalf("weight 2 replica got %.2fx the traffic", c/a)
			}
		})
	}
}

func TestLoadAwarePoliciesAvoidBusyReplica(t *testing.T) {
	for _, tc := range classics {
		if !tc.loadAware {
			continue
		}
		t.Run(tc.name, func(t *testing.T) {
			p := pool.New("m", tc.policy())
			rs := replicas(t, "http://a:1", "http://b:1")
			p.Set(rs)
			for range 100 { // a's own outstanding requests
				l, _ := p.Acquire(nil, []*pool.Replica{rs[1]})
				_ = l
			}
			for i := 0; i < 50; i++ {
				if r := acquire(t, p, nil); r != rs[1] {
					t.Fatalf("%s picked the busy replica", tc.name)
				} else {
					r.Release()
				}
			}
		})
	}
}

// The engine's own figures count when they say more than the gateway
// knows, and stop counting once stale.
func TestLoadAwarePoliciesSeeEngineLoad(t *testing.T) {
	for _, tc := range classics {
		if !tc.loadAware {
			continue
		}
		t.Run(tc.name, func(t *testing.T) {
			p := pool.New("m", tc.policy())
			rs := replicas(t, "http://a:1", "http://b:1")
			p.Set(rs)
			rs[0].SetEngineLoad(pool.EngineLoad{Running: 8, Waiting: 30, KVUsage: -1, Until: farFuture})
			for range 50 {
				r := acquire(t, p, nil)
				if r != rs[1] {
					t.Fatalf("picked the replica whose engine reports 38 requests")
				}
				r.Release()
			}
			rs[0].SetEngineLoad(pool.EngineLoad{Running: 8, Waiting: 30, KVUsage: -1, Until: longAgo})
			seen := map[*pool.Replica]bool{}
			for range 200 {
				r := acquire(t, p, nil)
				seen[r] = true
				r.Release()
			}
			if !seen[rs[0]] {
				t.Fatal("a stale engine figure still keeps the replica out")
			}
		})
	}
}

var (
	farFuture = time.Now().Add(time.Hour)
	longAgo   = time.Now().Add(-time.Hour)
)
