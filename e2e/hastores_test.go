package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/llmedge/llmedge/internal/redistest"
)

// haLoad sends budgetBody requests as tok from workers spread over gws
// until stop is closed, and counts what they got: 200s (and their
// tokens), 429s, anything else.
type haLoad struct {
	ok, refused, tokens atomic.Int64
	mu                  sync.Mutex
	other               []string
	answers             []answer
	wg                  sync.WaitGroup
}

// answer is one 200: when its request was sent, and its tokens.
type answer struct {
	at     time.Time
	tokens int
}

// tokensSentWithin sums the tokens of the answers to requests sent
// within [from, to].
func (l *haLoad) tokensSentWithin(from, to time.Time) int {
	n := 0
	for _, a := range l.answers {
		if !a.at.Before(from) && !a.at.After(to) {
			n += a.tokens
		}
	}
	return n
}

func (l *haLoad) run(t *testing.T, gws []*Gateway, tok string, workers int, stop <-chan struct{}) {
	for i := range workers {
		g := gws[i%len(gws)]
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				sent := time.Now()
				r := g.infer(context.Background(), nil, tok, budgetBody("qwen", false))
				switch {
				case r.err == nil && r.status == 200:
					n := usageOf(t, r.body)
					l.ok.Add(1)
					l.tokens.Add(int64(n))
					l.mu.Lock()
					l.answers = append(l.answers, answer{sent, n})
					l.mu.Unlock()
				case r.err == nil && r.status == 429:
					l.refused.Add(1)
					time.Sleep(20 * time.Millisecond)
				default:
					l.mu.Lock()
					l.other = append(l.other, fmt.Sprintf("%d %v %.200s", r.status, r.err, r.body))
					l.mu.Unlock()
				}
			}
		}()
	}
}

