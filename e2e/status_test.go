package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// The operators' status page, in a real browser: Debian's chromium,
// headless, driven through the DevTools protocol by chromedp, against a
// gateway in front of simulator processes.

const statusSecret = "status-page-must-never-show-this-prompt"

// statusSystem is a system prompt every request shares: the prefix index
// predicts cache hits on it.
var statusSystem = strings.Repeat("You answer questions about the weather, briefly and politely. ", 8)

// statusGateway starts a gateway with three qwen replicas and one gemma
// replica, the status page on a loopback site of its own, as the README
// tells operators to serve it. It returns the page's base URL.
func statusGateway(t *testing.T) (*Gateway, []*Sim, string) {
	t.Helper()
	// A small KV cache, so that the page has a usage to show.
	sim := []string{"-itl", "20ms", "-tokens", "12", "-ttft", "30ms", "-kv-cache-blocks", "64"}
	sims := []*Sim{
		startSim(t, sim...),
		startSim(t, append(sim, "-seed", "2")...),
		startSim(t, append(sim, "-seed", "3")...),
	}
	gemma := startSim(t, "-itl", "10ms", "-tokens", "6")
	g := startGateway(t, GatewayConfig{
		Models: map[string]string{
			// One failure opens a breaker, and it stays open for the
			// test: what the page must show is a dead replica with its
			// breaker open, not a breaker probing again.
			"qwen": staticModel(sims...) + `
			health_interval 500ms
			breaker {
				consecutive_failures 1
				open_timeout 10m
			}`,
			// A tenant limit, for the page's refusals by reason.
			"gemma": staticModel(gemma) + "\n\t\t\tlimits {\n\t\t\t\trpm 2\n\t\t\t}",
		},
		Sites:      "http://127.0.0.1:{{index .Extra 0}} {\n\tbind 127.0.0.1\n\tllm_status\n}\n",
		ExtraPorts: 1,
	})
	return g, sims, fmt.Sprintf("http://127.0.0.1:%d/", g.Extra[0])
}

// chromium is the browser the test drives: $LLMEDGE_CHROMIUM, or Debian's
// package (`apt-get install chromium`, which .ci/run does).
func chromium(t *testing.T) string {
	t.Helper()
	path := os.Getenv("LLMEDGE_CHROMIUM")
	if path == "" {
		path = "/usr/bin/chromium"
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("no browser at %s: apt-get install -y chromium, or set LLMEDGE_CHROMIUM (%v)", path, err)
	}
	return path
}

// browser starts a headless chromium with a fresh profile, and collects
// what the page writes to its console as errors (exceptions, CSP
// violations, failed loads).
func browser(t *testing.T) (context.Context, func() []string) {
	t.Helper()
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(chromium(t)),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
	)
	ctx, cancel := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	// The whole browser part of a test: generous, for a busy machine.
	ctx, cancelTimeout := context.WithTimeout(ctx, 3*time.Minute)
	t.Cleanup(func() { cancelTimeout(); cancel(); cancelAlloc() })

	var mu sync.Mutex
	var problems []string
	if err := chromedp.Listen(ctx, func(ev any) {
		var p string
		switch e := ev.(type) {
		case *runtime.EventExceptionThrown:
			p = "exception: " + e.ExceptionDetails.Text
			if e.ExceptionDetails.Exception != nil {
				p += " " + e.ExceptionDetails.Exception.Description
			}
		case *runtime.EventConsoleAPICalled:
			if e.Type == runtime.ConsoleAPICalledTypeError {
				p = "console.error"
			}
		case *log.EventEntryAdded:
			if e.Entry.Level == log.EntryLevelError {
				p = "log: " + e.Entry.Text
			}
		}
		if p != "" {
			mu.Lock()
			problems = append(problems, p)
			mu.Unlock()
		}
	}); err != nil {
		t.Fatalf("starting %s: %v", chromium(t), err)
	}
	return ctx, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), problems...)
	}
}

// artifacts is where a test leaves files for people to look at:
// $LLMEDGE_ARTIFACTS when set (CI keeps it), else the test's temporary
// directory, whose path the test logs.
func artifacts(t *testing.T) string {
	t.Helper()
	if dir := os.Getenv("LLMEDGE_ARTIFACTS"); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	return t.TempDir()
}

// cell is the text of a replica's cell on the page.
func cell(replica, field string) string {
	return fmt.Sprintf(`(document.querySelector('tr[data-replica=%q] [data-field=%q]') || {}).textContent`, replica, field)
}

