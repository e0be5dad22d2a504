package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// guestModules are the modules of examples/guest-modules, one of each
// kind llmedge resolves when its configuration loads.
var guestModules = []string{
	"llmedge.admitters.prompt_cap",
	"llmedge.authenticators.shared_secret",
	"llmedge.dialects.aphrodite",
	"llmedge.doors.plain",
	"llmedge.policies.least_kv",
	"llmedge.protocols.lmstudio",
	"llmedge.sources.file",
}

// TestXcaddyBuildWithGuestModules builds the gateway with xcaddy, as an
// operator would, together with a third party's module that adds one
// guest module of every kind (examples/guest-modules: its own Go module,
// no change to llmedge). The binary has exactly cmd/llmedge's llmedge
// modules plus those seven, and one gateway process, loaded from a
// Caddyfile that uses all seven, serves over HTTPS in front of simulator
// processes: each module is shown at work as a client or an operator
// sees it. It takes minutes, so it runs only with LLMEDGE_TEST_XCADDY=1
// (CI sets it).
func TestXcaddyBuildWithGuestModules(t *testing.T) {
	needBinaries(t)
	if os.Getenv("LLMEDGE_TEST_XCADDY") != "1" {
		t.Skip("set LLMEDGE_TEST_XCADDY=1 to build with xcaddy")
	}
	// The example's manifest builds llmedge exactly as the product's does.
	product, example := manifestModules(t, "../xcaddy.json"), manifestModules(t, "../examples/guest-modules/xcaddy.json")
	if len(product) != 1 || len(example) != 2 || !slices.Contains(example, product[0]) {
		t.Fatalf("examples/guest-modules/xcaddy.json builds llmedge differently from xcaddy.json: %v vs %v", example, product)
	}
	out := filepath.Join(t.TempDir(), "llmedge-xcaddy")
	build := exec.Command("go", "run", ".", "-manifest", "../../examples/guest-modules/xcaddy.json", "-output", out)
	build.Dir = "../tools/xcaddy"
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("xcaddy build: %v\n%s", err, lastLines(string(b), 30))
	}
	want := llmModules(t, filepath.Join(binDir, "llmedge"))
	got := llmModules(t, out)
	if len(want) < 20 {
		t.Fatalf("go build has %v", want)
	}
	for _, m := range guestModules {
		if !slices.Contains(got, m) {
			t.Errorf("xcaddy build lacks %s", m)
		}
	}
	rest := slices.DeleteFunc(slices.Clone(got), func(m string) bool { return slices.Contains(guestModules, m) })
	if strings.Join(rest, ",") != strings.Join(want, ",") {
		t.Fatalf("xcaddy build has %v, go build has %v", got, want)
	}

	// The replicas. The file source's list starts with e; f replaces it.
	a, b := startSim(t, "-tokens", "3"), startSim(t, "-tokens", "3")
	gemma := startSim(t, "-tokens", "3")
	studio := startSim(t, "-tokens", "3")
	// Its /health fails: a protocol that probed /health would take it out.
	studio.Configure(t, map[string]any{"health_status": 503})
	// Its /v1/* (GET /v1/models included) wants the key; /health does not.
	locked := startSim(t, "-tokens", "3", "-api-key", "sim-key-0123")
	e, f := startSim(t, "-tokens", "3"), startSim(t, "-tokens", "3")
	replicaFile := filepath.Join(t.TempDir(), "filed.replicas")
	if err := os.WriteFile(replicaFile, []byte("# filed's replicas\n\n"+e.URL+"   # the first one\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	aphro := startAphroditeStub(t)

	const secret = "ci-secret-0123456789abcdef"
	g := startGateway(t, GatewayConfig{
		Binary: out,
		Options: `
		authenticator shared_secret {
			secret ` + secret + ` ci-bot gemma
		}
		authenticator bearer
		admitter prompt_cap {
			max_prompt_tokens 200
		}
		admitter limits`,
		Models: map[string]string{
			"qwen":  staticModel(a, b) + "\n\t\t\tprotocol vllm\n\t\t\tlb_policy least_kv {\n\t\t\t\theadroom 0.1\n\t\t\t}",
			"gemma": staticModel(gemma),
			"studio": staticModel(studio) + `
			protocol lmstudio
			health_interval 200ms`,
			"studio_locked": staticModel(locked) + `
			protocol lmstudio
			api_key sim-key-0123
			health_interval 200ms`,
			"studio_custom": staticModel(locked) + `
			protocol lmstudio {
				health_path /health
			}
			api_key sim-key-0123
			health_interval 200ms`,
			"filed": `
			source file ` + replicaFile + ` {
				refresh 200ms
			}`,
			// The Caddyfile names a built-in dialect here: see the
			// dialect's part below.
			"aphro": "\t\t\tstatic " + aphro.URL + `
			protocol vllm
			load_metrics {
				interval 200ms
				dialect vllm
			}`,
		},
		Site: "llm_gateway {\n\t\tdoors native openai plain\n\t}",
	})
	tok := g.Token(t, "demo", "demo", "")
	bearer := http.Header{"Authorization": {"Bearer " + tok}}
	native := func(model, content string) string {
		b, _ := json.Marshal(map[string]any{"model_type": model,
			"messages": []map[string]string{{"role": "user", "content": content}}})
		return string(b)
	}
	jsonBody := http.Header{"Content-Type": {"application/json"}}
	textBody := http.Header{"Content-Type": {"text/plain; charset=utf-8"}}
	const nativePath, openaiPath, plainPath = "/tasks/assistant_inference", "/v1/chat/completions", "/plain/chat"

	t.Run("policy least_kv routes", func(t *testing.T) {
		for range 4 {
			if r := g.infer(t.Context(), nil, tok, withModel("qwen")); r.ok(false) != nil {
				t.Fatalf("routing with the third-party policy: %v", r.ok(false))
			}
		}
		m := g.scrape(t)
		if v := metricValue(t, m, `llmedge_routing_decisions_total{model_type="qwen",reason="least_kv"}`); v != 4 {
			t.Fatalf("decisions by least_kv: %v", v)
		}
	})

	t.Run("protocol lmstudio probes its own health path", func(t *testing.T) {
		// GET /v1/models without the replica's key is refused (401): the
		// default probe takes studio_locked's replica out, while
		// studio_custom's probe of /health keeps the same process in.
		waitFor(t, 10*time.Second, func() bool {
			st := guestStatus(t, g)
			return len(st.replicas("studio_locked")) == 1 && !st.replicas("studio_locked")[0].Healthy
		})
		st := guestStatus(t, g)
		for _, m := range []string{"studio", "studio_custom"} {
			if r := st.replicas(m); len(r) != 1 || !r[0].Healthy {
				t.Errorf("%s: replicas %+v, want one healthy", m, r)
			}
		}
		for _, m := range []string{"studio", "studio_custom"} {
			if code, _, body := guestDo(t, g, nativePath, guestHeaders(bearer, jsonBody), native(m, "Say hello.")); code != 200 {
				t.Errorf("%s: %d %s", m, code, body)
			}
		}
		if code, _, body := guestDo(t, g, nativePath, guestHeaders(bearer, jsonBody), native("studio_locked", "Say hello.")); code != 503 {
			t.Errorf("studio_locked, its replica failing GET /v1/models: %d %s, want 503", code, body)
		}
		// studio answers chats and was never asked for /health, which
		// fails; the locked simulator's /health is studio_custom's.
		if s := studio.Stats(t); s.HealthChecks != 0 || s.Completed != 1 {
			t.Errorf("studio replica: %d health checks, %d chats; want 0 and 1", s.HealthChecks, s.Completed)
		}
		if s := locked.Stats(t); s.HealthChecks == 0 || s.Completed != 1 {
			t.Errorf("locked replica: %d health checks, %d chats; want some and 1", s.HealthChecks, s.Completed)
		}
	})

	t.Run("source file", func(t *testing.T) {
		if code, _, body := guestDo(t, g, nativePath, guestHeaders(bearer, jsonBody), native("filed", "Say hello.")); code != 200 {
			t.Fatalf("filed: %d %s", code, body)
		}
		if s := e.Stats(t); s.Completed != 1 {
			t.Fatalf("the file's replica answered %d chats, want 1", s.Completed)
		}
		st := guestStatus(t, g)
		if m := st.model("filed"); m == nil || m.Source != "file" || len(m.Replicas) != 1 || m.Replicas[0].URL != e.URL {
			t.Fatalf("filed's status: %+v", m)
		}
		// The file changes: the replica set follows, with no reload.
		if err := os.WriteFile(replicaFile, []byte(f.URL+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 10*time.Second, func() bool {
			r := guestStatus(t, g).replicas("filed")
			return len(r) == 1 && r[0].URL == f.URL
		})
		if code, _, body := guestDo(t, g, nativePath, guestHeaders(bearer, jsonBody), native("filed", "Say hello.")); code != 200 {
			t.Fatalf("filed after the change: %d %s", code, body)
		}
		if se, sf := e.Stats(t), f.Stats(t); se.Completed != 1 || sf.Completed != 1 {
			t.Fatalf("after the change: e answered %d, f %d; want 1 and 1", se.Completed, sf.Completed)
		}
	})

	t.Run("door plain", func(t *testing.T) {
		const prompt = "Say hello in plain text."
		code, _, nb := guestDo(t, g, nativePath, guestHeaders(bearer, jsonBody), native("gemma", prompt))
		var answer struct{ Content string }
		if code != 200 || json.Unmarshal([]byte(nb), &answer) != nil || answer.Content == "" {
			t.Fatalf("native: %d %s", code, nb)
		}
		// The same question through the plain door: the same answer, as text.
		code, h, body := guestDo(t, g, plainPath+"?model=gemma", guestHeaders(bearer, textBody), prompt)
		if code != 200 || h.Get("Content-Type") != "text/plain; charset=utf-8" || body != answer.Content+"\n" {
			t.Errorf("plain: %d %q %q, want 200 text/plain %q", code, h.Get("Content-Type"), body, answer.Content+"\n")
		}
		if h.Get("Content-Length") == "" || h.Get("X-Accel-Buffering") != "" {
			t.Errorf("plain: headers %v, want a whole answer", h)
		}
		// Streamed: the pipeline's stream (no length, unbuffered), as text.
		code, h, body = guestDo(t, g, plainPath+"?model=gemma&stream=1", guestHeaders(bearer, textBody), prompt)
		if code != 200 || h.Get("Content-Type") != "text/plain; charset=utf-8" || body != answer.Content+"\n" {
			t.Errorf("plain stream: %d %q %q, want 200 text/plain %q", code, h.Get("Content-Type"), body, answer.Content+"\n")
		}
		if h.Get("Content-Length") != "" || h.Get("X-Accel-Buffering") != "no" {
			t.Errorf("plain stream: headers %v, want a stream", h)
		}
		// Errors, as text.
		for _, c := range []struct {
			name, path string
			header     http.Header
			body       string
			status     int
			text       string
		}{
			{"unknown model", plainPath + "?model=nope", guestHeaders(bearer, textBody), prompt, 404, `model "nope" is not served here`},
			{"no credential", plainPath, textBody, prompt, 401, "Not authenticated"},
			{"JSON body", plainPath, guestHeaders(bearer, jsonBody), `{"prompt":"hi"}`, 415, "Content-Type must be text/plain"},
			{"empty prompt", plainPath, guestHeaders(bearer, textBody), "  \n", 400, "the prompt is empty"},
		} {
			code, h, body := guestDo(t, g, c.path, c.header, c.body)
			if code != c.status || h.Get("Content-Type") != "text/plain; charset=utf-8" ||
				!strings.Contains(body, c.text) || !strings.HasSuffix(body, "\n") {
				t.Errorf("%s: %d %q %q, want %d text/plain with %q", c.name, code, h.Get("Content-Type"), body, c.status, c.text)
			}
		}
	})

	t.Run("authenticator shared_secret beside bearer", func(t *testing.T) {
		token := http.Header{"X-Gateway-Token": {secret}}
		if code, _, body := guestDo(t, g, nativePath, guestHeaders(token, jsonBody), native("gemma", "Say hello.")); code != 200 {
			t.Errorf("with the secret: %d %s", code, body)
		}
		if code, _, body := guestDo(t, g, plainPath+"?model=gemma", guestHeaders(token, textBody), "Say hello."); code != 200 {
			t.Errorf("with the secret, through the plain door: %d %s", code, body)
		}
		// Its user's models are its scopes.
		if code, _, body := guestDo(t, g, nativePath, guestHeaders(token, jsonBody), native("qwen", "Say hello.")); code != 403 {
			t.Errorf("with the secret, a model it may not use: %d %s, want 403", code, body)
		}
		// A wrong value is refused at once, even beside a good token.
		wrong := http.Header{"X-Gateway-Token": {"ci-secret-0123456789abcdeX"}}
		for _, h := range []http.Header{guestHeaders(wrong, jsonBody), guestHeaders(wrong, bearer, jsonBody)} {
			code, hdr, body := guestDo(t, g, nativePath, h, native("gemma", "Say hello."))
			if code != 401 || !strings.Contains(hdr.Get("WWW-Authenticate"), `error="invalid_token"`) ||
				!strings.Contains(body, "Could not validate credentials") {
				t.Errorf("wrong secret: %d %q %s, want 401 invalid_token", code, hdr.Get("WWW-Authenticate"), body)
			}
		}
		// Without the header, bearer (next in the chain) decides.
		if code, _, body := guestDo(t, g, nativePath, guestHeaders(bearer, jsonBody), native("gemma", "Say hello.")); code != 200 {
			t.Errorf("bearer: %d %s", code, body)
		}
		code, hdr, body := guestDo(t, g, nativePath, jsonBody, native("gemma", "Say hello."))
		if code != 401 || hdr.Get("WWW-Authenticate") != `Bearer realm="llmedge"` || !strings.Contains(body, "Not authenticated") {
			t.Errorf("no credential: %d %q %s", code, hdr.Get("WWW-Authenticate"), body)
		}
	})

	t.Run("admitter prompt_cap", func(t *testing.T) {
		long := strings.Repeat("lorem ipsum dolor ", 60) // 1080 bytes: about 370 tokens by the estimate
		before := gemma.Stats(t).Requests
		code, _, body := guestDo(t, g, nativePath, guestHeaders(bearer, jsonBody), native("gemma", long))
		var nativeErr struct{ Detail string }
		if code != 413 || json.Unmarshal([]byte(body), &nativeErr) != nil ||
			!strings.Contains(nativeErr.Detail, "the cap is 200 prompt tokens") || !strings.Contains(nativeErr.Detail, "'gemma'") {
			t.Errorf("native door, long prompt: %d %s, want 413 naming the cap", code, body)
		}
		openai := func(content string) string {
			b, _ := json.Marshal(map[string]any{"model": "gemma",
				"messages": []map[string]string{{"role": "user", "content": content}}})
			return string(b)
		}
		code, _, body = guestDo(t, g, openaiPath, guestHeaders(bearer, jsonBody), openai(long))
		var oe openAIError
		if code != 413 || json.Unmarshal([]byte(body), &oe) != nil || oe.Error == nil ||
			!strings.Contains(oe.Error.Message, "the cap is 200 prompt tokens") || oe.Error.Type != "invalid_request_error" ||
			str(oe.Error.Code) != "prompt_too_long" || str(oe.Error.Param) != "messages" {
			t.Errorf("openai door, long prompt: %d %s, want 413 in OpenAI's error shape", code, body)
		}
		code, h, body := guestDo(t, g, plainPath+"?model=gemma", guestHeaders(bearer, textBody), long)
		if code != 413 || h.Get("Content-Type") != "text/plain; charset=utf-8" || !strings.Contains(body, "the cap is 200 prompt tokens") {
			t.Errorf("plain door, long prompt: %d %s", code, body)
		}
		if n := gemma.Stats(t).Requests; n != before {
			t.Errorf("the replica saw %d refused prompts", n-before)
		}
		// A prompt within the cap goes through both doors.
		if code, _, body := guestDo(t, g, nativePath, guestHeaders(bearer, jsonBody), native("gemma", "Say hello.")); code != 200 {
			t.Errorf("native door, short prompt: %d %s", code, body)
		}
		if code, _, body := guestDo(t, g, openaiPath, guestHeaders(bearer, jsonBody), openai("Say hello.")); code != 200 {
			t.Errorf("openai door, short prompt: %d %s", code, body)
		}
	})

	// Last, as it loads a new configuration: the running configuration,
	// as the admin API returns it, with aphro's dialect changed from the
	// built-in vllm to the guest aphrodite and loaded back, so the same
	// replica is read both ways and the other guests survive a reload.
	t.Run("dialect aphrodite", func(t *testing.T) {
		// Read as vLLM's, the stub's figures are unusable: no engine load.
		waitFor(t, 10*time.Second, func() bool { return aphro.scrapes.Load() >= 2 })
		if r := guestStatus(t, g).replicas("aphro"); len(r) != 1 || r[0].Engine != nil {
			t.Fatalf("aphro read as vllm: %+v", r)
		}
		resp, err := http.Get(g.Admin + "/config/")
		if err != nil {
			t.Fatal(err)
		}
		var cfg map[string]any
		readJSON(t, resp, &cfg)
		models := cfg["apps"].(map[string]any)["llmedge"].(map[string]any)["models"].([]any)
		found := false
		for _, m := range models {
			if m := m.(map[string]any); m["name"] == "aphro" {
				m["load_metrics"].(map[string]any)["dialect"] = "aphrodite"
				found = true
			}
		}
		if !found {
			t.Fatalf("no model aphro in %v", models)
		}
		j, _ := json.Marshal(cfg)
		resp, err = http.Post(g.Admin+"/load", "application/json", bytes.NewReader(j))
		if err != nil {
			t.Fatal(err)
		}
		if b := readJSONOrText(resp); resp.StatusCode != 200 {
			t.Fatalf("loading aphro with dialect aphrodite: %s %s", resp.Status, b)
		}
		var eng *guestEngine
		waitFor(t, 10*time.Second, func() bool {
			r := guestStatus(t, g).replicas("aphro")
			if len(r) == 1 {
				eng = r[0].Engine
			}
			return eng != nil
		})
		if eng.Running != 3 || eng.Waiting != 2 || eng.KVCacheUsage == nil || *eng.KVCacheUsage != 0.25 {
			t.Errorf("aphro's engine load read as aphrodite: %+v (kv %v), want 3 running, 2 waiting, kv 0.25", eng, eng.KVCacheUsage)
		}
		// The other guests survived the reload.
		if code, _, body := guestDo(t, g, plainPath+"?model=gemma", guestHeaders(http.Header{"X-Gateway-Token": {secret}}, textBody), "Say hello."); code != 200 {
			t.Errorf("after the reload: %d %s", code, body)
		}
	})
}

// aphroditeStub is a replica that serves Aphrodite Engine's metric names,
// which no simulator imitates, and answers its health probe.
type aphroditeStub struct {
	URL     string
	scrapes atomic.Int64
}

func startAphroditeStub(t *testing.T) *aphroditeStub {
	t.Helper()
	s := &aphroditeStub{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/health":
			w.WriteHeader(http.StatusOK)
		case "/metrics":
			s.scrapes.Add(1)
			w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
			fmt.Fprint(w, `# HELP aphrodite:num_requests_running Number of requests in model execution batches.
# TYPE aphrodite:num_requests_running gauge
aphrodite:num_requests_running{engine="0",model_name="aphro"} 3.0
# HELP aphrodite:num_requests_waiting Number of requests waiting to be processed.
# TYPE aphrodite:num_requests_waiting gauge
aphrodite:num_requests_waiting{engine="0",model_name="aphro"} 2.0
# HELP aphrodite:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.
# TYPE aphrodite:kv_cache_usage_perc gauge
aphrodite:kv_cache_usage_perc{engine="0",model_name="aphro"} 0.25
`)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	s.URL = srv.URL
	return s
}

// guestDo sends a POST to the gateway's path with header and body, and
// returns what came back.
func guestDo(t *testing.T, g *Gateway, path string, header http.Header, body string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, g.Base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = header.Clone()
	resp, err := g.Client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, string(b)
}

// guestHeaders is the union of headers.
func guestHeaders(hs ...http.Header) http.Header {
	out := http.Header{}
	for _, h := range hs {
		for k, v := range h {
			out[k] = append(out[k], v...)
		}
	}
	return out
}

// guestSnapshot is the part of the status snapshot the test reads.
type guestSnapshot struct {
	Models []guestModel `json:"models"`
}

type guestModel struct {
	Name     string         `json:"name"`
	Source   string         `json:"source"`
	Replicas []guestReplica `json:"replicas"`
}

type guestReplica struct {
	URL     string       `json:"url"`
	Healthy bool         `json:"healthy"`
	Engine  *guestEngine `json:"engine"`
}

type guestEngine struct {
	Running      float64  `json:"running"`
	Waiting      float64  `json:"waiting"`
	KVCacheUsage *float64 `json:"kv_cache_usage"`
}

// guestStatus reads the status snapshot from the admin endpoint.
func guestStatus(t *testing.T, g *Gateway) guestSnapshot {
	t.Helper()
	resp, err := http.Get(g.Admin + "/llmedge/status.json")
	if err != nil {
		t.Fatal(err)
	}
	var s guestSnapshot
	readJSON(t, resp, &s)
	return s
}

func (s guestSnapshot) model(name string) *guestModel {
	for i := range s.Models {
		if s.Models[i].Name == name {
			return &s.Models[i]
		}
	}
	return nil
}

func (s guestSnapshot) replicas(name string) []guestReplica {
	if m := s.model(name); m != nil {
		return m.Replicas
	}
	return nil
}

func manifestModules(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Modules []struct{ Module, Version string }
	}
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, mod := range m.Modules {
		out = append(out, mod.Module+"@"+mod.Version)
	}
	return out
}

func llmModules(t *testing.T, bin string) []string {
	t.Helper()
	b, err := exec.Command(bin, "list-modules").Output()
	if err != nil {
		t.Fatal(err)
	}
	var mods []string
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "llmedge") || strings.Contains(line, ".llm_") {
			mods = append(mods, strings.TrimSpace(line))
		}
	}
	return mods
}
