package e2e

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/llmedge/llmedge/internal/redistest"
)

// scaleoutFleet is gateways sharing one Redis in front of four simulated
// replicas with prefix caches; each gateway writes its own access log.
type scaleoutFleet struct {
	t    *testing.T
	srv  *redistest.Server
	sims []*Sim
	gws  []*Gateway
	logs []string
	tok  string
	cfg  func(log string) GatewayConfig
}

func newScaleoutFleet(t *testing.T, share string, prefillPerToken ...string) *scaleoutFleet {
	f := &scaleoutFleet{t: t, srv: redistest.Start(t)}
	per := "20us"
	if len(prefillPerToken) > 0 {
		per = prefillPerToken[0]
	}
	for range 4 {
		f.sims = append(f.sims, startSim(t, "-tokens", "4", "-prefill-per-token", per, "-prompt-tokens-details"))
	}
	data := t.TempDir() // one storage: a token of one gateway is good at the others
	f.cfg = func(log string) GatewayConfig {
		opts := redisOption(f.srv)
		if share != "" {
			opts += "\t\tshare_routing " + share + "\n"
		}
		return GatewayConfig{Data: data, Options: opts,
			Models: map[string]string{"qwen": staticModel(f.sims...), "gemma": staticModel(f.sims[0])},
			Site:   "log {\n\t\toutput file " + log + "\n\t\tformat json\n\t}\n\tllm_gateway"}
	}
	return f
}

// add starts one more gateway.
func (f *scaleoutFleet) add() *Gateway {
	log := filepath.Join(f.t.TempDir(), "access.log")
	g := startGateway(f.t, f.cfg(log))
	f.gws, f.logs = append(f.gws, g), append(f.logs, log)
	if f.tok == "" {
		f.tok = g.Token(f.t, "demo", "demo", "")
	}
	return g
}

// entry is the access-log entry of request id, whichever gateway served it.
func (f *scaleoutFleet) entry(id string) map[string]any {
	f.t.Helper()
	var e map[string]any
	waitFor(f.t, 5*time.Second, func() bool {
		for _, l := range f.logs {
			if x, ok := accessLog(f.t, l)[id]; ok {
				e = x
				return true
			}
		}
		return false
	})
	return e
}

// applied is how many other instances' insertions g applied.
func applied(t *testing.T, g *Gateway) float64 {
	return metricValue(t, g.scrape(t), `llmedge_routing_share_insertions_total{outcome="applied"}`)
}

// cacheHits sums the replicas' own prefix-cache counters.
func (f *scaleoutFleet) cacheHits() (queries, hits int) {
	for _, s := range f.sims {
		st := s.engineStats(f.t)
		queries, hits = queries+st.PrefixCacheQueries, hits+st.PrefixCacheHits
	}
	return queries, hits
}

