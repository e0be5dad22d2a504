package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/llmedge/llmedge/internal/freeport"
)

// Models as operators run them (issue 24): aliases and fallbacks, over
// HTTPS through every door, with real simulators and a real gateway.

// modelsHello is a one-message chat.
const modelsHello = `"messages":[{"role":"user","content":"Say hello."}]`

// TestModelAliases: an alias works wherever its model's name does, in
// every door; the answer gives the name asked for; a credential covering
// the model lists and uses its aliases; the metrics and the access log
// name the alias.
func TestModelAliases(t *testing.T) {
	qwen := startSim(t, "-tokens", "4", "-seed", "3")
	gemma := startSim(t, "-tokens", "4", "-seed", "3")
	logFile := filepath.Join(t.TempDir(), "access.log")
	g := startGateway(t, GatewayConfig{
		Models: map[string]string{
			"qwen":  staticModel(qwen) + "\n\t\t\talias q gpt-4o-mini",
			"gemma": staticModel(gemma) + "\n\t\t\talias g",
		},
		Site: "log {\n\t\toutput file " + logFile + "\n\t\tformat json\n\t}\n\tllm_gateway",
	})
	demo, alice := g.Token(t, "demo", "demo", ""), g.Token(t, "alice", "demo", "") // every model; qwen only

	t.Run("native", func(t *testing.T) {
		var ans struct {
			Content   string `json:"content"`
			ModelType string `json:"model_type"`
		}
		before := qwen.Stats(t).Requests
		resp := g.Infer(t, alice, `{"model_type":"q",`+modelsHello+`}`)
		if b := readJSON(t, resp, &ans); resp.StatusCode != 200 || ans.ModelType != "q" || ans.Content == "" {
			t.Fatalf("%s %s", resp.Status, b)
		}
		if got := qwen.Stats(t).Requests; got != before+1 {
			t.Fatalf("qwen's replica got %d requests, want %d", got, before+1)
		}
		// alice covers qwen, not gemma: nor its alias.
		resp = g.Infer(t, alice, `{"model_type":"g",`+modelsHello+`}`)
		if b := readJSON(t, resp, nil); resp.StatusCode != 403 {
			t.Fatalf("alice asking for gemma's alias: %s %s", resp.Status, b)
		}
		// An unknown name is still a 422 naming the accepted ones.
		resp = g.Infer(t, demo, `{"model_type":"gpt-5",`+modelsHello+`}`)
		if b := readJSON(t, resp, nil); resp.StatusCode != 422 || !strings.Contains(string(b), "gpt-4o-mini") {
			t.Fatalf("an unknown model: %s %s", resp.Status, b)
		}
	})

	t.Run("openai", func(t *testing.T) {
		var c chatCompletion
		resp := g.v1(t, "POST", "/v1/chat/completions", alice, `{"model":"gpt-4o-mini",`+modelsHello+`}`)
		if b := readJSON(t, resp, &c); resp.StatusCode != 200 || c.Model != "gpt-4o-mini" || len(c.Choices) != 1 {
			t.Fatalf("%s %s", resp.Status, b)
		}
		resp = g.v1(t, "POST", "/v1/chat/completions", demo, `{"model":"g","stream":true,`+modelsHello+`}`)
		chunks := 0
		for _, ev := range readEvents(t, resp.Body) {
			if ev.Comment || ev.Data == "[DONE]" {
				continue
			}
			var ch chatCompletion
			if err := json.Unmarshal([]byte(ev.Data), &ch); err != nil || ch.Model != "g" {
				t.Fatalf("a chunk %q does not name the alias", ev.Data)
			}
			chunks++
		}
		resp.Body.Close()
		if resp.StatusCode != 200 || chunks == 0 {
			t.Fatalf("stream: %s, %d chunks", resp.Status, chunks)
		}
		for _, tc := range []struct{ path, body string }{
			{"/v1/completions", `{"model":"q","prompt":"Say hello.","max_tokens":4}`},
			{"/v1/embeddings", `{"model":"q","input":["one","two"]}`},
			{"/v1/responses", `{"model":"q","input":"Say hello.","max_output_tokens":16}`},
		} {
			var ans struct{ Model string }
			resp := g.v1(t, "POST", tc.path, alice, tc.body)
			if b := readJSON(t, resp, &ans); resp.StatusCode != 200 || ans.Model != "q" {
				t.Fatalf("%s: %s %s", tc.path, resp.Status, b)
			}
		}

		list := func(cred string) []string {
			var l struct{ Data []struct{ ID string } }
			resp := g.v1(t, "GET", "/v1/models", cred, "")
			if b := readJSON(t, resp, &l); resp.StatusCode != 200 {
				t.Fatalf("%s %s", resp.Status, b)
			}
			var ids []string
			for _, m := range l.Data {
				ids = append(ids, m.ID)
			}
			return ids
		}
		// The template writes the models sorted by name: gemma, then qwen.
		if got, want := list(demo), []string{"gemma", "g", "qwen", "q", "gpt-4o-mini"}; !slices.Equal(got, want) {
			t.Errorf("demo lists %v, want %v", got, want)
		}
		if got, want := list(alice), []string{"qwen", "q", "gpt-4o-mini"}; !slices.Equal(got, want) {
			t.Errorf("alice lists %v, want %v", got, want)
		}
		resp = g.v1(t, "GET", "/v1/models/gpt-4o-mini", alice, "")
		if b := readJSON(t, resp, nil); resp.StatusCode != 200 || !strings.Contains(string(b), `"id":"gpt-4o-mini"`) {
			t.Fatalf("%s %s", resp.Status, b)
		}
		resp = g.v1(t, "GET", "/v1/models/g", alice, "")
		if b := readJSON(t, resp, nil); resp.StatusCode != 404 {
			t.Fatalf("alice reading gemma's alias: %s %s", resp.Status, b)
		}
	})

	t.Run("anthropic", func(t *testing.T) {
		resp := g.anthropicPost(t, g.Base, "/v1/messages", `{"model":"q","max_tokens":16,`+modelsHello+`}`, "X-Api-Key", alice)
		if m := readMessage(t, resp); m.Model != "q" || m.text() == "" {
			t.Fatalf("%+v", m)
		}
	})

	t.Run("metrics and access log", func(t *testing.T) {
		text := g.scrape(t)
		if v := metricValue(t, text, `llmedge_alias_requests_total{alias="q",model_type="qwen"}`); v < 5 {
			t.Errorf("q was asked for %v times in the metrics, want at least 5", v)
		}
		if v := metricValue(t, text, `llmedge_requests_total{model_type="qwen",status="200"}`); v < 6 {
			t.Errorf("qwen answered %v requests in the metrics, want at least 6", v)
		}
		waitFor(t, 10*time.Second, func() bool {
			b, _ := os.ReadFile(logFile)
			return strings.Contains(string(b), `"model_alias":"gpt-4o-mini"`)
		})
		b, _ := os.ReadFile(logFile)
		for _, line := range strings.Split(string(b), "\n") {
			if strings.Contains(line, `"model_alias":"gpt-4o-mini"`) && !strings.Contains(line, `"model_type":"qwen"`) {
				t.Errorf("an entry with the alias lacks its model: %s", line)
			}
		}
	})
}

