package e2e

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"
)

// responsesTranslateFixture is a gateway whose models reach replicas
// without /v1/responses (llmsim -no-responses, as SGLang, TGI or
// llama.cpp's server):
//
//	qwen    responses translate: chat completions from the start
//	detect  responses auto: its replica's 404 on /v1/responses is found
//	        out on the first request, translated from then on
//	pass    responses passthrough: the 404 stands
//	olla    auto, a replica speaking Ollama's /api/chat: translated to
//	        chat completions, which the ollama protocol carries
type responsesTranslateFixture struct {
	g                    *Gateway
	trans, detect, plain *Sim
	tok                  string
}

func startResponsesTranslateFixture(t *testing.T) *responsesTranslateFixture {
	t.Helper()
	f := &responsesTranslateFixture{
		trans:  startSim(t, "-tokens", "8", "-seed", "3", "-no-responses"),
		detect: startSim(t, "-tokens", "8", "-seed", "3", "-no-responses"),
		plain:  startSim(t, "-tokens", "8", "-seed", "3", "-no-responses"),
	}
	olla := startSim(t, "-dialect", "ollama", "-tokens", "5")
	f.g = startGateway(t, GatewayConfig{Models: map[string]string{
		"qwen":   staticModel(f.trans) + "\n\t\t\tresponses translate\n\t\t\tupstream_model Qwen/Qwen3-8B",
		"detect": staticModel(f.detect),
		"pass":   staticModel(f.plain) + "\n\t\t\tresponses passthrough\n\t\t\tbreaker off",
		"olla":   staticModel(olla) + "\n\t\t\tprotocol ollama",
	}})
	f.tok = f.g.Token(t, "demo", "demo", "")
	return f
}