// TestStatusPageInBrowser opens the status page in chromium while
// requests flow, kills a replica with SIGKILL, and watches the page show
// it down with its breaker open, without a reload.
func TestStatusPageInBrowser(t *testing.T) {
	g, sims, page := statusGateway(t)
	demo := g.Token(t, "demo", "demo", "")
	// alice may use qwen only: her gemma requests are refused for scope.
	alice := g.Token(t, "alice", "demo", "")

	// Not streamed: a request cut by the kill is retried on another
	// replica, so no client sees a failure (a stream that had begun
	// would end with an error, as it must).
	l := startLoad(4, func(_, i int) error {
		body := map[string]any{"messages": []map[string]string{{"role": "system", "content": statusSystem},
			{"role": "user", "content": statusSecret + fmt.Sprint(" turn ", i%3)}}, "model_type": "qwen"}
		return g.infer(context.Background(), nil, demo, body).ok(false)
	})
	defer func() {
		if l != nil {
			l.finish(t)
		}
	}()
	for range 3 {
		if r := g.infer(context.Background(), nil, alice, withModel("gemma")); r.status != http.StatusForbidden {
			t.Fatalf("alice's gemma request: %d %s", r.status, r.body)
		}
	}
	// demo's gemma requests beyond its limit (2 a minute) are refused.
	limited := 0
	for range 4 {
		switch r := g.infer(context.Background(), nil, demo, withModel("gemma")); r.status {
		case http.StatusTooManyRequests:
			limited++
		case http.StatusOK:
		default:
			t.Fatalf("demo's gemma request: %d %s", r.status, r.body)
		}
	}
	if limited == 0 {
		t.Fatal("no gemma request was refused by the limit")
	}
	l.waitDone(t, 20)

	ctx, problems := browser(t)
	if err := chromedp.Do(ctx, chromedp.Navigate(page)); err != nil {
		t.Fatalf("opening %s: %v", page, err)
	}
	// The page fills itself from the stream: every replica up, breakers
	// closed, the users' figures.
	victim := sims[1].URL
	var up []string
	for _, s := range sims {
		up = append(up, fmt.Sprintf(`%s === 'up' && %s === 'closed'`, cell(s.URL, "health"), cell(s.URL, "breaker")))
	}
	waitPage(t, ctx, "every replica up", strings.Join(up, " && "))
	waitPage(t, ctx, "tenants", fmt.Sprintf(`!!document.querySelector('#top tr[data-user="demo"]') && `+
		`document.querySelector('#refused tr[data-user="alice"] [data-field="scope"]')?.textContent === '3' && `+
		`document.querySelector('#refused tr[data-user="demo"] [data-field="limit"]')?.textContent === '%d'`, limited))
	waitPage(t, ctx, "a time to first token", `/\d+ ms/.test(document.querySelector('section[data-model="qwen"] .figures').textContent)`)

	// Kill a replica mid-answer, as a crash does: its in-flight requests
	// fail (one failure opens its breaker) and are retried elsewhere; its
	// health probes then fail.
	waitFor(t, 30*time.Second, func() bool { return sims[1].Stats(t).InFlight > 0 })
	sims[1].Kill()
	waitPage(t, ctx, "the killed replica down with its breaker open",
		fmt.Sprintf(`%s === 'down' && %s === 'open'`, cell(victim, "health"), cell(victim, "breaker")))
	for _, s := range []*Sim{sims[0], sims[2]} {
		if got, _ := chromedp.Run(ctx, chromedp.Evaluate[string](cell(s.URL, "health"))); got != "up" {
			t.Errorf("survivor %s shows %q", s.URL, got)
		}
	}
	l.waitDone(t, 10) // requests still flow, on the survivors

	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(artifacts(t), "status-page.png")
	if err := os.WriteFile(path, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot of the status page: %s", path)
	l.finish(t)
	l = nil

	// Nothing of a request's content or credential is on the page.
	text, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.documentElement.outerHTML`))
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{statusSecret, demo, alice, "Bearer"} {
		if strings.Contains(text, secret) {
			t.Errorf("the page shows %.40q", secret)
		}
	}
	if p := problems(); len(p) > 0 {
		t.Errorf("the page logged errors: %q", p)
	}

	// Why the page is not on the admin endpoint: a browser's navigation
	// there is refused (Sec-Fetch-Mode without an Origin fails Caddy's
	// cross-origin check), so the admin endpoint serves data to scripts
	// only. Should Caddy ever let it through, the page could move there.
	if err := chromedp.Do(ctx, chromedp.Navigate(g.Admin+"/llmedge/status.json")); err != nil {
		t.Fatal(err)
	}
	if body, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.innerText`)); !strings.Contains(body, "not allowed to access from origin") {
		t.Errorf("the admin endpoint answered a browser's navigation: %.200s", body)
	}
}

