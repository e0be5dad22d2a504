package e2e

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/llmedge/llmedge/internal/ollamatest"
)

// capturedRequest is one request a simulator received (GET /sim/requests).
type capturedRequest struct {
	Path string `json:"path"`
	Body []byte `json:"body"`
}

// simRequests returns the requests sim received on path, oldest first.
func simRequests(t *testing.T, sim *Sim, path string) []capturedRequest {
	t.Helper()
	resp, err := http.Get(sim.URL + "/sim/requests?path=" + path)
	if err != nil {
		t.Fatal(err)
	}
	var list struct {
		Requests []capturedRequest `json:"requests"`
	}
	readJSON(t, resp, &list)
	return list.Requests
}

// lastBody is the body of the last request sim received on path.
func lastBody(t *testing.T, sim *Sim, path string) string {
	t.Helper()
	reqs := simRequests(t, sim, path)
	if len(reqs) == 0 {
		t.Fatalf("%s received nothing", path)
	}
	return string(reqs[len(reqs)-1].Body)
}

// responseObject is what the tests read of a Responses API response.
type responseObject struct {
	ID                string `json:"id"`
	Object            string `json:"object"`
	Model             string `json:"model"`
	Status            string `json:"status"`
	IncompleteDetails *struct {
		Reason string `json:"reason"`
	} `json:"incomplete_details"`
	Output []struct {
		Type    string `json:"type"`
		Role    string `json:"role"`
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
	} `json:"output"`
	Usage *struct {
		InputTokens  int `json:"input_tokens"`
		OutputTokens int `json:"output_tokens"`
		TotalTokens  int `json:"total_tokens"`
	} `json:"usage"`
}

// text is the response's output text.
func (r *responseObject) text() string {
	var b strings.Builder
	for _, o := range r.Output {
		for _, c := range o.Content {
			if c.Type == "output_text" {
				b.WriteString(c.Text)
			}
		}
	}
	return b.String()
}