// TestRoutingSharedAcrossInstances: two gateways share one Redis in front
// of four replicas. Conversations whose turns alternate between the two
// land each on one replica (the access logs of both say so, and predict
// the history cached; the replicas' own caches confirm it); with
// share_routing off, the same conversations scatter. A reload keeps the
// sharing. A third gateway started mid-run routes the next turns the same
// way within seconds.
// Redis dies: both keep serving, not one request fails, and /readyz and
// the metrics say each routes on its own view.
func TestRoutingSharedAcrossInstances(t *testing.T) {
	f := newScaleoutFleet(t, "") // on by default with redis
	a, b := f.add(), f.add()
	const convs = 6
	turn := func(g *Gateway, c, n int) map[string]any {
		t.Helper()
		id := fmt.Sprintf("c%d-t%d", c, n)
		g.ask(t, f.tok, id, turnBody(c%3, c, n))
		return f.entry(id)
	}
	// waitLearned waits until g has applied at least n of the others'
	// insertions: a conversation's next turn comes seconds later in life.
	waitLearned := func(g *Gateway, n float64) {
		t.Helper()
		waitFor(t, 10*time.Second, func() bool { return applied(t, g) >= n })
	}
	home := map[int]any{}
	learnedA, learnedB := 0.0, 0.0
	for n := 1; n <= 4; n++ {
		for c := range convs {
			g := []*Gateway{a, b}[(c+n)%2] // turns alternate; half the conversations start on each
			e := turn(g, c, n)
			if n == 1 {
				home[c] = e["replica"]
			} else {
				if e["replica"] != home[c] {
					t.Errorf("conversation %d turn %d went to %v, its history is on %v", c, n, e["replica"], home[c])
				}
				if cached, _ := e["predicted_cached"].(float64); cached < 0.5 {
					t.Errorf("conversation %d turn %d: predicted cached %v", c, n, cached)
				}
			}
			if g == a {
				learnedB++
			} else {
				learnedA++
			}
		}
		waitLearned(a, learnedA)
		waitLearned(b, learnedB)
	}
	q, h := f.cacheHits()
	if q == 0 || float64(h)/float64(q) < 0.6 {
		t.Errorf("the replicas' own prefix caches hit %d of %d prompt tokens", h, q)
	}
	t.Logf("replicas' prefix caches: %d of %d prompt tokens hit", h, q)
	// The routing-quality signal: the replicas report their cached tokens,
	// and each gateway compares them with its predictions.
	for i, g := range []*Gateway{a, b} {
		m := g.scrape(t)
		series := func(kind string) float64 {
			return metricValue(t, m, `llmedge_prefix_cache_tokens_total{kind="`+kind+`",model_type="qwen"}`)
		}
		prompt, cached, predicted := series("prompt"), series("cached"), series("predicted")
		errs := metricValue(t, m, `llmedge_prefix_prediction_error_ratio_count{model_type="qwen"}`)
		t.Logf("gateway %d: replicas report %.0f of %.0f prompt tokens cached, %.0f predicted (%v predictions compared)", i, cached, prompt, predicted, errs)
		if prompt <= 0 || cached/prompt < 0.5 || predicted/prompt < 0.5 || errs != convs*2 {
			t.Errorf("gateway %d: prompt %v cached %v predicted %v tokens, %v predictions compared (want %d)", i, prompt, cached, predicted, errs, convs*2)
		}
	}

	// A reload keeps the sharing (the hub is kept with the Redis
	// connection): the next turns, alternating still, stay home.
	a.Reload(t, func(s string) string { return s })
	for c := range convs {
		g := []*Gateway{a, b}[c%2]
		if e := turn(g, c, 5); e["replica"] != home[c] {
			t.Errorf("after a reload, conversation %d went to %v, its history is on %v", c, e["replica"], home[c])
		}
		if g == a {
			learnedB++
		} else {
			learnedA++
		}
	}
	waitLearned(a, learnedA)
	waitLearned(b, learnedB)

	// A third instance joins: it learns what was decided before it came,
	// and routes the next turns home.
	start := time.Now()
	c3 := f.add()
	waitLearned(c3, convs*5)
	t.Logf("the third instance learned the %d decisions in %v after it started", convs*5, time.Since(start).Round(time.Millisecond))
	for c := range convs {
		e := turn(c3, c, 6)
		if cached, _ := e["predicted_cached"].(float64); e["replica"] != home[c] || cached < 0.5 {
			t.Errorf("on the third instance, conversation %d went to %v predicting %v cached, its history is on %v",
				c, e["replica"], e["predicted_cached"], home[c])
		}
	}

	// Redis dies: every instance keeps serving on its own view.
	f.srv.Kill()
	for n := 7; n <= 10; n++ {
		for c := range convs {
			g := f.gws[(c+n)%3]
			if r := g.infer(context.Background(), nil, f.tok, turnBody(c%3, c, n)); r.status != 200 {
				t.Fatalf("with Redis down, conversation %d turn %d: %d %s", c, n, r.status, r.body)
			}
		}
	}
	for _, g := range f.gws {
		waitFor(t, 10*time.Second, func() bool {
			_, body := readyz(t, g)
			deps, _ := body["dependencies"].(map[string]any)
			rs, _ := deps["routing_share"].(map[string]any)
			return rs["status"] == "degraded" && strings.Contains(fmt.Sprint(rs["detail"]), "own view")
		})
		if v := metricValue(t, g.scrape(t), "llmedge_routing_share_up"); v != 0 {
			t.Errorf("llmedge_routing_share_up %v with Redis down", v)
		}
		if !strings.Contains(g.Log(), "each instance routes on its own view") {
			t.Error("the outage was not logged")
		}
		resp, err := http.Get(g.Admin + "/llmedge/status.json")
		if err != nil {
			t.Fatal(err)
		}
		var snap struct {
			RoutingShare struct {
				Up   bool   `json:"up"`
				Line string `json:"line"`
			} `json:"routing_share"`
		}
		readJSON(t, resp, &snap)
		if snap.RoutingShare.Up || !strings.Contains(snap.RoutingShare.Line, "own view") {
			t.Errorf("the status page's routing share with Redis down: %+v", snap.RoutingShare)
		}
	}
	// Back: sharing resumes.
	f.srv.Restart(t)
	for _, g := range f.gws {
		waitFor(t, 15*time.Second, func() bool { return metricValue(t, g.scrape(t), "llmedge_routing_share_up") == 1 })
	}
}