// TestRedisSentinelFailover: two gateways share a Redis Sentinel
// deployment (a primary, a replica, three sentinels). Under load on both,
// with a rate limit and a token budget, the primary is killed (SIGKILL)
// and the sentinels promote the replica. Every request is answered (200,
// or 429 from the limit); while no primary answers, each instance decides
// alone (on_redis_failure open, as documented), so the rate limit admits
// at most its exact figure plus one full bucket per instance; once the
// replica is promoted the clients follow it, the limits are shared again
// and hold within one request of exact across both instances, and a
// revocation made on one reaches the other.
func TestRedisSentinelFailover(t *testing.T) {
	const rpm = 60
	d := redistest.StartSentinel(t, time.Second)
	sim := startSim(t, "-tokens", "20")
	redisOpt := "\t\tredis sentinel " + redistest.MasterName + " " + strings.Join(d.Addrs(), " ") + " {\n\t\t\ttimeout 1s\n\t\t}\n"
	cfg := GatewayConfig{Data: t.TempDir(),
		Models:  map[string]string{"qwen": staticModel(sim) + "\n\t\t\tmax_tokens 20"},
		Options: redisOpt + fmt.Sprintf("\t\tlimits {\n\t\t\trpm %d\n\t\t\tbudget tokens 1000000 per month\n\t\t}", rpm),
	}
	a, b := startGateway(t, cfg), startGateway(t, cfg)
	gws := []*Gateway{a, b}
	tok := a.Token(t, "demo", "demo", "")

	// Load on both; the primary dies after 2 s.
	var load haLoad
	stop := make(chan struct{})
	start := time.Now()
	load.run(t, gws, tok, 4, stop)
	time.Sleep(2 * time.Second)
	before := load.ok.Load()
	d.Primary.Kill()
	killed := time.Now()
	promoted := d.WaitPromoted(t, 30*time.Second)
	// Both instances find the new primary (a ping every 500 ms) and share
	// the limits again.
	for _, g := range gws {
		waitFor(t, 15*time.Second, func() bool { return metricValue(t, adminMetrics(t, g), "llmedge_redis_up") == 1 })
	}
	shared := time.Since(killed)
	sharedAt := time.Now()
	time.Sleep(2 * time.Second)
	close(stop)
	load.wg.Wait()
	elapsed := time.Since(start)

	if len(load.other) > 0 {
		t.Errorf("%d requests were not answered with 200 or 429 during the failover, e.g. %s", len(load.other), load.other[0])
	}
	var fallback float64
	for _, g := range gws {
		fallback += metricValue(t, adminMetrics(t, g), "llmedge_ratelimit_fallback_total")
	}
	// Exact: a full bucket (rpm) then one request every 60/rpm s. While no
	// primary answers, each instance has a bucket of its own, full when
	// the outage starts and refilling as the shared one does: the
	// documented bound is the exact figure plus, per instance, a bucket
	// and its refill over the outage.
	exact := rpm + int64(elapsed.Seconds()*rpm/60) + 1
	bound := exact + int64(len(gws))*(rpm+int64(shared.Seconds()*rpm/60)+1)
	admitted := load.ok.Load()
	t.Logf("failover: sentinels promoted the replica %v after the kill, both instances shared again after %v; "+
		"%d answered (%d before the kill), %d refused (429), %d decided per instance; the rate limit admitted %d, exact %d, documented bound %d",
		promoted.Round(time.Millisecond), shared.Round(time.Millisecond), admitted, before, load.refused.Load(), int64(fallback),
		admitted, exact, bound)
	if admitted > bound {
		t.Errorf("the rate limit admitted %d in %v; more than the exact %d plus a bucket and its refill per instance (%d)", admitted, elapsed, exact, bound)
	}
	if admitted > exact && fallback == 0 {
		t.Errorf("%d admitted over the exact %d with no decision taken per instance", admitted-exact, exact)
	}

	// The budget's counter on the new primary against what was answered:
	// what the old primary had not passed on, and what was decided per
	// instance, is missing from it; nothing is counted twice.
	rc := redis.NewClient(&redis.Options{Addr: d.Replica.Addr})
	defer rc.Close()
	keys, err := rc.Keys(context.Background(), "llmedge:b:t*:u:demo").Result()
	if err != nil || len(keys) != 1 {
		t.Fatalf("budget counter: %v %v", keys, err)
	}
	counted, _ := rc.Get(context.Background(), keys[0]).Float64()
	used := load.tokens.Load()
	// The requests sent during the outage (a margin either side for the
	// polling of the metric) were decided per instance.
	window := load.tokensSentWithin(killed.Add(-500*time.Millisecond), sharedAt.Add(500*time.Millisecond))
	t.Logf("budget: %d tokens answered, %.0f counted in Redis after the failover: %.0f not counted, of %d answered to requests sent during the outage",
		used, counted, float64(used)-counted, window)
	if counted > float64(used)+float64(budgetReservation) {
		t.Errorf("the budget counted %.0f tokens, more than the %d answered (plus one reservation)", counted, used)
	}
	if lost := float64(used) - counted; lost > float64(window+budgetReservation) {
		t.Errorf("the budget lost %.0f tokens, more than the %d of the outage plus one reservation", lost, window)
	}

	// Shared again: a fresh user's limit holds across both instances
	// within one request of exact.
	alice := a.Token(t, "alice", "demo", "")
	var after haLoad
	stop2 := make(chan struct{})
	start2 := time.Now()
	after.run(t, gws, alice, 6, stop2)
	waitFor(t, 30*time.Second, func() bool { return after.refused.Load() >= 20 })
	close(stop2)
	after.wg.Wait()
	exact2 := rpm + int64(time.Since(start2).Seconds()*rpm/60)
	t.Logf("after the failover: %d admitted of an exact %d (+1)", after.ok.Load(), exact2)
	if got := after.ok.Load(); got < rpm || got > exact2+1 {
		t.Errorf("after the failover the rate limit admitted %d across both instances, want %d..%d", got, rpm, exact2+1)
	}

	// Revocations travel again: the subscriptions followed the primary.
	revokeCmd(t, b, "--user", "alice")
	waitFor(t, 10*time.Second, func() bool { s, _ := chatStatus(a, alice); return s == 401 })
}