// TestResponsesAPI: POST /v1/responses is carried through to replicas
// that serve it, byte for byte but for the documented edits (the model's
// name, its reply cap, its default instructions, store: false), and their
// answers and named events come back as they wrote them, with the
// gateway's model name; what needs a response store is refused.
func TestResponsesAPI(t *testing.T) {
	capped := startSim(t, "-tokens", "6", "-seed", "3")
	plain := startSim(t, "-tokens", "6", "-seed", "4")
	always := startSim(t, "-tokens", "4", "-seed", "5")
	ollama := startSim(t, "-dialect", "ollama", "-tokens", "3")
	g := startGateway(t, GatewayConfig{Models: map[string]string{
		"qwen":   staticModel(capped) + "\n\t\t\tupstream_model Qwen/Qwen2.5-7B\n\t\t\tmax_tokens 5\n\t\t\tsystem_message \"Be kind.\"",
		"gemma":  staticModel(plain),
		"always": staticModel(always) + "\n\t\t\tstream_upstream always\n\t\t\tupstream_model up-always",
		// Passthrough: the ollama protocol has no Responses API to carry
		// it to (auto translates it: TestResponsesTranslation).
		"llama": "\t\t\tstatic " + ollama.URL + "\n\t\t\tprotocol ollama\n\t\t\tresponses passthrough",
	}})
	tok := g.Token(t, "demo", "demo", "")

	t.Run("one answer, edits", func(t *testing.T) {
		body := `{"model":"qwen","input":[{"role":"user","content":[{"type":"input_text","text":"Say hello."}]}],` +
			`"temperature":0.5,"text":{"format":{"type":"text"}},"metadata":{"k":"v"},"max_output_tokens":100,"truncation":"disabled"}`
		resp := g.v1(t, "POST", "/v1/responses", tok, body)
		var r responseObject
		raw := readJSON(t, resp, &r)
		if resp.StatusCode != 200 {
			t.Fatalf("%s %s", resp.Status, raw)
		}
		want := `{"model":"Qwen/Qwen2.5-7B","input":[{"role":"user","content":[{"type":"input_text","text":"Say hello."}]}],` +
			`"temperature":0.5,"text":{"format":{"type":"text"}},"metadata":{"k":"v"},"max_output_tokens":5,"truncation":"disabled","instructions":"Be kind.","store":false}`
		if got := lastBody(t, capped, "/v1/responses"); got != want {
			t.Fatalf("replica got\n%s\nwant\n%s", got, want)
		}
		if r.Object != "response" || r.Model != "qwen" || r.Status != "incomplete" || r.IncompleteDetails == nil ||
			r.IncompleteDetails.Reason != "max_output_tokens" || r.text() == "" || r.Usage == nil || r.Usage.OutputTokens != 5 ||
			resp.Header.Get("X-Request-ID") == "" || !strings.Contains(resp.Header.Get("Server-Timing"), "upstream") {
			t.Fatalf("answer %s", raw)
		}
		if strings.Contains(string(raw), "Qwen/Qwen2.5-7B") {
			t.Fatalf("the replica's model name leaked: %s", raw)
		}
	})

	t.Run("stream", func(t *testing.T) {
		body := `{"model":"gemma","input":"Say hello.","stream":true,"instructions":"Be brief."}`
		resp := g.v1(t, "POST", "/v1/responses", tok, body)
		defer resp.Body.Close()
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
			t.Fatalf("%s %v", resp.Status, resp.Header)
		}
		evs := readEvents(t, resp.Body)
		if got := lastBody(t, plain, "/v1/responses"); got != `{"input":"Say hello.","stream":true,"instructions":"Be brief.","store":false}` {
			t.Fatalf("replica got %s", got)
		}
		var names []string
		var text strings.Builder
		var final responseObject
		for _, ev := range evs {
			if ev.Comment {
				continue
			}
			var e struct {
				Type     string          `json:"type"`
				Seq      *int            `json:"sequence_number"`
				Delta    string          `json:"delta"`
				Response json.RawMessage `json:"response"`
			}
			if err := json.Unmarshal([]byte(ev.Data), &e); err != nil {
				t.Fatalf("%v: %s", err, ev.Data)
			}
			if e.Type != ev.Name || e.Seq == nil || *e.Seq != len(names) {
				t.Fatalf("event %q: %s", ev.Name, ev.Data)
			}
			names = append(names, ev.Name)
			if e.Type == "response.output_text.delta" {
				text.WriteString(e.Delta)
			}
			if e.Response != nil {
				if err := json.Unmarshal(e.Response, &final); err != nil || final.Model != "gemma" {
					t.Fatalf("response %s", e.Response)
				}
			}
		}
		order := strings.Join(names, " ")
		const head = "response.created response.in_progress response.output_item.added response.content_part.added response.output_text.delta"
		const tail = "response.output_text.delta response.output_text.done response.content_part.done response.output_item.done response.completed"
		if !strings.HasPrefix(order, head) || !strings.HasSuffix(order, tail) || strings.Count(order, "output_text.delta") != 6 {
			t.Fatalf("events %s", order)
		}
		if final.Status != "completed" || final.text() != text.String() || final.Usage == nil || final.Usage.OutputTokens != 6 {
			t.Fatalf("final %+v, text %q", final, text.String())
		}
	})

	t.Run("streamed upstream, one answer", func(t *testing.T) {
		resp := g.v1(t, "POST", "/v1/responses", tok, `{"model":"always","input":"Hi"}`)
		var r responseObject
		raw := readJSON(t, resp, &r)
		if got := lastBody(t, always, "/v1/responses"); got != `{"model":"up-always","input":"Hi","stream":true,"store":false}` {
			t.Fatalf("replica got %s", got)
		}
		if resp.StatusCode != 200 || r.Object != "response" || r.Model != "always" || r.Status != "completed" || r.text() == "" || r.Usage.OutputTokens != 4 {
			t.Fatalf("%s %s", resp.Status, raw)
		}
	})

	t.Run("stateful features refused", func(t *testing.T) {
		before := len(simRequests(t, plain, "/v1/responses"))
		for _, tc := range []struct{ member, body string }{
			{"previous_response_id", `"previous_response_id":"resp_123"`},
			{"store", `"store":true`},
			{"background", `"background":true`},
			{"conversation", `"conversation":{"id":"conv_1"}`},
			{"input[0].type", `"input":[{"type":"item_reference","id":"msg_1"}]`},
		} {
			body := `{"model":"gemma","input":"Hi",` + tc.body + `}`
			if strings.HasPrefix(tc.body, `"input"`) {
				body = `{"model":"gemma",` + tc.body + `}`
			}
			resp := g.v1(t, "POST", "/v1/responses", tok, body)
			var e openAIError
			raw := readJSON(t, resp, &e)
			if resp.StatusCode != 400 || e.Error == nil || str(e.Error.Param) != tc.member || str(e.Error.Code) != "unsupported_parameter" ||
				e.Error.Type != "invalid_request_error" || !strings.Contains(e.Error.Message, "store: false") {
				t.Fatalf("%s: %s %s", tc.member, resp.Status, raw)
			}
		}
		if after := len(simRequests(t, plain, "/v1/responses")); after != before {
			t.Fatalf("a refused request reached the replica (%d, then %d)", before, after)
		}
		resp := g.v1(t, "GET", "/v1/responses/resp_123", tok, "")
		var e openAIError
		raw := readJSON(t, resp, &e)
		if resp.StatusCode != 404 || e.Error == nil || !strings.Contains(e.Error.Message, "stores no responses") {
			t.Fatalf("%s %s", resp.Status, raw)
		}
	})

	t.Run("a protocol that cannot carry it, passthrough", func(t *testing.T) {
		resp := g.v1(t, "POST", "/v1/responses", tok, `{"model":"llama","input":"Hi"}`)
		var e openAIError
		raw := readJSON(t, resp, &e)
		if resp.StatusCode != 400 || e.Error == nil || !strings.Contains(e.Error.Message, "ollama protocol") ||
			!strings.Contains(e.Error.Message, "Responses API (/v1/responses)") {
			t.Fatalf("%s %s", resp.Status, raw)
		}
		if n := len(simRequests(t, ollama, "")); n != 0 {
			t.Fatalf("the ollama replica got %d requests", n)
		}
	})
}

