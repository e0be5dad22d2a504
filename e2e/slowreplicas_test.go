package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// The detection of slow replicas against real processes: four simulators
// behind the gateway under steady streaming load; one is made ten times
// slower at run time through its /sim/config, then fast again.

// The simulators' latencies, fast and slowed 10x.
var (
	fastSim = map[string]any{"ttft": "40ms", "itl": "5ms", "prefill_per_token": "100us"}
	slowSim = map[string]any{"ttft": "400ms", "itl": "50ms", "prefill_per_token": "1ms"}
)

// slowReplicaDetection is the model block's slow_replicas for these
// tests: a short half-life and cool-down, so that a test sees a whole
// cycle in well under a minute.
const slowReplicaDetection = `
			slow_replicas {
				factor 3
				min_samples 10
				half_life 3s
				cooldown 4s
				max_cooldown 8s
			}`

// timed is one streamed request as the client saw it.
type timed struct {
	at        time.Time     // when it was sent
	ttft      time.Duration // until the answer's headers: the gateway sends them with the first token
	avoided   bool          // the route header says slow replicas were held back
	err       error
	completed bool
}

// streamLoad runs workers that each stream one request after another and
// records them all.
type streamLoad struct {
	*load
	mu   sync.Mutex
	reqs []timed
}

func startStreamLoad(g *Gateway, tok, model string, workers int) *streamLoad {
	sl := &streamLoad{}
	body, _ := json.Marshal(withModel(model, "stream", true))
	sl.load = startLoad(workers, func(_, _ int) error {
		tr := timed{at: time.Now()}
		req, _ := http.NewRequestWithContext(context.Background(), "POST", g.Base+"/tasks/assistant_inference", strings.NewReader(string(body)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := g.Client.Do(req)
		if err == nil {
			tr.ttft = time.Since(tr.at)
			tr.avoided = strings.Contains(resp.Header.Get("Llmedge-Route"), "slow_avoided=")
			b, rerr := io.ReadAll(resp.Body)
			resp.Body.Close()
			err = result{status: resp.StatusCode, body: b, err: rerr}.ok(true)
			tr.completed = err == nil
		}
		tr.err = err
		sl.mu.Lock()
		sl.reqs = append(sl.reqs, tr)
		sl.mu.Unlock()
		return err
	})
	return sl
}

// ttftP90 is the 90th percentile of the time to first token of the
// requests sent in [from, to).
func (sl *streamLoad) ttftP90(from, to time.Time) (time.Duration, int) {
	_, p90, _, n := sl.ttftQuantiles(from, to)
	return p90, n
}

// ttftQuantiles are the median, 90th and 99th percentiles of the time to
// first token of the requests sent in [from, to), and their number.
func (sl *streamLoad) ttftQuantiles(from, to time.Time) (p50, p90, p99 time.Duration, n int) {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	var d []time.Duration
	for _, r := range sl.reqs {
		if r.completed && !r.at.Before(from) && r.at.Before(to) {
			d = append(d, r.ttft)
		}
	}
	if len(d) == 0 {
		return 0, 0, 0, 0
	}
	slices.Sort(d)
	return d[len(d)/2], d[len(d)*9/10], d[len(d)*99/100], len(d)
}

func (sl *streamLoad) avoidedCount() int {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	n := 0
	for _, r := range sl.reqs {
		if r.avoided {
			n++
		}
	}
	return n
}

// shareWatch samples the simulators' request counters, so that a replica's
// share of the requests of a recent window can be read.
type shareWatch struct {
	sims    []*Sim
	samples []shareSample
}

type shareSample struct {
	at     time.Time
	counts []int
}

func (w *shareWatch) sample(t testing.TB) {
	s := shareSample{at: time.Now()}
	for _, sim := range w.sims {
		s.counts = append(s.counts, sim.Stats(t).Requests)
	}
	w.samples = append(w.samples, s)
}

// share is replica i's share of the requests the simulators received over
// the last window (the latest sample against the newest one at least
// window older); ok is false before there is such a pair.
func (w *shareWatch) share(i int, window time.Duration) (share float64, total int, ok bool) {
	if len(w.samples) < 2 {
		return 0, 0, false
	}
	last := w.samples[len(w.samples)-1]
	for j := len(w.samples) - 2; j >= 0; j-- {
		first := w.samples[j]
		if last.at.Sub(first.at) < window {
			continue
		}
		mine := 0
		for k := range last.counts {
			d := last.counts[k] - first.counts[k]
			total += d
			if k == i {
				mine = d
			}
		}
		if total == 0 {
			return 0, 0, false
		}
		return float64(mine) / float64(total), total, true
	}
	return 0, 0, false
}

// waitShare samples every half second until cond holds of replica i's
// share over window, or d passes; it returns how long that took.
func (w *shareWatch) waitShare(t *testing.T, i int, window, d time.Duration, what string, cond func(float64) bool) time.Duration {
	t.Helper()
	start := time.Now()
	var last float64
	ok := pollEvery(d, 500*time.Millisecond, func() bool {
		w.sample(t)
		s, n, ok := w.share(i, window)
		if !ok || n < 20 {
			return false
		}
		last = s
		// Only windows that began after start say anything of the change.
		return w.samples[len(w.samples)-1].at.Sub(start) >= window && cond(s)
	})
	if !ok {
		t.Fatalf("%s: not within %s (the last %s window's share %.1f%%)", what, d, window, 100*last)
	}
	return time.Since(start)
}

// TestSlowReplicaWeightedDownThenBack: a replica slowed 10x at run time
// gets under 10% of new requests within 30 s, is shown as slow on the
// status page and in the metrics, and gets its share back once fast.
func TestSlowReplicaWeightedDownThenBack(t *testing.T) {
	var sims []*Sim
	for i := range 4 {
		sims = append(sims, startSim(t, "-ttft", "40ms", "-itl", "5ms", "-tokens", "20", "-seed", fmt.Sprint(i+1)))
	}
	// Round robin: the policy that, left alone, gives the slow replica
	// its full quarter whatever its latency.
	g := startGateway(t, GatewayConfig{Models: map[string]string{
		"qwen":  staticModel(sims...) + "\n\t\t\tlb_policy round_robin" + slowReplicaDetection,
		"gemma": staticModel(sims[0]),
	},
		// The status page, for a browser.
		Sites:      "http://127.0.0.1:{{index .Extra 0}} {\n\tbind 127.0.0.1\n\tllm_status\n}\n",
		ExtraPorts: 1,
	})
	tok := g.Token(t, "demo", "demo", "")
	sl := startStreamLoad(g, tok, "qwen", 6)
	defer sl.finish(t)
	watch := &shareWatch{sims: sims}
	const window = 4 * time.Second

	// Warm: every replica measured as fast as the others.
	watch.waitShare(t, 0, window, 30*time.Second, "warm-up", func(s float64) bool { return s > 0.15 })
	fastFrom := time.Now()

	sims[0].Configure(t, slowSim)
	slowFrom := time.Now()
	took := watch.waitShare(t, 0, window, 30*time.Second, "the slowed replica under 10% of new requests",
		func(s float64) bool { return s < 0.10 })
	s, n, _ := watch.share(0, window)
	t.Logf("slowed 10x: under 10%% of new requests after %s (%.1f%% of %d in the last %s)", took.Round(100*time.Millisecond), 100*s, n, window)

	// The status page and the metrics say so.
	waitFor(t, 10*time.Second, func() bool {
		r := replicaSlowStatus(t, g, "qwen", sims[0].URL)
		return r.Slow == "weighted_down" || r.Slow == "ejected" || r.Slow == "probing"
	})
	if r := replicaSlowStatus(t, g, "qwen", sims[0].URL); r.LatencyScore == nil || *r.LatencyScore <= 3 {
		t.Errorf("status: %+v, want a latency score above the factor", r)
	}
	metrics := g.scrape(t)
	if !strings.Contains(metrics, `llmedge_replica_slow_state{model_type="qwen",replica="`+sims[0].URL+`"}`) ||
		!strings.Contains(metrics, `llmedge_replica_latency_score{model_type="qwen",replica="`+sims[1].URL+`"}`) {
		t.Errorf("metrics lack the slow-replica series:\n%s", grepLines(metrics, "llmedge_replica_"))
	}
	// The page in a browser: the slowed replica's latency cell gives its
	// score and what is done about it.
	ctx, problems := browser(t)
	if err := chromedp.Do(ctx, chromedp.Navigate(fmt.Sprintf("http://127.0.0.1:%d/", g.Extra[0]))); err != nil {
		t.Fatal(err)
	}
	slowCell, fastCell := regexp.MustCompile(`^×\d+\.\d (weighted down|ejected until .+|probing)$`), regexp.MustCompile(`^×\d+\.\d$`)
	var cells [2]string
	if !pollEvery(60*time.Second, 200*time.Millisecond, func() bool {
		for i, sim := range sims[:2] {
			// qwen's row: the replica serves gemma too.
			cells[i], _ = chromedp.Run(ctx, chromedp.Evaluate[string](strings.Replace(cell(sim.URL, "latency"),
				"document.querySelector('", `document.querySelector('section[data-model="qwen"] `, 1)))
		}
		return slowCell.MatchString(cells[0]) && fastCell.MatchString(cells[1])
	}) {
		t.Fatalf("the page's latency cells: slowed replica %q, a fast one %q", cells[0], cells[1])
	}
	if p := problems(); len(p) > 0 {
		t.Errorf("the page logged errors: %q", p)
	}
	if sl.avoidedCount() == 0 {
		t.Error("no route header said slow_avoided")
	}
	// Slow for 300 more requests, for the measurement.
	heldFrom := slowFrom.Add(took)
	sl.waitDone(t, 300)
	slowAll, nAll := sl.ttftP90(slowFrom, time.Now())
	slowHeld, nHeld := sl.ttftP90(heldFrom, time.Now())
	fastP90, fastN := sl.ttftP90(fastFrom.Add(-5*time.Second), slowFrom)

	sims[0].Configure(t, fastSim)
	took = watch.waitShare(t, 0, window, 40*time.Second, "the recovered replica's share back",
		func(s float64) bool { return s > 0.15 })
	t.Logf("fast again: its share back above 15%% after %s", took.Round(100*time.Millisecond))
	t.Logf("client TTFT p90: %s before (%d requests); with one replica slowed 10x: %s while it was slow (%d requests), %s once it was held back (%d requests)",
		fastP90.Round(time.Millisecond), fastN, slowAll.Round(time.Millisecond), nAll, slowHeld.Round(time.Millisecond), nHeld)
	if r := replicaSlowStatus(t, g, "qwen", sims[0].URL); r.Slow != "" && r.Slow != "ok" {
		t.Errorf("status after recovery: %+v", r)
	}
}

// slowStatus is a replica's slow-replica fields of the status snapshot.
type slowStatus struct {
	URL          string
	LatencyScore *float64 `json:"latency_score"`
	Slow         string   `json:"slow"`
	SlowUntil    *string  `json:"slow_until"`
}

func replicaSlowStatus(t testing.TB, g *Gateway, model, replica string) slowStatus {
	t.Helper()
	resp, err := http.Get(g.Admin + "/llmedge/status.json")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var snap struct {
		Models []struct {
			Name     string
			Replicas []slowStatus
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&snap); err != nil {
		t.Fatal(err)
	}
	for _, m := range snap.Models {
		for _, r := range m.Replicas {
			if m.Name == model && r.URL == replica {
				return r
			}
		}
	}
	t.Fatalf("status.json has no replica %s of %s", replica, model)
	return slowStatus{}
}