// TestModelFallback: qwen's replica is not running; gemma, its fallback,
// answers within the same request, through both doors, and says so.
// A credential without gemma gets qwen's 503, and so does a request
// that refuses fallbacks. Once qwen's replica dies mid-life, the next
// request falls back too.
func TestModelFallback(t *testing.T) {
	gemma := startSim(t, "-tokens", "4", "-seed", "3")
	live := startSim(t, "-tokens", "4", "-seed", "3")
	down := fmt.Sprintf("http://127.0.0.1:%d", freeport.Must(t)) // nothing listens there
	g := startGateway(t, GatewayConfig{
		Models: map[string]string{
			"qwen":  "\t\t\tstatic " + down + "\n\t\t\tfallback gemma",
			"llama": staticModel(live) + "\n\t\t\tfallback qwen",
			"gemma": staticModel(gemma) + "\n\t\t\talias g",
		},
		Options:    "\t\tuser bob " + demoHash + " qwen llama",
		Sites:      "http://127.0.0.1:{{index .Extra 0}} {\n\tbind 127.0.0.1\n\tllm_status\n}\n",
		ExtraPorts: 1,
	})
	demo, alice, bob := g.Token(t, "demo", "demo", ""), g.Token(t, "alice", "demo", ""), g.Token(t, "bob", "demo", "")

	t.Run("native", func(t *testing.T) {
		var ans struct {
			Content   string `json:"content"`
			ModelType string `json:"model_type"`
		}
		before := gemma.Stats(t).Requests
		resp := g.Infer(t, demo, `{"model_type":"qwen",`+modelsHello+`}`)
		if b := readJSON(t, resp, &ans); resp.StatusCode != 200 || ans.ModelType != "gemma" || ans.Content == "" {
			t.Fatalf("%s %s", resp.Status, b)
		}
		if route := resp.Header.Get("Llmedge-Route"); !strings.HasSuffix(route, "; model=gemma; fallback_from=qwen") {
			t.Errorf("Llmedge-Route %q does not name the fallback", route)
		}
		if got := gemma.Stats(t).Requests; got != before+1 {
			t.Fatalf("gemma's replica got %d requests, want %d", got, before+1)
		}
	})

	t.Run("openai stream", func(t *testing.T) {
		resp := g.v1(t, "POST", "/v1/chat/completions", demo, `{"model":"qwen","stream":true,`+modelsHello+`}`)
		defer resp.Body.Close()
		if route := resp.Header.Get("Llmedge-Route"); resp.StatusCode != 200 || !strings.Contains(route, "model=gemma") {
			t.Fatalf("%s, Llmedge-Route %q", resp.Status, route)
		}
		n := 0
		for _, ev := range readEvents(t, resp.Body) {
			if ev.Comment || ev.Data == "[DONE]" {
				continue
			}
			var ch chatCompletion
			if err := json.Unmarshal([]byte(ev.Data), &ch); err != nil || ch.Model != "gemma" {
				t.Fatalf("a chunk %q does not name the model that answered", ev.Data)
			}
			n++
		}
		if n == 0 {
			t.Fatal("no chunks")
		}
	})

	t.Run("scopes", func(t *testing.T) {
		// alice covers qwen alone: no fallback widens that.
		before := gemma.Stats(t).Requests
		var e openAIError
		resp := g.v1(t, "POST", "/v1/chat/completions", alice, `{"model":"qwen",`+modelsHello+`}`)
		if b := readJSON(t, resp, &e); resp.StatusCode != 503 || e.Error == nil || !strings.Contains(e.Error.Message, "'qwen'") {
			t.Fatalf("alice: %s %s", resp.Status, b)
		}
		resp = g.Infer(t, alice, `{"model_type":"qwen",`+modelsHello+`}`)
		if b := readJSON(t, resp, nil); resp.StatusCode != 503 {
			t.Fatalf("alice, native: %s %s", resp.Status, b)
		}
		if got := gemma.Stats(t).Requests; got != before {
			t.Fatalf("gemma's replica got %d requests from a user without gemma", got-before)
		}
	})

	t.Run("refused by the request", func(t *testing.T) {
		req, _ := http.NewRequest("POST", g.Base+"/tasks/assistant_inference", strings.NewReader(`{"model_type":"qwen",`+modelsHello+`}`))
		req.Header.Set("Authorization", "Bearer "+demo)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Llmedge-No-Fallback", "1")
		resp, err := g.Client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if b := readJSON(t, resp, nil); resp.StatusCode != 503 || !strings.Contains(string(b), "'qwen'") {
			t.Fatalf("%s %s", resp.Status, b)
		}
	})

	t.Run("chain", func(t *testing.T) {
		// llama falls back to qwen, which falls back to gemma. bob covers
		// llama and qwen, not gemma: once llama's replica dies, his
		// request reaches no model he may use, and gets llama's 503; demo's
		// is answered by gemma, two steps down the chain.
		resp := g.Infer(t, bob, `{"model_type":"llama",`+modelsHello+`}`)
		if b := readJSON(t, resp, nil); resp.StatusCode != 200 || !strings.Contains(string(b), `"model_type":"llama"`) {
			t.Fatalf("llama alive: %s %s", resp.Status, b)
		}
		live.Kill()
		resp = g.Infer(t, bob, `{"model_type":"llama",`+modelsHello+`}`)
		if b := readJSON(t, resp, nil); resp.StatusCode != 503 || !strings.Contains(string(b), "'llama'") {
			t.Fatalf("bob, llama dead: %s %s", resp.Status, b)
		}
		resp = g.Infer(t, demo, `{"model_type":"llama",`+modelsHello+`}`)
		if b := readJSON(t, resp, nil); resp.StatusCode != 200 || !strings.Contains(string(b), `"model_type":"gemma"`) {
			t.Fatalf("demo, llama dead: %s %s", resp.Status, b)
		}
	})

	t.Run("metrics and status", func(t *testing.T) {
		text := g.scrape(t)
		if v := metricValue(t, text, `llmedge_fallbacks_total{fallback="gemma",model_type="qwen"}`); v < 2 {
			t.Errorf("qwen fell back to gemma %v times in the metrics, want at least 2", v)
		}
		if v := metricValue(t, text, `llmedge_fallbacks_total{fallback="gemma",model_type="llama"}`); v != 1 {
			t.Errorf("llama fell back to gemma %v times in the metrics, want 1", v)
		}
		resp, err := http.Get(g.Admin + "/llmedge/status.json")
		if err != nil {
			t.Fatal(err)
		}
		var snap struct {
			Models []struct {
				Name           string
				Fallbacks      []string `json:"fallbacks"`
				FallbacksTaken int      `json:"fallbacks_taken"`
			}
		}
		readJSON(t, resp, &snap)
		got := map[string]string{}
		for _, m := range snap.Models {
			got[m.Name] = fmt.Sprintf("%v %d", m.Fallbacks, m.FallbacksTaken)
		}
		if got["qwen"] != "[gemma] 2" || got["llama"] != "[qwen gemma] 1" || got["gemma"] != "[] 0" {
			t.Errorf("status page: %v", got)
		}

		// The page itself, in a browser: the chains, the aliases and the
		// fallbacks taken.
		ctx, problems := browser(t)
		if err := chromedp.Do(ctx, chromedp.Navigate(fmt.Sprintf("http://127.0.0.1:%d/", g.Extra[0]))); err != nil {
			t.Fatal(err)
		}
		field := func(model, f string) string {
			return fmt.Sprintf(`document.querySelector('section[data-model="%s"] [data-field="%s"]')?.textContent`, model, f)
		}
		waitPage(t, ctx, "aliases and fallbacks", field("llama", "fallbacks")+` === 'falls back to qwen, gemma' && `+
			field("gemma", "aliases")+` === 'also g' && `+
			`/fallbacks taken[^]*/.test(document.querySelector('section[data-model="qwen"] .figures').textContent) && `+
			`[...document.querySelectorAll('section[data-model="qwen"] .figures > div')].some((d) => d.textContent === '2fallbacks taken (window)')`)
		if shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)); err == nil {
			path := filepath.Join(artifacts(t), "status-page-models.png")
			if err := os.WriteFile(path, shot, 0o644); err == nil {
				t.Logf("screenshot of the status page: %s", path)
			}
		}
		if p := problems(); len(p) > 0 {
			t.Errorf("the page logged errors: %q", p)
		}
	})
}

