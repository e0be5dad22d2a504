package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llmedge/llmedge/internal/redistest"
)

// redisOption is the llmedge block's lines for srv, plus extra lines.
func redisOption(srv *redistest.Server, extra ...string) string {
	return "\t\tredis " + srv.URL() + "\n" + strings.Join(extra, "\n")
}

// patientRedisOption is redisOption with a Redis timeout of 10 s, for the
// tests that count exactly what instances admit together: on a loaded
// machine a call past the default 250 ms counts Redis as down, and the
// instances then admit on their own views, which those tests must not
// mistake for a broken limit (a Redis that dies is still seen at once: its
// connections are refused).
func patientRedisOption(srv *redistest.Server, extra ...string) string {
	return "\t\tredis " + srv.URL() + " {\n\t\t\ttimeout 10s\n\t\t}\n" + strings.Join(extra, "\n")
}

// noRedisFallback fails t when g counted Redis as down: the counts of a
// test on a shared limit mean nothing after that.
func noRedisFallback(t *testing.T, g *Gateway) {
	t.Helper()
	if strings.Contains(g.Log(), "redis unreachable") {
		t.Errorf("the gateway lost Redis during the test: its limits were per instance for a while")
	}
}

// chatBody is a small chat request body.
func chatBody(model string, stream bool) map[string]any {
	return map[string]any{"messages": []map[string]string{{"role": "user", "content": "hello there"}},
		"model_type": model, "stream": stream}
}

// fire sends n requests at once, spread over gateways, and returns what
// each client saw.
func fire(t *testing.T, gws []*Gateway, token string, n int, body any) []result {
	t.Helper()
	return fireB(gws, token, n, body)
}

func detailOf(r result) string {
	var e struct {
		Detail string `json:"detail"`
	}
	_ = json.Unmarshal(r.body, &e)
	return e.Detail
}

// readyz reads a gateway's readiness report (the admin API's
// /llmedge/readyz, with the dependencies the public /readyz leaves out).
func readyz(t *testing.T, g *Gateway) (int, map[string]any) {
	t.Helper()
	resp, err := http.Get(g.Admin + "/llmedge/readyz")
	if err != nil {
		t.Fatal(err)
	}
	var body map[string]any
	readJSON(t, resp, &body)
	return resp.StatusCode, body
}

func redisStatus(body map[string]any) string {
	deps, _ := body["dependencies"].(map[string]any)
	r, _ := deps["redis"].(map[string]any)
	s, _ := r["status"].(string)
	return s
}

