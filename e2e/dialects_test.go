package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"
)

// dialectCase is one replica engine as the simulator imitates it.
type dialectCase struct {
	dialect  string // llmsim -dialect
	protocol string // the model's protocol in the Caddyfile
	// overload is the status the engine answers when overloaded.
	overload int
	// contextMsg is part of the engine's context-length message with a
	// 5-token context; "" for an engine that truncates the prompt instead
	// (Ollama: the answer is a 200 with the 5 tokens it kept).
	contextMsg string
	// endToken is 1 when the engine counts an answer's end token among
	// its completion tokens (Ollama).
	endToken int
}

var dialectCases = []dialectCase{
	{"vllm", "vllm", 503, "maximum context length is 5 tokens", 0},
	{"sglang", "sglang", 503, "longer than the model's context length (5 tokens)", 0},
	{"tgi", "tgi", 429, "must be <= 5", 0},
	{"llamacpp", "llamacpp", 503, "exceeds the available context size", 0},
	{"ollama", "ollama", 503, "", 1},
	{"native", "native", 429, "maximum context length is 5 tokens", 0},
}

// directAnswer asks the simulator the chat question in its own dialect,
// without the gateway, and returns the text and token counts it produces.
func directAnswer(t *testing.T, s *Sim, dialect string) (string, int, int) {
	t.Helper()
	var path string
	body := map[string]any{"messages": chat["messages"], "temperature": 0.3}
	switch dialect {
	case "ollama":
		path, body["stream"] = "/api/chat", false
	case "native":
		path = "/tasks/assistant_inference"
	default:
		path = "/v1/chat/completions"
	}
	b, _ := json.Marshal(body)
	resp, err := http.Post(s.URL+path, "application/json", strings.NewReader(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	var out struct {
		Choices []struct{ Message struct{ Content string } }
		Message struct{ Content string } // ollama
		Content string                   // native
		Usage   struct {
			PromptTokens     int `json:"prompt_tokens"`
			CompletionTokens int `json:"completion_tokens"`
		}
		PromptEvalCount int `json:"prompt_eval_count"`
		EvalCount       int `json:"eval_count"`
	}
	raw := readJSON(t, resp, &out)
	switch {
	case dialect == "ollama":
		return out.Message.Content, out.PromptEvalCount, out.EvalCount
	case dialect == "native":
		return out.Content, out.Usage.PromptTokens, out.Usage.CompletionTokens
	case len(out.Choices) == 1:
		return out.Choices[0].Message.Content, out.Usage.PromptTokens, out.Usage.CompletionTokens
	}
	t.Fatalf("direct answer: %s", raw)
	return "", 0, 0
}

// publicAnswer is a non-streamed answer, or a stream's done event, with
// the raw JSON (to see whether usage_reported is present).
type publicAnswer struct {
	inferenceResponse
	UsageReported *bool `json:"usage_reported"`
	raw           string
}

// ask sends the chat question to model and returns the status, the answer
// (on 200), the deltas and the final event of a stream, and the error
// detail otherwise.
func ask(t *testing.T, g *Gateway, tok, model string, stream bool) (int, publicAnswer, string, Event, string) {
	t.Helper()
	resp := g.Infer(t, tok, withModel(model, "stream", stream))
	var ans publicAnswer
	if resp.StatusCode != 200 {
		var e errorBody
		readJSON(t, resp, &e)
		return resp.StatusCode, ans, "", Event{}, e.detailText()
	}
	if !stream {
		ans.raw = string(readJSON(t, resp, &ans))
		return 200, ans, "", Event{}, ""
	}
	defer resp.Body.Close()
	evs := readEvents(t, resp.Body)
	var text strings.Builder
	var last Event
	for _, ev := range evs {
		if ev.Comment {
			continue
		}
		last = ev
		if ev.Name == "" {
			var d struct{ Content string }
			if err := json.Unmarshal([]byte(ev.Data), &d); err != nil {
				t.Fatalf("delta %q: %v", ev.Data, err)
			}
			text.WriteString(d.Content)
		}
	}
	if last.Name == "done" {
		ans.raw = last.Data
		if err := json.Unmarshal([]byte(last.Data), &ans); err != nil {
			t.Fatal(err)
		}
	}
	return 200, ans, text.String(), last, ""
}

// TestDialectConformance runs every replica dialect through the real
// gateway: non-streamed and streamed answers, usage present and absent,
// a mid-stream error, overload (retried on the other replica) and a
// context-length rejection (422 with the replica's message), or, from
// Ollama, which truncates the prompt, a 200 with the truncated count.
func TestDialectConformance(t *testing.T) {
	needBinaries(t)
	type pair struct{ a, b *Sim }
	sims := map[string]pair{}
	models := map[string]string{}
	for _, dc := range dialectCases {
		args := []string{"-dialect", dc.dialect, "-tokens", "6", "-seed", "3", "-itl", "2ms"}
		p := pair{startSim(t, args...), startSim(t, args...)}
		sims[dc.dialect] = p
		models[dc.dialect] = staticModel(p.a, p.b) + "\n\t\t\tprotocol " + dc.protocol +
			"\n\t\t\tlb_policy round_robin\n\t\t\thealth_interval off"
	}
	models["qwen"] = models["vllm"]
	g := startGateway(t, GatewayConfig{Models: models})
	tok := g.Token(t, "demo", "demo", "")

	for _, dc := range dialectCases {
		t.Run(dc.dialect, func(t *testing.T) {
			t.Parallel()
			p := sims[dc.dialect]
			reset := map[string]any{"no_usage": false, "usage_in_finish": false, "error_after": 0, "error_rate": 0, "max_model_len": 0}
			configure := func(a, b map[string]any) {
				t.Helper()
				p.a.Configure(t, reset)
				p.b.Configure(t, reset)
				if a != nil {
					p.a.Configure(t, a)
				}
				if b != nil {
					p.b.Configure(t, b)
				}
			}
			// 6 tokens of text; Ollama counts its end token too.
			want, prompt, completion := directAnswer(t, p.a, dc.dialect)
			if len(strings.Fields(want)) != 6 || prompt == 0 || completion != 6+dc.endToken {
				t.Fatalf("direct answer %q, usage %d+%d", want, prompt, completion)
			}
			checkUsage := func(t *testing.T, ans publicAnswer, known bool) {
				t.Helper()
				u := ans.Usage
				switch {
				case known && (u.PromptTokens != prompt || u.CompletionTokens != completion || u.TotalTokens != prompt+completion || ans.UsageReported != nil):
					t.Errorf("usage: %s, want %d+%d without usage_reported", ans.raw, prompt, completion)
				case !known && (u.PromptTokens != 0 || u.CompletionTokens != 0 || u.TotalTokens != 0 ||
					ans.UsageReported == nil || *ans.UsageReported || !strings.Contains(ans.raw, `"usage_reported":false`)):
					t.Errorf("unknown usage: %s, want zeros and \"usage_reported\":false", ans.raw)
				}
			}

			rows := []struct {
				name       string
				a, b       map[string]any
				usageKnown bool
			}{
				{"usage present", nil, nil, true},
				{"usage absent", map[string]any{"no_usage": true}, map[string]any{"no_usage": true}, false},
			}
			if dc.dialect != "ollama" && dc.dialect != "native" {
				rows = append(rows, struct {
					name       string
					a, b       map[string]any
					usageKnown bool
				}{"usage in the finishing chunk", map[string]any{"usage_in_finish": true}, map[string]any{"usage_in_finish": true}, true})
			}
			for _, row := range rows {
				configure(row.a, row.b)
				t.Run(row.name+"/non-streamed", func(t *testing.T) {
					status, ans, _, _, detail := ask(t, g, tok, dc.dialect, false)
					if status != 200 || ans.Content != want || ans.ModelType != dc.dialect || ans.MessageCount != 4 {
						t.Fatalf("%d %q %+v, want content %q", status, detail, ans, want)
					}
					checkUsage(t, ans, row.usageKnown)
				})
				t.Run(row.name+"/streamed", func(t *testing.T) {
					status, ans, text, last, detail := ask(t, g, tok, dc.dialect, true)
					if status != 200 || last.Name != "done" || text != want || ans.Content != want {
						t.Fatalf("%d %q: deltas %q, last event %+v, want %q", status, detail, text, last, want)
					}
					checkUsage(t, ans, row.usageKnown)
				})
			}

			t.Run("mid-stream error", func(t *testing.T) {
				configure(map[string]any{"error_after": 2}, map[string]any{"error_after": 2})
				status, ans, text, last, detail := ask(t, g, tok, dc.dialect, true)
				if dc.dialect != "native" {
					// Continued on the other replica from the 2 tokens
					// sent (its fault is at the same token of the answer,
					// behind the continuation): one answer, its usage
					// the unbroken answer's.
					if status != 200 || last.Name != "done" || text != want || ans.Content != want {
						t.Fatalf("%d %q: deltas %q, last event %+v, want %q continued", status, detail, text, last, want)
					}
					checkUsage(t, ans, true)
				} else {
					// Another llmedge cannot be asked to continue: the
					// stream ends with the error.
					if status != 200 || last.Name != "error" || !strings.Contains(last.Data, `"detail"`) {
						t.Fatalf("%d %q: last event %+v", status, detail, last)
					}
					if len(strings.Fields(text)) != 2 || !strings.HasPrefix(want, text) {
						t.Errorf("deltas before the error %q, want the first 2 tokens of %q", text, want)
					}
				}
				// Not streamed, the client has seen nothing: both replicas
				// are tried, then 502.
				if status, _, _, _, detail := ask(t, g, tok, dc.dialect, false); status != 502 {
					t.Errorf("non-streamed: %d %q, want 502", status, detail)
				}
			})

			t.Run("overload", func(t *testing.T) {
				configure(map[string]any{"error_rate": 1, "error_status": dc.overload}, nil)
				before := p.a.Stats(t).Errors
				for i := range 2 { // round robin: one of them starts on the overloaded replica
					status, ans, _, _, detail := ask(t, g, tok, dc.dialect, i == 1)
					if status != 200 || ans.Content != want {
						t.Fatalf("request %d: %d %q %+v", i, status, detail, ans)
					}
				}
				if n := p.a.Stats(t).Errors - before; n < 1 {
					t.Errorf("the overloaded replica answered %d overloads; want the retry path exercised", n)
				}
			})

			t.Run("context length", func(t *testing.T) {
				configure(map[string]any{"max_model_len": 5}, map[string]any{"max_model_len": 5})
				ra, rb := p.a.Stats(t).Requests, p.b.Stats(t).Requests
				for _, stream := range []bool{false, true} {
					status, ans, _, _, detail := ask(t, g, tok, dc.dialect, stream)
					switch {
					case dc.contextMsg == "":
						// As the real Ollama does (TestRealEngineErrors):
						// the prompt is cut to the context, and answered.
						if status != 200 || ans.Content != want || ans.Usage.PromptTokens != 5 || ans.Usage.CompletionTokens != completion {
							t.Errorf("stream=%v: %d %q %s, want 200 with the prompt truncated to 5 tokens", stream, status, detail, ans.raw)
						}
					case status != 422 || !strings.Contains(detail, dc.contextMsg):
						t.Errorf("stream=%v: %d %q, want 422 with %q", stream, status, detail, dc.contextMsg)
					}
				}
				if n := p.a.Stats(t).Requests - ra + p.b.Stats(t).Requests - rb; n != 2 {
					t.Errorf("%d replica requests for 2 requests: neither a rejection nor an answer is retried", n)
				}
			})
			configure(nil, nil)
		})
	}
}

// TestHealthProbingSkipsLoadingReplica: a static replica that is loading
// (llama.cpp: 503 on /health; vLLM: connection refused) gets no requests;
// once ready, it is used again.
func TestHealthProbingSkipsLoadingReplica(t *testing.T) {
	needBinaries(t)
	llamaLoading := startSim(t, "-dialect", "llamacpp", "-tokens", "3")
	llamaReady := startSim(t, "-dialect", "llamacpp", "-tokens", "3")
	vllmLoading := startSim(t, "-loading", "6s", "-tokens", "3") // not listening yet
	vllmReady := startSim(t, "-tokens", "3")
	health := "\n\t\t\tlb_policy round_robin\n\t\t\thealth_interval 100ms\n\t\t\thealth_timeout 1s"
	g := startGateway(t, GatewayConfig{Models: map[string]string{
		"qwen":  staticModel(llamaLoading, llamaReady) + "\n\t\t\tprotocol llamacpp" + health,
		"gemma": staticModel(vllmLoading, vllmReady) + "\n\t\t\tprotocol vllm" + health,
	}})
	tok := g.Token(t, "demo", "demo", "")

	llamaLoading.Configure(t, map[string]any{"loading": "10s"}) // long enough for a loaded machine
	// Two probes after loading began: the gateway has seen at least one.
	probes := llamaLoading.Stats(t).HealthChecks
	waitFor(t, 10*time.Second, func() bool { return llamaLoading.Stats(t).HealthChecks >= probes+2 })
	for i := range 6 {
		if status, _, _, _, detail := ask(t, g, tok, "qwen", i%2 == 1); status != 200 {
			t.Fatalf("request %d while a replica loads: %d %q", i, status, detail)
		}
		if status, _, _, _, detail := ask(t, g, tok, "gemma", false); status != 200 {
			t.Fatalf("gemma request %d while a replica loads: %d %q", i, status, detail)
		}
	}
	if st := llamaLoading.Stats(t); st.Requests != 0 {
		t.Errorf("the loading llama.cpp replica got %d chat requests (%d refused): it should be skipped", st.Requests, st.Rejected)
	}

	for name, s := range map[string]*Sim{"qwen": llamaLoading, "gemma": vllmLoading} {
		// A request every 100 ms until the replica gets one.
		if !pollEvery(20*time.Second, 100*time.Millisecond, func() bool {
			if status, _, _, _, detail := ask(t, g, tok, name, false); status != 200 {
				t.Fatalf("%s: %d %q", name, status, detail)
			}
			st, err := statsOf(s)
			return err == nil && st.Completed > 0
		}) {
			t.Fatalf("%s: the replica was not used again once ready", name)
		}
	}
}

// statsOf reads a simulator's counters, failing softly (it may not listen yet).
func statsOf(s *Sim) (SimStats, error) {
	var st SimStats
	resp, err := http.Get(s.URL + "/sim/stats")
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return st, fmt.Errorf("stats: %s", resp.Status)
	}
	return st, json.NewDecoder(resp.Body).Decode(&st)
}

// TestHealthProbingStopsOnReload: a configuration reload stops the old
// configuration's prober (no goroutine keeps probing), and the new one
// probes as configured.
func TestHealthProbingStopsOnReload(t *testing.T) {
	needBinaries(t)
	sim := startSim(t)
	// The clock's replica is probed every 50 ms before and after the
	// reload: its probes measure the time the test gives the old prober
	// to show itself, in the prober's own time.
	clock := startSim(t)
	qwen := staticModel(sim) + "\n\t\t\thealth_interval 50ms"
	g := startGateway(t, GatewayConfig{Models: map[string]string{
		"qwen":  qwen,
		"gemma": staticModel(sim) + "\n\t\t\thealth_interval off",
		"clock": staticModel(clock) + "\n\t\t\thealth_interval 50ms",
	}})
	probes := func() int { return sim.Stats(t).HealthChecks }
	ticks := func() int { return clock.Stats(t).HealthChecks }
	start := probes()
	waitFor(t, 10*time.Second, func() bool { return probes() >= start+3 })

	conf, err := os.ReadFile(g.conf)
	if err != nil {
		t.Fatal(err)
	}
	off := strings.Replace(string(conf), qwen, strings.Replace(qwen, "50ms", "off", 1), 1)
	if off == string(conf) {
		t.Fatal("qwen's probing not found in the Caddyfile")
	}
	resp, err := http.Post(g.Admin+"/load", "text/caddyfile", strings.NewReader(off))
	if err != nil {
		t.Fatal(err)
	}
	body := readJSONOrText(resp)
	if resp.StatusCode != 200 {
		t.Fatalf("reload: %s %s", resp.Status, body)
	}
	// A probe in flight at the reload may still land: give it 5 ticks
	// (250 ms and more), then watch 20 more (a second and more).
	tick := ticks()
	waitFor(t, 10*time.Second, func() bool { return ticks() >= tick+5 })
	before := probes()
	tick = ticks()
	waitFor(t, 20*time.Second, func() bool { return ticks() >= tick+20 })
	if after := probes(); after != before {
		t.Fatalf("%d probes after the reload turned probing off: the old prober still runs", after-before)
	}
	if status, _, _, _, detail := ask(t, g, g.Token(t, "demo", "demo", ""), "qwen", false); status != 200 {
		t.Fatalf("after reload: %d %q", status, detail)
	}
}

// readJSONOrText reads and closes a response body.
func readJSONOrText(resp *http.Response) string {
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// TestReplicaAPIKeyAndMixedProtocols: the API key reaches a vLLM started
// with --api-key from api_key_env or an {env.*} placeholder, a wrong key is
// the gateway's fault (502), and one model may mix engines with a
// per-replica protocol prefix.
func TestReplicaAPIKeyAndMixedProtocols(t *testing.T) {
	needBinaries(t)
	t.Setenv("LLMEDGE_E2E_VLLM_KEY", "s3cret")
	locked := startSim(t, "-api-key", "s3cret", "-tokens", "3")
	vllm := startSim(t, "-tokens", "3")
	ollama := startSim(t, "-dialect", "ollama", "-tokens", "3")
	g := startGateway(t, GatewayConfig{Models: map[string]string{
		"qwen":     staticModel(locked) + "\n\t\t\tapi_key_env LLMEDGE_E2E_VLLM_KEY",
		"gemma":    staticModel(locked) + "\n\t\t\tapi_key {env.LLMEDGE_E2E_VLLM_KEY}",
		"wrongkey": staticModel(locked) + "\n\t\t\tapi_key nope",
		"mixed":    "\t\t\tstatic " + vllm.URL + " ollama+" + ollama.URL + "\n\t\t\tprotocol vllm\n\t\t\tlb_policy round_robin",
	}})
	tok := g.Token(t, "demo", "demo", "")
	for _, model := range []string{"qwen", "gemma"} {
		if status, ans, _, _, detail := ask(t, g, tok, model, false); status != 200 || len(strings.Fields(ans.Content)) != 3 {
			t.Errorf("%s: %d %q %+v", model, status, detail, ans)
		}
	}
	if status, _, _, _, detail := ask(t, g, tok, "wrongkey", false); status != 502 {
		t.Errorf("wrong key: %d %q, want 502", status, detail)
	}
	for i := range 4 {
		if status, ans, _, _, detail := ask(t, g, tok, "mixed", i%2 == 0); status != 200 || len(strings.Fields(ans.Content)) != 3 {
			t.Fatalf("mixed %d: %d %q %+v", i, status, detail, ans)
		}
	}
	if a, b := vllm.Stats(t).Completed, ollama.Stats(t).Completed; a != 2 || b != 2 {
		t.Errorf("mixed model: vLLM completed %d, Ollama %d; want 2 each", a, b)
	}
}
