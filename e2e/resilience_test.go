package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// load runs fn on workers goroutines until stop is closed, and collects
// the failures.
type load struct {
	wg       sync.WaitGroup
	stop     chan struct{}
	done     atomic.Int64
	mu       sync.Mutex
	failures []string
}

func startLoad(workers int, fn func(worker, i int) error) *load {
	l := &load{stop: make(chan struct{})}
	for w := 0; w < workers; w++ {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for i := 0; ; i++ {
				select {
				case <-l.stop:
					return
				default:
				}
				if err := fn(w, i); err != nil {
					l.mu.Lock()
					l.failures = append(l.failures, err.Error())
					l.mu.Unlock()
				}
				l.done.Add(1)
			}
		}()
	}
	return l
}

// finish stops the load and fails the test if any request failed.
func (l *load) finish(t *testing.T) {
	t.Helper()
	close(l.stop)
	l.wg.Wait()
	if n := len(l.failures); n > 0 {
		t.Fatalf("%d of %d requests failed; first: %s", n, l.done.Load(), l.failures[0])
	}
}

// waitDone waits until n more requests finished.
func (l *load) waitDone(t *testing.T, n int64) {
	t.Helper()
	target := l.done.Load() + n
	waitFor(t, 60*time.Second, func() bool { return l.done.Load() >= target })
}

func TestKillOneOfThreeReplicas(t *testing.T) {
	sims := []*Sim{startSim(t, "-itl", "5ms", "-tokens", "20"), startSim(t, "-itl", "5ms", "-tokens", "20", "-seed", "2"),
		startSim(t, "-itl", "5ms", "-tokens", "20", "-seed", "3")}
	g := startGateway(t, GatewayConfig{Models: map[string]string{"qwen": staticModel(sims...), "gemma": staticModel(sims...)}})
	tok := g.Token(t, "demo", "demo", "")
	l := startLoad(6, func(_, _ int) error {
		return g.infer(context.Background(), nil, tok, withModel("qwen")).ok(false)
	})
	l.waitDone(t, 30)
	waitFor(t, 10*time.Second, func() bool { return sims[1].Stats(t).InFlight > 0 }) // kill it mid-answer
	sims[1].Kill()
	l.waitDone(t, 150)
	l.finish(t)
	breakerLog(t, g, sims[1].URL, "open", 10*time.Second) // the dead replica left selection
	for _, i := range []int{0, 2} {
		if st := sims[i].Stats(t); st.Completed == 0 {
			t.Fatalf("survivor %d served nothing", i)
		}
	}
}

// breakerLog waits for the gateway to log the breaker of replica moving to state.
func breakerLog(t *testing.T, g *Gateway, replica, state string, d time.Duration) {
	t.Helper()
	waitFor(t, d, func() bool {
		for _, line := range strings.Split(g.Log(), "\n") {
			if strings.Contains(line, "replica circuit breaker "+state+`"`) && strings.Contains(line, replica) {
				return true
			}
		}
		return false
	})
}

func TestFrozenReplicaRetriedThenBreakerCycles(t *testing.T) {
	a := startSim(t, "-itl", "2ms", "-tokens", "10")
	b := startSim(t, "-itl", "2ms", "-tokens", "10", "-seed", "2")
	c := startSim(t, "-itl", "2ms", "-tokens", "10", "-seed", "3")
	const firstToken = time.Second
	model := staticModel(a, b, c) + `
			lb_policy round_robin
			first_token_timeout 1s
			stream_upstream always
			breaker {
				consecutive_failures 2
				open_timeout 5s
			}`
	g := startGateway(t, GatewayConfig{Models: map[string]string{"qwen": model, "gemma": staticModel(b)}})
	tok := g.Token(t, "demo", "demo", "")

	a.Signal(t, syscall.SIGSTOP)
	var slow atomic.Int64
	l := startLoad(3, func(w, i int) error {
		start := time.Now()
		r := g.infer(context.Background(), nil, tok, withModel("qwen", "stream", (w+i)%2 == 0))
		if time.Since(start) >= firstToken {
			slow.Add(1)
		}
		return r.ok((w+i)%2 == 0)
	})
	// The frozen replica's requests wait out the first-token timeout, are
	// retried elsewhere, and its breaker opens after 2 failures.
	breakerLog(t, g, a.URL, "open", 60*time.Second)
	if slow.Load() < 1 {
		t.Fatal("no request waited for the frozen replica")
	}
	slowAtOpen := slow.Load()
	l.waitDone(t, 30)
	// Only requests already waiting on it when it opened (one per other
	// worker) may still be slow, plus a half-open probe on a slow machine.
	if extra := slow.Load() - slowAtOpen; extra > 3 {
		t.Fatalf("%d more slow requests after the breaker opened", extra)
	}
	a.Signal(t, syscall.SIGCONT)
	breakerLog(t, g, a.URL, "half-open", 60*time.Second)
	breakerLog(t, g, a.URL, "closed", 60*time.Second)
	before := a.Stats(t).Completed
	l.waitDone(t, 30)
	l.finish(t)
	if a.Stats(t).Completed <= before {
		t.Fatal("the resumed replica got no traffic after its breaker closed")
	}
}