// waitPage polls a JavaScript predicate on the page until it holds.
func waitPage(t *testing.T, ctx context.Context, what, predicate string) {
	t.Helper()
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](predicate, chromedp.WithPollingInterval(100*time.Millisecond),
		chromedp.WithPollingTimeout(60*time.Second))); err != nil {
		body, _ := chromedp.Run(context.WithoutCancel(ctx), chromedp.Evaluate[string](`document.body.innerText`))
		t.Fatalf("waiting for %s: %v\npage:\n%s", what, err, body)
	}
}

// TestStatusData reads the status data where scripts read it (the admin
// endpoint, curl-style) and checks that its streams end when a reload
// replaces them, so that a page left open never holds a reload up.
func TestStatusData(t *testing.T) {
	g, sims, page := statusGateway(t)
	tok := g.Token(t, "demo", "demo", "")
	for i := range 6 {
		if r := g.infer(context.Background(), nil, tok, map[string]any{"messages": []map[string]string{{"role": "user", "content": fmt.Sprint("hello ", i)}}}); r.ok(false) != nil {
			t.Fatal(r.ok(false))
		}
	}

	var snap struct {
		Models []struct {
			Name              string   `json:"name"`
			Source            string   `json:"source"`
			Policy            string   `json:"policy"`
			Ready             bool     `json:"ready"`
			RequestsPerSecond float64  `json:"requests_per_second"`
			PrefixHitRate     *float64 `json:"prefix_hit_rate"`
			TTFT              struct {
				P50     *float64 `json:"p50"`
				Samples int      `json:"samples"`
			} `json:"ttft"`
			Replicas []struct {
				URL     string `json:"url"`
				State   string `json:"state"`
				Breaker string `json:"breaker"`
				Served  int    `json:"served"`
			} `json:"replicas"`
		} `json:"models"`
		Tenants struct {
			TopTokens []struct {
				User   string `json:"user"`
				Tokens int    `json:"tokens"`
			} `json:"top_tokens"`
		} `json:"tenants"`
	}
	resp, err := http.Get(g.Admin + "/llmedge/status.json")
	if err != nil {
		t.Fatal(err)
	}
	readJSON(t, resp, &snap)
	byName := map[string]int{}
	for i, m := range snap.Models {
		byName[m.Name] = i
	}
	q := snap.Models[byName["qwen"]]
	served := 0
	for _, r := range q.Replicas {
		served += r.Served
		if r.State != "usable" || r.Breaker != "closed" {
			t.Errorf("replica %+v", r)
		}
	}
	if len(q.Replicas) != len(sims) || served != 6 || q.Source != "static" || q.Policy != "prefix_cache" || !q.Ready ||
		q.RequestsPerSecond <= 0 || q.TTFT.Samples != 6 || q.TTFT.P50 == nil || q.PrefixHitRate == nil {
		t.Errorf("qwen: %+v", q)
	}
	if u := snap.Tenants.TopTokens; len(u) != 1 || u[0].User != "demo" || u[0].Tokens == 0 {
		t.Errorf("top users %+v", u)
	}

	// A browser cannot open a page on the admin endpoint: there is none.
	if resp, err := http.Get(g.Admin + "/llmedge/status"); err != nil || resp.StatusCode != http.StatusNotFound {
		t.Errorf("admin /llmedge/status: %v %v, want 404", resp.Status, err)
	}

	// Both streams, open across a reload, end with it.
	streams := map[string]string{"admin": g.Admin + "/llmedge/status/events", "page": page + "events"}
	ended := make(chan string, len(streams))
	for name, url := range streams {
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		rd := bufio.NewReader(resp.Body)
		for {
			line, err := rd.ReadString('\n')
			if err != nil {
				t.Fatalf("%s stream: %v", name, err)
			}
			if strings.HasPrefix(line, "data: {") {
				var s struct{ Models []any }
				if err := json.Unmarshal([]byte(line[len("data: "):]), &s); err != nil || len(s.Models) != 2 {
					t.Fatalf("%s stream event %q: %v", name, line, err)
				}
				break
			}
		}
		go func() {
			for {
				if _, err := rd.ReadString('\n'); err != nil {
					resp.Body.Close()
					ended <- name
					return
				}
			}
		}()
	}
	g.Reload(t, func(s string) string { return s })
	for range streams {
		select {
		case <-ended:
		case <-time.After(30 * time.Second):
			t.Fatal("a status stream outlived the reload")
		}
	}
}