// TestLimitsAcrossInstances: two gateways on one Redis share a user's
// requests-per-minute exactly; refusals are 429s that name the limit with
// Retry-After and rate-limit headers; when Redis dies each instance keeps
// serving under its own limits (no 5xx, /readyz degraded), and they share
// again once it is back.
func TestLimitsAcrossInstances(t *testing.T) {
	srv := redistest.Start(t)
	sim := startSim(t)
	data := t.TempDir()
	cfg := GatewayConfig{Data: data, Models: map[string]string{"qwen": staticModel(sim), "gemma": staticModel(sim)},
		Options: patientRedisOption(srv, "\t\tlimits {\n\t\t\trpm 10\n\t\t}")}
	a, b := startGateway(t, cfg), startGateway(t, cfg)
	tok := a.Token(t, "demo", "demo", "")

	start := time.Now()
	res := fire(t, []*Gateway{a, b}, tok, 24, chatBody("qwen", false))
	// A request refills every 6 s: a slow run may admit one more, and one
	// more for every 6 s it took.
	most := 11 + int(time.Since(start)/(6*time.Second))
	admitted := 0
	for _, r := range res {
		switch r.status {
		case 200:
			admitted++
			if r.header.Get("X-Ratelimit-Limit-Requests") != "10" || r.header.Get("X-Ratelimit-Remaining-Requests") == "" ||
				r.header.Get("X-Ratelimit-Reset-Requests") == "" {
				t.Errorf("a 200 without rate-limit headers: %v", r.header)
			}
		case 429:
			if d := detailOf(r); !strings.Contains(d, "Rate limit reached for user 'demo': 10 requests per minute") {
				t.Errorf("429 detail %q", d)
			}
			if ra, err := strconv.Atoi(r.header.Get("Retry-After")); err != nil || ra < 1 || ra > 6 {
				t.Errorf("Retry-After %q", r.header.Get("Retry-After"))
			}
			if r.header.Get("X-Ratelimit-Remaining-Requests") != "0" {
				t.Errorf("429 remaining %q", r.header.Get("X-Ratelimit-Remaining-Requests"))
			}
		default:
			t.Errorf("status %d: %s", r.status, r.body)
		}
	}
	noRedisFallback(t, a)
	noRedisFallback(t, b)
	if admitted < 10 || admitted > most {
		t.Errorf("two instances admitted %d of 24 requests against 10 rpm (at most %d in the time they took)", admitted, most)
	}
	// Another user has its own allowance.
	alice := b.Token(t, "alice", "demo", "")
	if r := b.infer(context.Background(), nil, alice, chatBody("qwen", false)); r.status != 200 {
		t.Fatalf("alice: %d %s", r.status, r.body)
	}

	// Redis dies: each instance enforces the limits alone; nothing fails.
	srv.Kill()
	for i := 0; i < 4; i++ {
		for _, g := range []*Gateway{a, b} {
			if r := g.infer(context.Background(), nil, alice, chatBody("qwen", false)); r.status != 200 {
				t.Fatalf("with Redis down: %d %s", r.status, r.body)
			}
		}
	}
	st, body := readyz(t, a)
	if st != 200 || body["status"] != "degraded" || redisStatus(body) != "degraded" {
		t.Errorf("/readyz with Redis down: %d %v", st, body)
	}
	if m := adminMetrics(t, a); !strings.Contains(m, "llmedge_redis_up 0") || !strings.Contains(m, "llmedge_ratelimit_fallback_total") {
		t.Errorf("metrics with Redis down lack llmedge_redis_up 0 or the fallback count")
	}
	srv.Restart(t)
	waitFor(t, 15*time.Second, func() bool {
		st, body := readyz(t, a)
		return st == 200 && body["status"] == "ready" && redisStatus(body) == "up"
	})
	if r := a.infer(context.Background(), nil, alice, chatBody("qwen", false)); r.status != 200 {
		t.Fatalf("after Redis came back: %d %s", r.status, r.body)
	}
	if log := a.Log(); !strings.Contains(log, "redis unreachable") || !strings.Contains(log, "redis reachable again") {
		t.Error("the outage was not logged")
	}
}