// TestRedisClusterSharedState: two gateways on a Redis Cluster of three
// primaries share every Redis-backed feature once: a rate limit held
// across both, a budget counted exactly, a revocation made on one
// refusing the token on the other, the routing decisions applied by the
// other. Every key lies in one slot (the prefix is a hash tag), which the
// limit and budget scripts need.
func TestRedisClusterSharedState(t *testing.T) {
	const rpm = 10
	cl := redistest.StartCluster(t)
	sim := startSim(t, "-tokens", "20")
	cfg := GatewayConfig{Data: t.TempDir(),
		Models: map[string]string{"qwen": staticModel(sim) + "\n\t\t\tmax_tokens 20"},
		Options: "\t\tredis cluster " + strings.Join(cl.Addrs(), " ") + " {\n\t\t\ttimeout 5s\n\t\t}\n" +
			fmt.Sprintf("\t\tlimits {\n\t\t\trpm %d\n\t\t\tbudget tokens 100000 per month\n\t\t}", rpm),
	}
	a, b := startGateway(t, cfg), startGateway(t, cfg)
	gws := []*Gateway{a, b}
	tok := a.Token(t, "demo", "demo", "")

	// The rate limit, across both.
	var load haLoad
	stop := make(chan struct{})
	start := time.Now()
	load.run(t, gws, tok, 4, stop)
	waitFor(t, 30*time.Second, func() bool { return load.refused.Load() >= 10 })
	close(stop)
	load.wg.Wait()
	exact := rpm + int64(time.Since(start).Seconds()*rpm/60)
	if len(load.other) > 0 {
		t.Fatalf("unexpected answers: %v", load.other)
	}
	t.Logf("cluster: the rate limit admitted %d across both instances, exact %d (+1)", load.ok.Load(), exact)
	if got := load.ok.Load(); got < rpm || got > exact+1 {
		t.Errorf("the rate limit admitted %d, want %d..%d", got, rpm, exact+1)
	}
	noRedisFallback(t, a)
	noRedisFallback(t, b)

	// The budget's counter, in the cluster, is what was answered.
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs()})
	defer cc.Close()
	ctx := context.Background()
	var keys []string
	var mu sync.Mutex
	err := cc.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error {
		k, err := n.Keys(ctx, "*").Result()
		mu.Lock()
		keys = append(keys, k...)
		mu.Unlock()
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	var budgetKey string
	for _, k := range keys {
		if !strings.HasPrefix(k, "{llmedge}:") {
			t.Errorf("key %q is not under the hash-tagged prefix", k)
		}
		if strings.HasPrefix(k, "{llmedge}:b:t") && strings.HasSuffix(k, ":u:demo") {
			budgetKey = k
		}
	}
	if budgetKey == "" {
		t.Fatalf("no budget counter among %v", keys)
	}
	counted, err := cc.Get(ctx, budgetKey).Float64()
	if err != nil {
		t.Fatal(err)
	}
	if used := load.tokens.Load(); counted != float64(used) {
		t.Errorf("the budget counted %.0f tokens, %d were answered", counted, used)
	}

	// The routing decisions of one instance reach the other (a prompt
	// long enough to fill prefix blocks).
	alice := b.Token(t, "alice", "demo", "")
	a.ask(t, alice, "cluster-route", turnBody(0, 1, 1))
	waitFor(t, 10*time.Second, func() bool {
		return metricValue(t, adminMetrics(t, b), `llmedge_routing_share_insertions_total{outcome="applied"}`) > 0
	})

	// A revocation made on one refuses the token on the other.
	if s, _ := chatStatus(a, alice); s != 200 {
		t.Fatalf("alice's token on A: %d", s)
	}
	revokeCmd(t, b, "--user", "alice")
	waitFor(t, 10*time.Second, func() bool { s, _ := chatStatus(a, alice); return s == 401 })
}