// TestModelNamingErrors: an alias that collides, a fallback to no model
// and a fallback cycle stop the configuration from loading, with a
// message naming the problem.
func TestModelNamingErrors(t *testing.T) {
	needBinaries(t)
	for _, tc := range []struct{ name, models, want string }{
		{"alias is a model", "model qwen {\n\t\t\talias gemma\n\t\t}\n\t\tmodel gemma {\n\t\t}", `alias "gemma" is the name of a model`},
		{"alias twice", "model qwen {\n\t\t\talias x\n\t\t}\n\t\tmodel gemma {\n\t\t\talias x\n\t\t}", `alias "x" is already an alias of model "qwen"`},
		{"fallback to nothing", "model qwen {\n\t\t\tfallback llama\n\t\t}", `fallback: model "llama" is not a configured model (want one of qwen), at `},
		{"cycle", "model qwen {\n\t\t\tfallback gemma\n\t\t}\n\t\tmodel gemma {\n\t\t\tfallback qwen\n\t\t}", "fallback cycle gemma -> qwen -> gemma"},
		{"user names an alias", "user bob " + demoHash + " q\n\t\tmodel qwen {\n\t\t\talias q\n\t\t}", `"q" is an alias of model "qwen"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			conf := filepath.Join(dir, "Caddyfile")
			cfg := fmt.Sprintf("{\n\tadmin off\n\tstorage file_system %s\n\tllmedge {\n\t\t%s\n\t}\n}\nhttps://localhost:%d {\n\ttls internal\n\tllm_gateway\n}\n",
				filepath.Join(dir, "data"), tc.models, freeport.Must(t))
			if err := os.WriteFile(conf, []byte(cfg), 0o600); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			out, err := exec.CommandContext(ctx, filepath.Join(binDir, "llmedge"), "validate", "--config", conf, "--adapter", "caddyfile").CombinedOutput()
			// The message comes in a JSON log line: its quotes escaped.
			if err == nil || !strings.Contains(string(out), strings.ReplaceAll(tc.want, `"`, `\"`)) {
				t.Fatalf("validate: %v, want a refusal naming %q:\n%s", err, tc.want, lastLines(string(out), 5))
			}
		})
	}
}