func adminMetrics(t *testing.T, g *Gateway) string {
	t.Helper()
	resp, err := http.Get(g.Admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// TestTokensPerMinuteUnderConcurrency: 50 requests at once cannot
// overshoot a tokens-per-minute limit, since each reserves its prompt's
// estimate and its max_tokens before it reaches a replica.
func TestTokensPerMinuteUnderConcurrency(t *testing.T) {
	srv := redistest.Start(t)
	sim := startSim(t, "-tokens", "20", "-ttft", "300ms")
	g := startGateway(t, GatewayConfig{
		Models:  map[string]string{"qwen": staticModel(sim) + "\n\t\t\tmax_tokens 20", "gemma": staticModel(sim)},
		Options: patientRedisOption(srv, "\t\tlimits {\n\t\t\ttpm 600\n\t\t}"),
	})
	tok := g.Token(t, "demo", "demo", "")
	res := fire(t, []*Gateway{g}, tok, 50, chatBody("qwen", false))
	used, admitted := 0, 0
	for _, r := range res {
		switch r.status {
		case 200:
			var ans struct {
				Usage struct {
					Total int `json:"total_tokens"`
				} `json:"usage"`
			}
			_ = json.Unmarshal(r.body, &ans)
			used += ans.Usage.Total
			admitted++
		case 429:
			if d := detailOf(r); !strings.Contains(d, "600 tokens per minute") {
				t.Errorf("429 detail %q", d)
			}
		default:
			t.Errorf("status %d: %s", r.status, r.body)
		}
	}
	noRedisFallback(t, g)
	if admitted == 0 || used > 600 {
		t.Errorf("%d requests admitted used %d tokens against 600 tpm", admitted, used)
	}
	t.Logf("50 concurrent requests: %d admitted, %d tokens used of 600", admitted, used)
}

// TestConcurrencySlotFreedWhenTheClientLeaves: a stream whose client
// disconnects gives its concurrency slot back at once.
func TestConcurrencySlotFreedWhenTheClientLeaves(t *testing.T) {
	srv := redistest.Start(t)
	slow, fast := startSim(t, "-tokens", "100", "-itl", "100ms"), startSim(t)
	g := startGateway(t, GatewayConfig{
		Models:  map[string]string{"qwen": staticModel(fast), "gemma": staticModel(slow) + "\n\t\t\tlimits {\n\t\t\t\tconcurrency 1\n\t\t\t}"},
		Options: redisOption(srv),
	})
	tok := g.Token(t, "demo", "demo", "")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	body, _ := json.Marshal(chatBody("gemma", true))
	req, _ := http.NewRequestWithContext(ctx, "POST", g.Base+"/tasks/assistant_inference", strings.NewReader(string(body)))
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	resp, err := g.Client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bufio.NewReader(resp.Body).ReadString('\n'); err != nil { // the stream has started
		t.Fatal(err)
	}
	r := g.infer(context.Background(), nil, tok, chatBody("gemma", false))
	if r.status != 429 || !strings.Contains(detailOf(r), "on model 'gemma': 1 requests at once") {
		t.Fatalf("second request while the stream runs: %d %s", r.status, r.body)
	}
	// Other models are not limited.
	if r := g.infer(context.Background(), nil, tok, chatBody("qwen", false)); r.status != 200 {
		t.Fatalf("qwen: %d", r.status)
	}
	cancel()
	resp.Body.Close()
	// The slot is back: a request passes the limit (and is then cut short
	// by its own deadline, the replica being slow).
	waitFor(t, 10*time.Second, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		r := g.infer(ctx, nil, tok, chatBody("gemma", true))
		return r.status == 200
	})
}

// revokeCmd runs `llmedge revoke` against g's admin API.
func revokeCmd(t *testing.T, g *Gateway, args ...string) string {
	t.Helper()
	out, err := exec.Command(filepath.Join(binDir, "llmedge"),
		append([]string{"revoke", "--address", strings.TrimPrefix(g.Admin, "http://")}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("revoke %v: %v %s", args, err, out)
	}
	return string(out)
}

// chatStatus is the status of a small chat request with token, and the
// WWW-Authenticate challenge of a 401.
func chatStatus(g *Gateway, token string) (int, string) {
	r := g.infer(context.Background(), nil, token, chatBody("qwen", false))
	return r.status, r.header.Get("WWW-Authenticate")
}

// nextSecond waits for the next whole second: a token issued in the
// second of a user's revocation is refused too (iat has whole seconds).
func nextSecond() {
	time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(1100 * time.Millisecond)))
}