func TestFailingReplicaNeverSeenByClients(t *testing.T) {
	ok1 := startSim(t, "-itl", "1ms", "-tokens", "8")
	ok2 := startSim(t, "-itl", "1ms", "-tokens", "8", "-seed", "2")
	bad := startSim(t, "-error-rate", "1", "-error-status", "500")
	const workers, threshold = 4, 3
	model := staticModel(ok1, bad, ok2) + `
			lb_policy round_robin
			breaker {
				consecutive_failures 3
				open_timeout 10m
			}`
	g := startGateway(t, GatewayConfig{Models: map[string]string{"qwen": model, "gemma": staticModel(ok1)}})
	tok := g.Token(t, "demo", "demo", "")
	l := startLoad(workers, func(w, i int) error {
		stream := (w+i)%2 == 0
		return g.infer(context.Background(), nil, tok, withModel("qwen", "stream", stream)).ok(stream)
	})
	l.waitDone(t, 200)
	l.finish(t)
	st := bad.Stats(t)
	// The breaker opens at the threshold; requests already admitted while
	// it was closed may still arrive (at most one per other worker).
	if st.Requests < threshold || st.Requests > threshold+workers-1 {
		t.Fatalf("failing replica got %d requests; breaker threshold %d", st.Requests, threshold)
	}
	breakerLog(t, g, bad.URL, "open", 10*time.Second)

	// The open breaker outlives a config reload: the failing replica
	// still gets nothing.
	g.Reload(t, func(c string) string { return c })
	// The old server closes its idle HTTP/1.1 connections; do not race it.
	g.Client.CloseIdleConnections()
	for i := 0; i < 30; i++ {
		if err := g.infer(context.Background(), nil, tok, withModel("qwen")).ok(false); err != nil {
			t.Fatalf("after reload: %v", err)
		}
	}
	if after := bad.Stats(t); after.Requests != st.Requests {
		t.Fatalf("reload reset the breaker: the failing replica got %d more requests", after.Requests-st.Requests)
	}
}

func TestShutdownLetsStreamsFinish(t *testing.T) {
	sim := startSim(t, "-tokens", "80", "-itl", "25ms") // 2 s streams
	g := startGateway(t, GatewayConfig{Models: map[string]string{"qwen": staticModel(sim), "gemma": staticModel(sim)}})
	tok := g.Token(t, "demo", "demo", "")
	const n = 6
	res := make(chan error, n)
	for i := 0; i < n; i++ {
		go func() { res <- g.infer(context.Background(), nil, tok, withModel("qwen", "stream", true)).ok(true) }()
	}
	waitFor(t, 30*time.Second, func() bool { return sim.Stats(t).InFlight == n })
	g.Stop(t) // SIGTERM: Caddy's grace period (unlimited by default) lets them end
	for i := 0; i < n; i++ {
		if err := <-res; err != nil {
			t.Fatalf("stream cut by shutdown: %v", err)
		}
	}
	if st := sim.Stats(t); st.Completed != n {
		t.Fatalf("replica completed %d of %d streams", st.Completed, n)
	}
}

func TestAllReplicasGoneFast503(t *testing.T) {
	sims := []*Sim{startSim(t), startSim(t), startSim(t)}
	g := startGateway(t, GatewayConfig{Models: map[string]string{
		"qwen":  staticModel(sims...) + "\n\t\t\tbreaker {\n\t\t\t\tconsecutive_failures 2\n\t\t\t}",
		"gemma": staticModel(sims[0]),
	}})
	tok := g.Token(t, "demo", "demo", "")
	if err := g.infer(context.Background(), nil, tok, withModel("qwen")).ok(false); err != nil {
		t.Fatal(err)
	}
	for _, s := range sims {
		s.Kill()
	}
	// Unreachable replicas first, then open breakers: 503 either way, fast.
	for i := 0; i < 8; i++ {
		stream := i%2 == 1
		start := time.Now()
		r := g.infer(context.Background(), nil, tok, withModel("qwen", "stream", stream))
		var e errorBody
		if r.err != nil || json.Unmarshal(r.body, &e) != nil {
			t.Fatalf("request %d: %v %s", i, r.err, r.body)
		}
		if r.status != 503 || r.header.Get("Retry-After") == "" || !strings.Contains(e.detailText(), "'qwen'") {
			t.Fatalf("request %d: %d Retry-After %q %s", i, r.status, r.header.Get("Retry-After"), r.body)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("request %d took %v", i, d)
		}
	}
	breakerLog(t, g, sims[0].URL, "open", 10*time.Second)
}

