package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// overloadShot is what a client saw of one streamed request: its status,
// the time to its first text event (or to its refusal), and a refusal's
// Retry-After and body.
type overloadShot struct {
	status     int
	took       time.Duration
	retryAfter string
	body       string
	err        error
}

// overloadRequest sends a streamed chat for tok (with the priority header
// when given) and reads it to its end.
func overloadRequest(ctx context.Context, g *Gateway, tok, priority string) overloadShot {
	body, _ := json.Marshal(chatBody("qwen", true))
	req, _ := http.NewRequestWithContext(ctx, "POST", g.Base+"/tasks/assistant_inference", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	if priority != "" {
		req.Header.Set("Llmedge-Priority", priority)
	}
	start := time.Now()
	resp, err := g.Client.Do(req)
	if err != nil {
		return overloadShot{err: err}
	}
	defer resp.Body.Close()
	s := overloadShot{status: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After")}
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		s.took, s.body = time.Since(start), string(b)
		return s
	}
	rd := bufio.NewReader(resp.Body)
	for {
		line, err := rd.ReadString('\n')
		if err != nil {
			if s.took == 0 {
				s.err = fmt.Errorf("stream ended without text: %w", err)
			}
			return s
		}
		if s.took == 0 && strings.HasPrefix(line, "data: ") {
			s.took = time.Since(start)
		}
		if strings.Contains(line, `"error"`) {
			s.err = fmt.Errorf("stream error: %s", line)
		}
	}
}

func p90(d []time.Duration) time.Duration {
	d = slices.Clone(d)
	slices.Sort(d)
	return d[(len(d)*9+9)/10-1]
}

// criticalTTFTs has workers critical clients send streams one after the
// other until n have been answered, and returns their times to first
// token.
func criticalTTFTs(t *testing.T, g *Gateway, tok string, workers, n int) []time.Duration {
	t.Helper()
	var mu sync.Mutex
	var out []time.Duration
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				done := len(out) >= n
				mu.Unlock()
				if done {
					return
				}
				s := overloadRequest(context.Background(), g, tok, "")
				if s.err != nil || s.status != 200 {
					t.Errorf("critical request: status %d, %v: %s", s.status, s.err, s.body)
					return
				}
				mu.Lock()
				out = append(out, s.took)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return out
}

// TestOverloadClasses: two replicas of two slots each (4 slots; a request
// holds one about 400 ms: capacity about 10 requests a second), a critical
// tenant with two interactive clients, a sheddable tenant sending 30
// requests a second (3x capacity). The critical tenant's p90 time to first
// token stays within 1.5x of what it sees alone; the sheddable tenant's
// refusals are 429s with Retry-After, fast, never timeouts; no request
// waits past the queue limit; the shed requests are counted in the metrics
// and on the status page.
func TestOverloadClasses(t *testing.T) {
	const ttft, queueLimit = 200 * time.Millisecond, time.Second
	sims := []*Sim{startSim(t, "-ttft", "200ms", "-itl", "10ms", "-tokens", "20"),
		startSim(t, "-ttft", "200ms", "-itl", "10ms", "-tokens", "20")}
	g := startGateway(t, GatewayConfig{
		Options: "\t\tuser crit " + demoHash + " {\n\t\t\tpriority critical\n\t\t}\n" +
			"\t\tuser batch " + demoHash + " {\n\t\t\tpriority sheddable\n\t\t}",
		Models: map[string]string{"qwen": staticModel(sims...) + `
			max_concurrency 2
			lb_policy least_requests
			queue {
				length 100
				timeout 1s
				reserve 2
			}`},
	})
	crit, batch := g.Token(t, "crit", "demo", ""), g.Token(t, "batch", "demo", "")

	// A class the header does not name: 400 in the door's shape.
	if s := overloadRequest(context.Background(), g, crit, "urgent"); s.status != 400 || !strings.Contains(s.body, `"detail"`) ||
		!strings.Contains(s.body, "Llmedge-Priority") {
		t.Fatalf("an unknown class: %d %s", s.status, s.body)
	}

	alone := criticalTTFTs(t, g, crit, 2, 30)

	// 3x capacity of sheddable work, open loop, while the critical
	// tenant measures again.
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	var shots []overloadShot
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(time.Second / 30)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				s := overloadRequest(context.Background(), g, batch, "")
				mu.Lock()
				shots = append(shots, s)
				mu.Unlock()
			}()
		}
	}()
	// Saturated: the reserve reached, sheddable work refused.
	waitFor(t, 10*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return slices.ContainsFunc(shots, func(s overloadShot) bool { return s.status == 429 })
	})
	// A critical user's request lowered by its header is shed too; the
	// other doors refuse in their own shapes.
	lowered := overloadRequest(context.Background(), g, crit, "sheddable")
	for _, d := range []struct{ path, body, want string }{
		{"/v1/chat/completions", `{"model":"qwen","messages":[{"role":"user","content":"hi"}]}`, `"code":"rate_limit_exceeded"`},
		{"/v1/messages", `{"model":"qwen","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`, `"type":"rate_limit_error"`},
	} {
		if status, body, ra := doorRequest(t, g, d.path, d.body, batch, ""); status != 429 || ra == "" || !strings.Contains(body, d.want) {
			t.Errorf("%s, sheddable while saturated: %d (Retry-After %q) %s", d.path, status, ra, body)
		}
	}
	if status, body, _ := doorRequest(t, g, "/v1/chat/completions", `{"model":"qwen","messages":[{"role":"user","content":"hi"}]}`, crit, "high"); status != 400 ||
		!strings.Contains(body, `"code":"invalid_priority"`) {
		t.Errorf("OpenAI door, an unknown class: %d %s", status, body)
	}
	over := criticalTTFTs(t, g, crit, 2, 30)
	cancel()
	wg.Wait()

	a, o := p90(alone), p90(over)
	t.Logf("critical TTFT p90: alone %v, under 3x sheddable overload %v (%.2fx)", a, o, float64(o)/float64(a))
	if o > a*3/2 {
		t.Errorf("critical p90 %v under overload, more than 1.5x its %v alone", o, a)
	}
	if lowered.status != 429 || !strings.Contains(lowered.body, "sheddable requests are refused") {
		t.Errorf("a critical user's request lowered to sheddable: %d, want 429", lowered.status)
	}
	var ok, shed int
	var refusals []time.Duration
	for _, s := range shots {
		switch {
		case s.err != nil:
			t.Errorf("sheddable request: %v", s.err)
		case s.status == 200:
			ok++
		case s.status == 429:
			shed++
			refusals = append(refusals, s.took)
			if s.retryAfter == "" || !strings.Contains(s.body, "sheddable requests are refused") {
				t.Errorf("a refusal without Retry-After or reason: %q %s", s.retryAfter, s.body)
			}
		default:
			t.Errorf("sheddable request: status %d %s", s.status, s.body)
		}
		// Nothing waits past the queue limit: a refusal or a first token
		// comes within it (plus the replica's own time to first token).
		if s.took > queueLimit+ttft+300*time.Millisecond {
			t.Errorf("a request took %v to its answer or refusal, past the queue limit %v", s.took, queueLimit)
		}
	}
	slices.Sort(refusals)
	t.Logf("sheddable: %d requests, %d served, %d refused (429), refusal p50 %v max %v", len(shots), ok, shed,
		refusals[len(refusals)/2], refusals[len(refusals)-1])
	if shed < len(shots)/3 || refusals[len(refusals)-1] > time.Second {
		t.Errorf("sheddable refusals: %d of %d, slowest %v; want many, each under 1s", shed, len(shots), refusals[len(refusals)-1])
	}

	// Counted: every refusal in the metrics, the window's on the page.
	m := g.scrape(t)
	if got := metricValue(t, m, `llmedge_shed_total{class="sheddable",model_type="qwen"}`); int(got) != shed+3 {
		t.Errorf("llmedge_shed_total %v, want %d", got, shed+3)
	}
	if got := metricValue(t, m, `llmedge_queue_wait_seconds_count{class="critical",model_type="qwen"}`); got < 60 {
		t.Errorf("critical queue waits observed: %v, want at least 60", got)
	}
	resp, err := http.Get(g.Admin + "/llmedge/status.json")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var snap struct {
		Models []struct {
			Name     string
			Shed     int
			Overload *struct {
				Reserve int
				Sheds   bool
				Queued  map[string]int
			}
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&snap); err != nil {
		t.Fatal(err)
	}
	if len(snap.Models) != 1 || snap.Models[0].Shed != shed+3 || snap.Models[0].Overload == nil ||
		snap.Models[0].Overload.Reserve != 2 || !snap.Models[0].Overload.Sheds || len(snap.Models[0].Overload.Queued) != 3 {
		t.Errorf("status page: %+v", snap.Models)
	}
}