// TestResponsesRealEngine: a /v1/responses call passed through to a real
// Ollama's /v1/responses (its OpenAI-compatible protocol), answered, one
// JSON and streamed.
func TestResponsesRealEngine(t *testing.T) {
	e := startOllama(t, ollamatest.Options{}, "tiny")
	g := engineGateway(t, e, map[string]string{"tiny": engineModel(e, "openai", "tiny", "max_tokens 8")})
	tok := g.Token(t, "demo", "demo", "")

	resp := g.v1(t, "POST", "/v1/responses", tok, `{"model":"tiny","input":"Say something.","temperature":0}`)
	var r responseObject
	raw := readJSON(t, resp, &r)
	if resp.StatusCode != 200 || r.Object != "response" || r.Model != "tiny" || r.text() == "" ||
		r.Usage == nil || r.Usage.InputTokens == 0 || r.Usage.OutputTokens == 0 {
		t.Fatalf("%s %s", resp.Status, raw)
	}

	resp = g.v1(t, "POST", "/v1/responses", tok, `{"model":"tiny","input":[{"role":"user","content":"Say something."}],"stream":true,"temperature":0}`)
	defer resp.Body.Close()
	var text strings.Builder
	var names []string
	var final responseObject
	for _, ev := range readEvents(t, resp.Body) {
		if ev.Comment {
			continue
		}
		var d struct {
			Type     string          `json:"type"`
			Delta    string          `json:"delta"`
			Response json.RawMessage `json:"response"`
		}
		if err := json.Unmarshal([]byte(ev.Data), &d); err != nil || d.Type != ev.Name {
			t.Fatalf("event %q %s: %v", ev.Name, ev.Data, err)
		}
		names = append(names, ev.Name)
		if d.Type == "response.output_text.delta" {
			text.WriteString(d.Delta)
		}
		if d.Response != nil {
			if err := json.Unmarshal(d.Response, &final); err != nil || final.Model != "tiny" {
				t.Fatalf("response %s", d.Response)
			}
		}
	}
	if len(names) == 0 || names[0] != "response.created" || names[len(names)-1] != "response.completed" || text.Len() == 0 {
		t.Fatalf("events %v, text %q", names, text.String())
	}
	if final.Status != "completed" || final.text() != text.String() || final.Usage == nil || final.Usage.OutputTokens == 0 {
		t.Fatalf("final %+v, text %q", final, text.String())
	}
	if raw, _ := json.Marshal(final); strings.Contains(string(raw), `"model":"tiny:latest"`) {
		t.Fatalf("engine's model name leaked")
	}
}