// TestRevocationAcrossInstances: `llmedge revoke --user` on one instance
// refuses the user's tokens on the other; a newer login works; one token
// revoked by `revoke --token` or by its client (RFC 7009) is refused
// everywhere; a restarted instance still refuses them.
func TestRevocationAcrossInstances(t *testing.T) {
	srv := redistest.Start(t)
	sim := startSim(t)
	data := t.TempDir()
	cfg := GatewayConfig{Data: data, Models: map[string]string{"qwen": staticModel(sim), "gemma": staticModel(sim)},
		Options: redisOption(srv)}
	a, b := startGateway(t, cfg), startGateway(t, cfg)
	old := a.Token(t, "demo", "demo", "")
	if s, _ := chatStatus(b, old); s != 200 {
		t.Fatalf("A's token on B: %d", s)
	}
	start := time.Now()
	if out := revokeCmd(t, a, "--user", "demo"); !strings.Contains(out, `"user":"demo"`) {
		t.Errorf("revoke said %s", out)
	}
	waitFor(t, 10*time.Second, func() bool { s, _ := chatStatus(b, old); return s == 401 })
	t.Logf("user revocation reached the other instance in %v", time.Since(start))
	if _, ch := chatStatus(b, old); !strings.Contains(ch, "the access token was revoked") {
		t.Errorf("challenge %q", ch)
	}
	nextSecond()
	fresh := b.Token(t, "demo", "demo", "")
	for _, g := range []*Gateway{a, b} {
		if s, _ := chatStatus(g, fresh); s != 200 {
			t.Fatalf("a token issued after the revocation: %d", s)
		}
	}

	// One token, by the command (given whole) and by its client.
	revokeCmd(t, b, "--token", fresh)
	waitFor(t, 10*time.Second, func() bool { s, _ := chatStatus(a, fresh); return s == 401 })
	other := a.Token(t, "demo", "demo", "")
	resp, err := b.Client.PostForm(b.Base+"/auth/revoke", url.Values{"token": {other}, "token_type_hint": {"access_token"}})
	if err != nil {
		t.Fatal(err)
	}
	readJSONOrEmpty(t, resp)
	if resp.StatusCode != 200 {
		t.Fatalf("RFC 7009 revocation: %d", resp.StatusCode)
	}
	waitFor(t, 10*time.Second, func() bool { s, _ := chatStatus(a, other); return s == 401 })
	resp, err = b.Client.PostForm(b.Base+"/auth/revoke", url.Values{"token": {"not-a-token"}})
	if err != nil {
		t.Fatal(err)
	}
	readJSONOrEmpty(t, resp)
	if resp.StatusCode != 200 {
		t.Fatalf("revoking an unknown token: %d (RFC 7009 wants 200)", resp.StatusCode)
	}
	// The others still work; a restarted instance knows every revocation.
	third := a.Token(t, "demo", "demo", "")
	b.Restart(t)
	if s, _ := chatStatus(b, other); s != 401 {
		t.Errorf("a restarted instance accepted a revoked token: %d", s)
	}
	if s, _ := chatStatus(b, third); s != 200 {
		t.Errorf("a restarted instance refused a good token: %d", s)
	}
}

func readJSONOrEmpty(t *testing.T, resp *http.Response) {
	t.Helper()
	defer resp.Body.Close()
	_, _ = io.ReadAll(resp.Body)
}

// TestRevocationThroughStorage: without Redis, a revocation travels
// through the storage the instances share.
func TestRevocationThroughStorage(t *testing.T) {
	sim := startSim(t)
	data := t.TempDir()
	cfg := GatewayConfig{Data: data, Models: map[string]string{"qwen": staticModel(sim), "gemma": staticModel(sim)}}
	a, b := startGateway(t, cfg), startGateway(t, cfg)
	tok := a.Token(t, "alice", "demo", "")
	if s, _ := chatStatus(b, tok); s != 200 {
		t.Fatalf("A's token on B: %d", s)
	}
	start := time.Now()
	revokeCmd(t, a, "--user", "alice")
	waitFor(t, 10*time.Second, func() bool { s, _ := chatStatus(b, tok); return s == 401 })
	t.Logf("revocation through storage reached the other instance in %v", time.Since(start))
}

// TestDisabledUserAcrossInstances: instances with their own users files;
// disabling a user in one file refuses the user's tokens on every
// instance.
func TestDisabledUserAcrossInstances(t *testing.T) {
	srv := redistest.Start(t)
	sim := startSim(t)
	data := t.TempDir()
	var files []string
	for i := 0; i < 2; i++ {
		f := filepath.Join(t.TempDir(), "users.json")
		addUserTo(t, f, "ann", "ann-pw")
		files = append(files, f)
	}
	models := map[string]string{"qwen": staticModel(sim), "gemma": staticModel(sim)}
	gw := func(file string) *Gateway {
		return startGateway(t, GatewayConfig{Data: data, Models: models,
			Options: redisOption(srv, "\t\tusers_file "+file, "\t\tusers_file_refresh 200ms")})
	}
	a, b := gw(files[0]), gw(files[1])
	tok := a.Token(t, "ann", "ann-pw", "")
	if s, _ := chatStatus(b, tok); s != 200 {
		t.Fatalf("ann on B: %d", s)
	}
	addUserTo(t, files[0], "ann", "ann-pw", "--disabled") // A's file only
	waitFor(t, 10*time.Second, func() bool { s, _ := chatStatus(b, tok); return s == 401 })
	if s, _ := chatStatus(a, tok); s != 401 {
		t.Errorf("a disabled user's token on A: %d", s)
	}
}