// doorRequest posts body to one of the gateway's doors as tok, with the
// priority header when given, and returns the status, the body and
// Retry-After.
func doorRequest(t *testing.T, g *Gateway, path, body, tok, priority string) (int, string, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", g.Base+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	if priority != "" {
		req.Header.Set("Llmedge-Priority", priority)
	}
	resp, err := g.Client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header.Get("Retry-After")
}

// TestEnginePriority: with engine_priority, each request's class reaches
// the replica as vLLM's "priority" (lower runs earlier), through the
// native door (a body the gateway writes) and the OpenAI door (the
// client's body carried through, its own priority replaced); without it,
// the body has none of the gateway's.
func TestEnginePriority(t *testing.T) {
	sim := startSim(t, "-tokens", "3")
	plain := startSim(t, "-tokens", "3")
	g := startGateway(t, GatewayConfig{
		Options: "\t\tuser crit " + demoHash + " {\n\t\t\tpriority critical\n\t\t}\n" +
			"\t\tuser batch " + demoHash + " {\n\t\t\tpriority sheddable\n\t\t}",
		Models: map[string]string{
			"qwen":  staticModel(sim) + "\n\t\t\tengine_priority -10 0 10",
			"gemma": staticModel(plain),
		},
	})
	crit, batch, std := g.Token(t, "crit", "demo", ""), g.Token(t, "batch", "demo", ""), g.Token(t, "demo", "demo", "")
	for _, tc := range []struct {
		name, tok, priority, path, body, want string
	}{
		{"critical, native", crit, "", "/tasks/assistant_inference", `{"model_type":"qwen","messages":[{"role":"user","content":"hi"}]}`, `"priority":-10`},
		{"critical lowered to standard", crit, "standard", "/tasks/assistant_inference", `{"model_type":"qwen","messages":[{"role":"user","content":"hi"}]}`, `"priority":0`},
		{"sheddable, OpenAI, the client's own replaced", batch, "", "/v1/chat/completions", `{"model":"qwen","priority":-100,"messages":[{"role":"user","content":"hi"}]}`, `"priority":10`},
		{"standard, OpenAI", std, "", "/v1/chat/completions", `{"model":"qwen","messages":[{"role":"user","content":"hi"}]}`, `"priority":0`},
	} {
		sim.reset(t)
		if status, body, _ := doorRequest(t, g, tc.path, tc.body, tc.tok, tc.priority); status != 200 {
			t.Fatalf("%s: %d %s", tc.name, status, body)
		}
		if got := string(sim.only(t).Body); !strings.Contains(got, tc.want) || strings.Count(got, `"priority"`) != 1 {
			t.Errorf("%s: the replica got %s, want %s once", tc.name, got, tc.want)
		}
	}
	if status, body, _ := doorRequest(t, g, "/tasks/assistant_inference", `{"model_type":"gemma","messages":[{"role":"user","content":"hi"}]}`, crit, ""); status != 200 {
		t.Fatalf("gemma: %d %s", status, body)
	}
	if got := string(plain.only(t).Body); strings.Contains(got, "priority") {
		t.Errorf("without engine_priority the replica got %s", got)
	}
}