func TestSaturatedPoolQueuesThen429(t *testing.T) {
	hang := startSim(t, "-hang")
	slowish := startSim(t, "-ttft", "300ms", "-tokens", "3")
	g := startGateway(t, GatewayConfig{Models: map[string]string{
		"qwen":  staticModel(hang) + "\n\t\t\tmax_concurrency 1\n\t\t\tqueue {\n\t\t\t\tlength 4\n\t\t\t\ttimeout 700ms\n\t\t\t}",
		"gemma": staticModel(slowish) + "\n\t\t\tmax_concurrency 1\n\t\t\tqueue {\n\t\t\t\tlength 10\n\t\t\t\ttimeout 1m\n\t\t\t}",
	}})
	tok := g.Token(t, "demo", "demo", "")

	// Requests beyond the cap wait their turn instead of failing.
	var wg sync.WaitGroup
	results := make([]result, 4)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = g.infer(context.Background(), nil, tok, withModel("gemma"))
		}()
	}
	wg.Wait()
	queued := 0
	for i, r := range results {
		if err := r.ok(false); err != nil {
			t.Fatalf("queued request %d: %v", i, err)
		}
		if !strings.Contains(r.header.Get("Server-Timing"), "queue;dur=0.00,") {
			queued++
		}
	}
	if queued < 2 {
		t.Fatalf("only %d requests report queue time", queued)
	}
	if slowish.Stats(t).Requests != 4 {
		t.Fatal("not every queued request reached the replica")
	}

	// A slot that never frees: 429 with Retry-After once the wait times out.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go g.infer(ctx, nil, tok, withModel("qwen"))
	waitFor(t, 10*time.Second, func() bool { return hang.Stats(t).InFlight == 1 })
	for _, stream := range []bool{false, true} {
		start := time.Now()
		r := g.infer(context.Background(), nil, tok, withModel("qwen", "stream", stream))
		if r.status != 429 || r.header.Get("Retry-After") == "" {
			t.Fatalf("saturated: %d %s", r.status, r.body)
		}
		if d := time.Since(start); d < 700*time.Millisecond {
			t.Fatalf("429 after %v, before the queue timeout", d)
		}
	}
}

func TestThousandCancelledStreams(t *testing.T) {
	sims := []*Sim{startSim(t, "-tokens", "2000", "-itl", "20ms"), startSim(t, "-tokens", "2000", "-itl", "20ms", "-seed", "2")}
	g := startGateway(t, GatewayConfig{Models: map[string]string{"qwen": staticModel(sims...), "gemma": staticModel(sims[0])}})
	tok := g.Token(t, "demo", "demo", "")
	// HTTP/2: a cancelled stream is a RST_STREAM, the connection stays.
	h2 := &http.Client{Transport: &http.Transport{
		TLSClientConfig:   g.Client.Transport.(*http.Transport).TLSClientConfig.Clone(),
		ForceAttemptHTTP2: true,
	}}
	defer h2.CloseIdleConnections()
	const n, parallel = 1000, 50
	var failed atomic.Int64
	var proto atomic.Value
	body, _ := json.Marshal(withModel("qwen", "stream", true))
	cancelled := func() (c int) {
		for _, s := range sims {
			st := s.Stats(t)
			if st.InFlight != 0 {
				return -1
			}
			c += st.Cancelled
		}
		return c
	}
	// Warm up (connections, pools), then take the baseline at rest.
	cancelStreams(t, g, h2, tok, body, 20, parallel, &failed, &proto)
	waitFor(t, 30*time.Second, func() bool { return cancelled() == 20 })
	base := g.Goroutines(t)
	before := cancelled()

	start := time.Now()
	cancelStreams(t, g, h2, tok, body, n, parallel, &failed, &proto)
	if failed.Load() > 0 {
		t.Fatalf("%d streams did not start", failed.Load())
	}
	t.Logf("%d streams started and cancelled in %v over %v", n, time.Since(start), proto.Load())
	// Every cancellation reached a replica, and nothing is left running.
	waitFor(t, 60*time.Second, func() bool { return cancelled()-before == n })
	var got int
	waitFor(t, 60*time.Second, func() bool {
		got = g.Goroutines(t)
		return got <= base+5
	})
	t.Logf("gateway goroutines: %d before, %d after; total %v", base, got, time.Since(start))
}