func addUserTo(t *testing.T, file, name, password string, extra ...string) {
	t.Helper()
	cmd := exec.Command(filepath.Join(binDir, "llmedge"), append([]string{"add-user", "--file", file, "--username", name}, extra...)...)
	cmd.Stdin = strings.NewReader(password + "\n")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("add-user: %v %s", err, out)
	}
}

// TestRedisKilledUnderLoad: with the default on_redis_failure open, Redis
// killed and restarted while two instances serve a steady load of streamed
// and one-answer requests costs no 5xx and no stuck request, and leaves no
// concurrency slot held: afterwards the user runs as many requests at once
// as its limit allows.
func TestRedisKilledUnderLoad(t *testing.T) {
	srv := redistest.Start(t)
	sim := startSim(t, "-ttft", "30ms", "-itl", "10ms", "-tokens", "8")
	data := t.TempDir()
	cfg := GatewayConfig{Data: data, Models: map[string]string{"qwen": staticModel(sim), "gemma": staticModel(sim)},
		Options: redisOption(srv, "\t\tlimits {\n\t\t\trpm 100000\n\t\t\ttpm 10000000\n\t\t\tconcurrency 6\n\t\t}")}
	a, b := startGateway(t, cfg), startGateway(t, cfg)
	tok := a.Token(t, "demo", "demo", "")

	var (
		mu       sync.Mutex
		statuses = map[int]int{}
		failures []string
		wg       sync.WaitGroup
	)
	ctx, stop := context.WithCancel(context.Background())
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			g, stream := []*Gateway{a, b}[i%2], i%4 < 2
			for ctx.Err() == nil {
				// A request that takes this long is stuck: the replica
				// answers in about 0.1 s.
				rctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				r := g.infer(rctx, nil, tok, chatBody("qwen", stream))
				cancel()
				mu.Lock()
				switch {
				case r.status == 429:
					statuses[429]++
				case r.ok(stream) != nil:
					failures = append(failures, r.ok(stream).Error())
				default:
					statuses[200]++
				}
				mu.Unlock()
			}
		}(i)
	}
	// The load's own clock: requests answered (or failed).
	answered := func() int {
		mu.Lock()
		defer mu.Unlock()
		return statuses[200] + statuses[429] + len(failures)
	}
	more := func(n int) {
		t.Helper()
		since := answered()
		waitFor(t, 60*time.Second, func() bool { return answered() >= since+n })
	}
	redisIs := func(want bool) func() bool {
		return func() bool {
			for _, g := range []*Gateway{a, b} {
				if _, body := readyz(t, g); (redisStatus(body) == "up") != want {
					return false
				}
			}
			return true
		}
	}
	more(40) // with Redis up
	srv.Kill()
	waitFor(t, 15*time.Second, redisIs(false)) // both instances know
	more(80)                                   // with Redis down
	srv.Restart(t)
	waitFor(t, 15*time.Second, redisIs(true))
	more(40) // with Redis back
	stop()
	wg.Wait()
	if len(failures) > 0 {
		t.Fatalf("%d requests failed while Redis died and came back, first: %s", len(failures), failures[0])
	}
	if statuses[200] < 50 {
		t.Fatalf("only %d requests answered (%v)", statuses[200], statuses)
	}
	t.Logf("while Redis died and came back: %v", statuses)

	// Every slot is free again: 6 requests at once (the limit) all pass.
	waitFor(t, 10*time.Second, func() bool {
		for _, r := range fire(t, []*Gateway{a, b}, tok, 6, chatBody("qwen", true)) {
			if r.status != 200 {
				return false
			}
		}
		return true
	})
}