// TestModelRollout: qwen is a weighted rollout of two models, each with
// its own simulator. Conversations spread by weight, each one stays on
// its model at every turn (through both doors), the answer keeps the
// name asked for, a reload that raises a share moves conversations only
// towards it, and the metrics count each share.
func TestModelRollout(t *testing.T) {
	simA := startSim(t, "-tokens", "2")
	simB := startSim(t, "-tokens", "2")
	g := startGateway(t, GatewayConfig{
		Models: map[string]string{
			"qwen":   "\t\t\trollout qwen-a 50 qwen-b 50\n\t\t\talias q",
			"qwen-a": staticModel(simA),
			"qwen-b": staticModel(simB),
		},
	})
	tok := g.Token(t, "alice", "demo", "") // qwen only: the rollout's models need no scope of their own

	// ask sends conversation i at its given turn (1: one user message)
	// and returns the model of the rollout that served it.
	ask := func(i, turn int, door string) string {
		t.Helper()
		msgs := fmt.Sprintf(`{"role":"system","content":"Be terse."},{"role":"user","content":"conversation %d"}`, i)
		for k := 1; k < turn; k++ {
			msgs += fmt.Sprintf(`,{"role":"assistant","content":"answer %d"},{"role":"user","content":"question %d"}`, k, k)
		}
		var resp *http.Response
		var name string
		if door == "native" {
			resp = g.Infer(t, tok, `{"model_type":"q","messages":[`+msgs+`]}`)
			var ans struct {
				ModelType string `json:"model_type"`
			}
			readJSON(t, resp, &ans)
			name = ans.ModelType
		} else {
			resp = g.v1(t, "POST", "/v1/chat/completions", tok, `{"model":"qwen","messages":[`+msgs+`]}`)
			var c chatCompletion
			readJSON(t, resp, &c)
			name = c.Model
		}
		route := resp.Header.Get("Llmedge-Route")
		if want := map[string]string{"native": "q", "openai": "qwen"}[door]; resp.StatusCode != 200 || name != want {
			t.Fatalf("conversation %d turn %d (%s): %s, model %q", i, turn, door, resp.Status, name)
		}
		_, served, ok := strings.Cut(route, "rollout=")
		if !ok {
			t.Fatalf("Llmedge-Route %q names no model of the rollout", route)
		}
		return served
	}

	const n = 24
	first := map[int]string{}
	count := map[string]int{}
	for i := range n {
		first[i] = ask(i, 1, "native")
		count[first[i]]++
	}
	if count["qwen-a"] == 0 || count["qwen-b"] == 0 {
		t.Fatalf("24 conversations at 50/50 all went to one model: %v", count)
	}
	if a, b := simA.Stats(t).Requests, simB.Stats(t).Requests; a != count["qwen-a"] || b != count["qwen-b"] {
		t.Fatalf("the simulators served %d and %d, the route headers say %v", a, b, count)
	}
	for i := range n {
		if got := ask(i, 3, "openai"); got != first[i] {
			t.Fatalf("conversation %d moved from %s to %s at its third turn", i, first[i], got)
		}
	}
	text := g.scrape(t)
	for _, m := range []string{"qwen-a", "qwen-b"} {
		if v := metricValue(t, text, `llmedge_rollout_requests_total{model_type="qwen",target="`+m+`"}`); v != float64(2*count[m]) {
			t.Errorf("metrics count %v requests on %s, want %d", v, m, 2*count[m])
		}
	}

	// Raise qwen-b's share: conversations move only towards it.
	g.Reload(t, func(conf string) string {
		return strings.Replace(conf, "rollout qwen-a 50 qwen-b 50", "rollout qwen-a 10 qwen-b 90", 1)
	})
	// The old server closes its idle HTTP/1.1 connections; do not race it.
	g.Client.CloseIdleConnections()
	moved := 0
	for i := range n {
		got := ask(i, 5, "native")
		if first[i] == "qwen-b" && got != "qwen-b" {
			t.Fatalf("conversation %d left qwen-b when its share grew", i)
		}
		if got != first[i] {
			moved++
		}
	}
	if moved == 0 {
		t.Errorf("no conversation moved to qwen-b when its share went from 50 to 90 (%v)", count)
	}
}