// TestResponsesTranslation: a Responses request for a replica without
// /v1/responses (one of Codex CLI's shape: reasoning, include, store,
// prompt_cache_key, text.verbosity, the web_search tool it offers by
// default) reaches it as chat completions (what it receives is the
// translation, with the gateway's edits), and the answer comes back as a
// response, one JSON object or the API's stream of events; in auto mode
// after the replica's 404, in translate mode at once; in passthrough
// mode the 404 stays a replica's failure; what the translation cannot
// carry is refused, named.
func TestResponsesTranslation(t *testing.T) {
	f := startResponsesTranslateFixture(t)
	g := f.g

	t.Run("translate: one answer", func(t *testing.T) {
		body := `{"model":"qwen","instructions":"Be terse.","input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"Say hello."}]}],` +
			`"max_output_tokens":64,"temperature":0.5,"store":false,"include":["reasoning.encrypted_content"],"prompt_cache_key":"k",` +
			`"reasoning":{"effort":"low","summary":"auto"},"text":{"verbosity":"low"},` +
			`"tools":[{"type":"web_search","external_web_access":false}],"tool_choice":"auto","parallel_tool_calls":false}`
		resp := g.v1(t, "POST", "/v1/responses", f.tok, body)
		var r responseObject
		raw := readJSON(t, resp, &r)
		if resp.StatusCode != 200 {
			t.Fatalf("%s %s", resp.Status, raw)
		}
		if r.Object != "response" || !strings.HasPrefix(r.ID, "resp_") || r.Model != "qwen" || r.Status != "completed" || r.text() == "" ||
			r.Usage == nil || r.Usage.OutputTokens == 0 || r.Usage.TotalTokens != r.Usage.InputTokens+r.Usage.OutputTokens {
			t.Fatalf("answer %s", raw)
		}
		if strings.Contains(string(raw), "Qwen/Qwen3-8B") {
			t.Fatalf("the replica's model name leaked: %s", raw)
		}
		want := `{"model":"Qwen/Qwen3-8B","messages":[{"role":"system","content":"Be terse."},{"role":"user","content":"Say hello."}],` +
			`"max_tokens":64,"temperature":0.5,"reasoning_effort":"low","chat_template_kwargs":{"enable_thinking":true}}`
		if got := lastBody(t, f.trans, "/v1/chat/completions"); got != want {
			t.Fatalf("replica got\n%s\nwant\n%s", got, want)
		}
		if n := len(simRequests(t, f.trans, "/v1/responses")); n != 0 {
			t.Fatalf("%d requests tried /v1/responses", n)
		}
	})

	t.Run("auto: found out, then translated at once", func(t *testing.T) {
		for i := range 2 {
			resp := g.v1(t, "POST", "/v1/responses", f.tok, `{"model":"detect","input":"Say hello."}`)
			var r responseObject
			if raw := readJSON(t, resp, &r); resp.StatusCode != 200 || r.Status != "completed" || r.text() == "" || r.Model != "detect" {
				t.Fatalf("request %d: %s %s", i, resp.Status, raw)
			}
		}
		if tried, chats := len(simRequests(t, f.detect, "/v1/responses")), len(simRequests(t, f.detect, "/v1/chat/completions")); tried != 1 || chats != 2 {
			t.Fatalf("/v1/responses tried %d times, chat completions %d: want 1 and 2", tried, chats)
		}
		// The model sets no upstream_model: the replica gets none.
		if got := lastBody(t, f.detect, "/v1/chat/completions"); got != `{"messages":[{"role":"user","content":"Say hello."}]}` {
			t.Fatalf("replica got %s", got)
		}
	})

	t.Run("passthrough: the 404 stands", func(t *testing.T) {
		// A replica's failure, as before the translation existed (another
		// replica of the model may serve the API); the gateway's log names
		// the option.
		resp := g.v1(t, "POST", "/v1/responses", f.tok, `{"model":"pass","input":"Say hello."}`)
		raw := readJSONOrText(resp)
		if resp.StatusCode != 502 || !strings.Contains(raw, "upstream_error") {
			t.Fatalf("%s %s", resp.Status, raw)
		}
		if n := len(simRequests(t, f.plain, "/v1/responses")); n != 1 {
			t.Fatalf("/v1/responses tried %d times", n)
		}
		if n := len(simRequests(t, f.plain, "/v1/chat/completions")); n != 0 {
			t.Fatalf("passthrough translated %d requests", n)
		}
	})

	t.Run("ollama protocol", func(t *testing.T) {
		resp := g.v1(t, "POST", "/v1/responses", f.tok, `{"model":"olla","instructions":"Be terse.","input":"Say hello."}`)
		var r responseObject
		if raw := readJSON(t, resp, &r); resp.StatusCode != 200 || r.Status != "completed" || r.text() == "" || r.Model != "olla" {
			t.Fatalf("%s %s", resp.Status, raw)
		}
	})

	t.Run("stream with a tool call", func(t *testing.T) {
		body := `{"model":"qwen","input":"Weather in Paris?","stream":true,"tools":[{"type":"function","name":"get_weather",` +
			`"parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}],"parallel_tool_calls":false}`
		resp := g.v1(t, "POST", "/v1/responses", f.tok, body)
		defer resp.Body.Close()
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
			t.Fatalf("%s %v", resp.Status, resp.Header)
		}
		var names []string
		var args string
		var final responseObject
		seq := 0
		for _, ev := range readEvents(t, resp.Body) {
			if ev.Comment {
				continue
			}
			var e struct {
				Type           string          `json:"type"`
				SequenceNumber int             `json:"sequence_number"`
				Delta          string          `json:"delta"`
				Response       json.RawMessage `json:"response"`
			}
			if err := json.Unmarshal([]byte(ev.Data), &e); err != nil || e.Type != ev.Name || e.SequenceNumber != seq {
				t.Fatalf("event %d: %v %s %s", seq, err, ev.Name, ev.Data)
			}
			seq++
			names = append(names, e.Type)
			if e.Type == "response.function_call_arguments.delta" {
				args += e.Delta
			}
			if e.Type == "response.completed" {
				_ = json.Unmarshal(e.Response, &final)
			}
		}
		want := "response.created response.in_progress response.output_item.added"
		if got := strings.Join(names, " "); !strings.HasPrefix(got, want) || !strings.HasSuffix(got,
			"response.function_call_arguments.done response.output_item.done response.completed") {
			t.Fatalf("events %s", got)
		}
		var params map[string]any
		if err := json.Unmarshal([]byte(args), &params); err != nil || final.Status != "completed" || final.Usage == nil {
			t.Fatalf("arguments %q (%v), final %+v", args, err, final)
		}
		got := lastBody(t, f.trans, "/v1/chat/completions")
		if !strings.Contains(got, `"tools":[{"type":"function","function":{"name":"get_weather","parameters":`) ||
			!strings.Contains(got, `"stream":true`) || !strings.Contains(got, `"stream_options":{"include_usage":true}`) {
			t.Fatalf("replica got %s", got)
		}
	})

	t.Run("refusals name the member", func(t *testing.T) {
		for _, tc := range []struct{ model, body, param string }{
			{"qwen", `{"model":"qwen","input":"hi","tools":[{"type":"file_search","vector_store_ids":["v"]}]}`, "tools[0].type"},
			{"detect", `{"model":"detect","input":"hi","tools":[{"type":"file_search","vector_store_ids":["v"]}]}`, "tools[0].type"},
			{"qwen", `{"model":"qwen","input":[{"type":"custom_tool_call","call_id":"c","name":"apply_patch","input":"x"}]}`, "input[0].type"},
			{"qwen", `{"model":"qwen","input":"hi","truncation":"auto"}`, "truncation"},
		} {
			resp := g.v1(t, "POST", "/v1/responses", f.tok, tc.body)
			var e struct {
				Error struct{ Message, Type, Param, Code string } `json:"error"`
			}
			raw := readJSON(t, resp, &e)
			if resp.StatusCode != 400 || e.Error.Param != tc.param || e.Error.Code != "unsupported_parameter" || e.Error.Type != "invalid_request_error" {
				t.Fatalf("%s: %s %s", tc.body, resp.Status, raw)
			}
		}
	})
}

// TestResponsesTranslationSDK runs OpenAI's official SDKs' Responses API
// against models translated to chat completions (the fixture's qwen,
// translate, and detect, auto): the npm package (sdk/node,
// responses_translate.test.mjs: one answer, the stream helper, a
// two-turn function call) and the Go module (sdk/go,
// TestResponsesTranslated).
func TestResponsesTranslationSDK(t *testing.T) {
	node, npm := lookPath(t, "node"), lookPath(t, "npm")
	f := startResponsesTranslateFixture(t)
	env := append(os.Environ(),
		"LLMEDGE_OPENAI_BASE_URL="+f.g.Base+"/v1",
		"LLMEDGE_KEY="+f.tok,
		"LLMEDGE_KEY_LIMITED="+f.tok,
		"LLMEDGE_RESPONSES_MODELS=qwen,detect",
		"LLMEDGE_CA_FILE="+f.g.CAFile(),
		"NODE_EXTRA_CA_CERTS="+f.g.CAFile(),
	)
	t.Run("node", func(t *testing.T) {
		installNodeSDK(t, npm)
		run(t, 5*time.Minute, nodeSDKDir, env, node, "--test", "--test-reporter=spec", "responses_translate.test.mjs")
	})
	t.Run("go", func(t *testing.T) {
		run(t, 15*time.Minute, goSDKDir, env, "go", "test", "-count=1", "-v", "-run", "TestResponsesTranslated", "./...")
	})
}