// cancelStreams opens n streams, parallel at a time, reads each one's
// first token and cancels it.
func cancelStreams(t *testing.T, g *Gateway, h2 *http.Client, tok string, body []byte, n, parallel int, failed *atomic.Int64, proto *atomic.Value) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, parallel)
	for i := 0; i < n; i++ {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, "POST", g.Base+"/tasks/assistant_inference", strings.NewReader(string(body)))
			req.Header.Set("Authorization", "Bearer "+tok)
			resp, err := h2.Do(req)
			if err != nil {
				failed.Add(1)
				return
			}
			defer resp.Body.Close()
			proto.Store(resp.Proto)
			// Read the first token, then go away mid-stream.
			line, err := bufio.NewReader(resp.Body).ReadString('\n')
			if resp.StatusCode != 200 || err != nil || !strings.HasPrefix(line, "data: ") {
				failed.Add(1)
			}
			cancel()
		}()
	}
	wg.Wait()
}

// TestReloadUnderStreamingLoadDropsNothing reloads the config twice while
// streams run. Long HTTP/1.1 streams started before the reloads must end
// with event: done; meanwhile new streams keep arriving over HTTP/2, whose
// GOAWAY lets the client move to the new server without losing a request.
// (Over HTTP/1.1 keep-alive, a request sent on a connection just as the old
// server closes it fails with EOF: no server can prevent that race.)
func TestReloadUnderStreamingLoadDropsNothing(t *testing.T) {
	sims := []*Sim{startSim(t, "-tokens", "60", "-itl", "25ms"), startSim(t, "-tokens", "60", "-itl", "25ms", "-seed", "2")}
	long := startSim(t, "-tokens", "160", "-itl", "25ms") // 4 s streams
	g := startGateway(t, GatewayConfig{
		Options: "\t\tping_interval 10s",
		Models:  map[string]string{"qwen": staticModel(sims...), "gemma": staticModel(long)},
	})
	tok := g.Token(t, "demo", "demo", "")
	h2 := &http.Client{Transport: &http.Transport{
		TLSClientConfig:   g.Client.Transport.(*http.Transport).TLSClientConfig.Clone(),
		ForceAttemptHTTP2: true,
	}}
	defer h2.CloseIdleConnections()

	// Long HTTP/1.1 streams, each on its own connection.
	const longStreams = 6
	longRes := make(chan error, longStreams)
	for i := 0; i < longStreams; i++ {
		go func() {
			c := &http.Client{Transport: &http.Transport{TLSClientConfig: g.Client.Transport.(*http.Transport).TLSClientConfig.Clone()}}
			defer c.CloseIdleConnections()
			longRes <- g.infer(context.Background(), c, tok, withModel("gemma", "stream", true)).ok(true)
		}()
	}
	waitFor(t, 30*time.Second, func() bool { return long.Stats(t).InFlight == longStreams })

	var started atomic.Int64
	l := startLoad(8, func(_, _ int) error {
		started.Add(1)
		return g.infer(context.Background(), h2, tok, withModel("qwen", "stream", true)).ok(true)
	})
	l.waitDone(t, 8)
	for i, v := range []string{"11s", "12s"} {
		from := []string{"10s", "11s"}[i]
		g.Reload(t, func(c string) string { return strings.Replace(c, "ping_interval "+from, "ping_interval "+v, 1) })
		l.waitDone(t, 16)
	}
	l.finish(t)
	for i := 0; i < longStreams; i++ {
		if err := <-longRes; err != nil {
			t.Fatalf("long HTTP/1.1 stream across the reloads: %v", err)
		}
	}
	if st := long.Stats(t); st.Completed != longStreams || st.Cancelled != 0 {
		t.Fatalf("long streams at the replica: %+v", st)
	}
	resp, err := http.Get(g.Admin + "/config/apps/llmedge/ping_interval")
	if err != nil {
		t.Fatal(err)
	}
	var ping int64
	_ = json.NewDecoder(resp.Body).Decode(&ping)
	resp.Body.Close()
	if ping != int64(12*time.Second) {
		t.Fatalf("reload not applied: ping_interval %d", ping)
	}
	t.Logf("%d HTTP/2 streams and %d HTTP/1.1 streams, all ended with event: done across 2 reloads", started.Load(), longStreams)
}