// TestModelAliasSDK runs the Go SDK's TestAlias (e2e/sdk/go/models_test.go)
// against a gateway whose qwen answers to gpt-4o-mini and gemma to g:
// aliases through OpenAI's official client, once per kind of credential.
func TestModelAliasSDK(t *testing.T) {
	lookPath(t, "go")
	sim := startSim(t, "-tokens", "4", "-seed", "3")
	g := startGateway(t, GatewayConfig{
		Models: map[string]string{
			"qwen":  staticModel(sim) + "\n\t\t\talias gpt-4o-mini",
			"gemma": staticModel(sim) + "\n\t\t\talias g",
		},
	})
	for _, cred := range credentialKinds {
		t.Run(cred.name, func(t *testing.T) {
			env := append(os.Environ(),
				"LLMEDGE_OPENAI_BASE_URL="+g.Base+"/v1",
				"LLMEDGE_KEY="+cred.get(t, g, "demo"),
				"LLMEDGE_KEY_LIMITED="+cred.get(t, g, "alice"),
				"LLMEDGE_CA_FILE="+g.CAFile(),
				"LLMEDGE_ALIAS=gpt-4o-mini", "LLMEDGE_ALIAS_OTHER=g",
			)
			// The first run compiles the SDK, a few minutes on two cores.
			run(t, 15*time.Minute, goSDKDir, env, "go", "test", "-count=1", "-run", "^TestAlias$", "-v", "./...")
		})
	}
}