// TestRoutingNotSharedWhenOff: the same alternating conversations with
// share_routing off scatter over the replicas — what the sharing is for,
// and proof that the test above can fail. Each conversation has a tenant
// prompt of its own, so that the instance that did not see its first turn
// places the second one cold, at an even draw among four idle replicas:
// all eight staying put by luck is one chance in 4^8. (Tenants shared
// between conversations made it one chance in 4^3: an instance follows a
// tenant's prompt to where it sent it before, so the conversations of a
// tenant stay or move together.)
func TestRoutingNotSharedWhenOff(t *testing.T) {
	f := newScaleoutFleet(t, "off")
	a, b := f.add(), f.add()
	const convs = 8
	split := 0
	for c := range convs {
		var home any
		for n := 1; n <= 3; n++ {
			id := fmt.Sprintf("c%d-t%d", c, n)
			[]*Gateway{a, b}[n%2].ask(t, f.tok, id, turnBody(10+c, c, n))
			e := f.entry(id)
			if n == 1 {
				home = e["replica"]
			} else if e["replica"] != home {
				split++
				break
			}
		}
	}
	if split == 0 {
		t.Errorf("without sharing, all %d conversations stayed on one replica each: the test cannot tell sharing from luck", convs)
	}
	if m := a.scrape(t); strings.Contains(m, "llmedge_routing_share_up") {
		t.Error("share metrics reported with share_routing off")
	}
	t.Logf("without sharing, %d of %d conversations changed replica", split, convs)
}

// TestRoutingSharesPrefillQueues: a replica's prefill lane is one, whichever
// gateway filled it. Gateway a sends a tenant's long conversation, cold
// but for the tenant's prompt, to the replica holding that prompt, where
// it prefills for seconds; gateway b, asked meanwhile for the next turn of
// a conversation cached on that replica, counts a's queue there as its
// own and starts the turn elsewhere rather than behind it — as one gateway
// would. Without the queues shared, b sees an idle replica holding the
// history, and sends the turn behind seconds of prefill.
func TestRoutingSharesPrefillQueues(t *testing.T) {
	f := newScaleoutFleet(t, "", "1ms")
	a, b := f.add(), f.add()
	a.ask(t, f.tok, "c0-t1", turnBody(0, 0, 1))
	home := f.entry("c0-t1")["replica"]
	waitFor(t, 10*time.Second, func() bool { return applied(t, b) >= 1 })

	long := make(chan error, 1)
	start := time.Now()
	go func() { long <- a.askErr(f.tok, "c1-t20", turnBody(0, 1, 20)) }()
	time.Sleep(500 * time.Millisecond) // a's decision, its queue told within 100 ms
	b.ask(t, f.tok, "c0-t2", turnBody(0, 0, 2))
	next := f.entry("c0-t2")
	if err := <-long; err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	if e := f.entry("c1-t20"); e["replica"] != home {
		t.Fatalf("the long conversation went to %v, not to its tenant's prompt on %v: the test cannot tell", e["replica"], home)
	}
	if took < 1500*time.Millisecond {
		t.Fatalf("the long prompt prefilled in %v: too short to be queued behind", took)
	}
	if next["replica"] == home {
		t.Errorf("b sent the next turn to %v, behind a's long prefill there (%v), predicting %v cached", home, took.Round(time.Millisecond), next["predicted_cached"])
	}
	t.Logf("a's long prompt took %v on %v; b sent the next turn to %v (%v, predicted cached %v)",
		took.Round(time.Millisecond), home, next["replica"], next["lb_reason"], next["predicted_cached"])
}
