package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"

	"github.com/llmedge/llmedge/internal/freeport"
	"github.com/llmedge/llmedge/internal/ollamatest"
	"github.com/llmedge/llmedge/internal/tinymodel"
)

// ---- a gateway with a model for every way Anthropic's door reaches replicas ----

// anthropicFixture is a gateway whose models each take Anthropic's door
// one way:
//
//	qwen     auto, its replica serves /v1/messages: carried through
//	         (upstream_model renames it)
//	edited   the same replica, with the model's default system prompt and
//	         a reply cap of 16: the edits a body carried through gets
//	gemma    translate: chat completions, and the answer translated back
//	detect   auto, its replica has no /v1/messages (-no-messages): found
//	         out on the first request, translated from then on
//	limited  qwen's replica, 1 request per minute
//	flaky    streams fail in-band after 2 tokens, carried through;
//	flakyt   the same, translated
//	olla     auto, a replica speaking Ollama's /api/chat: translated to
//	         chat completions, which the ollama protocol carries
//
// A second site serves the door through the stage handlers alone
// (llm_auth anthropic, llm_route anthropic).
type anthropicFixture struct {
	g                   *Gateway
	pass, chat, detect  *Sim
	full, limited       string // credentials: every model; qwen only
	stageBase           string // the stage handlers' site
	upstream, upstreamE string // the replicas' names of qwen and edited
}

func startAnthropicFixture(t *testing.T, cred credentialKind) *anthropicFixture {
	t.Helper()
	pass := startSim(t, "-tokens", "8", "-seed", "3")
	chat := startSim(t, "-tokens", "8", "-seed", "3", "-no-messages")
	detect := startSim(t, "-tokens", "8", "-seed", "3", "-no-messages")
	flaky := startSim(t, "-tokens", "6", "-error-after", "2")
	olla := startSim(t, "-dialect", "ollama", "-tokens", "5")
	stagePort := freeport.Must(t)
	f := &anthropicFixture{pass: pass, chat: chat, detect: detect, upstream: "Qwen/Qwen2.5-7B-Instruct", upstreamE: "Qwen/Qwen3-8B"}
	f.stageBase = fmt.Sprintf("https://localhost:%d", stagePort)
	f.g = startGateway(t, GatewayConfig{
		Options: "\t\tping_interval 100ms",
		Models: map[string]string{
			"qwen":    staticModel(pass) + "\n\t\t\tupstream_model " + f.upstream,
			"edited":  staticModel(pass) + "\n\t\t\tupstream_model " + f.upstreamE + "\n\t\t\tsystem_message \"You are terse.\"\n\t\t\tmax_tokens 16",
			"gemma":   staticModel(chat) + "\n\t\t\tanthropic translate",
			"detect":  staticModel(detect),
			"limited": staticModel(pass) + "\n\t\t\tlimits {\n\t\t\t\trpm 1\n\t\t\t}",
			"flaky":   staticModel(flaky) + "\n\t\t\tbreaker off",
			"flakyt":  staticModel(flaky) + "\n\t\t\tbreaker off\n\t\t\tanthropic translate",
			"olla":    staticModel(olla) + "\n\t\t\tprotocol ollama",
		},
		Sites: fmt.Sprintf("https://localhost:%d {\n\ttls internal\n\troute {\n\t\tllm_auth anthropic\n\t\tllm_route anthropic\n\t}\n}", stagePort),
	})
	f.full, f.limited = cred.get(t, f.g, "demo"), cred.get(t, f.g, "alice")
	return f
}

// anthropicPost posts body to base+path with the header's pairs; a
// request that takes more than a minute fails rather than hangs the test.
func (g *Gateway) anthropicPost(t *testing.T, base, path, body string, header ...string) *http.Response {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, "POST", base+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Anthropic-Version", "2023-06-01")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := g.Client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// message posts a Messages request with the credential as x-api-key.
func (f *anthropicFixture) message(t *testing.T, cred, body string) *http.Response {
	t.Helper()
	return f.g.anthropicPost(t, f.g.Base, "/v1/messages", body, "X-Api-Key", cred)
}

type anthropicMessage struct {
	ID      string `json:"id"`
	Type    string `json:"type"`
	Role    string `json:"role"`
	Model   string `json:"model"`
	Content []struct {
		Type  string          `json:"type"`
		Text  string          `json:"text"`
		ID    string          `json:"id"`
		Name  string          `json:"name"`
		Input json.RawMessage `json:"input"`
	} `json:"content"`
	StopReason   string  `json:"stop_reason"`
	StopSequence *string `json:"stop_sequence"`
	Usage        struct {
		InputTokens  int `json:"input_tokens"`
		OutputTokens int `json:"output_tokens"`
	} `json:"usage"`
}

func (m anthropicMessage) text() string {
	var b strings.Builder
	for _, c := range m.Content {
		if c.Type == "text" {
			b.WriteString(c.Text)
		}
	}
	return b.String()
}

type anthropicError struct {
	Type  string `json:"type"`
	Error struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
	RequestID *string `json:"request_id"`
}

// readMessage reads a 200 message.
func readMessage(t *testing.T, resp *http.Response) anthropicMessage {
	t.Helper()
	var m anthropicMessage
	raw := readJSON(t, resp, &m)
	if resp.StatusCode != 200 {
		t.Fatalf("%s %s", resp.Status, raw)
	}
	if m.Type != "message" || m.Role != "assistant" || !strings.HasPrefix(m.ID, "msg_") || m.StopReason == "" {
		t.Fatalf("not a message: %s", raw)
	}
	if id := resp.Header.Get("Request-Id"); id == "" || id != resp.Header.Get("X-Request-ID") {
		t.Fatalf("request-id %q, X-Request-ID %q", id, resp.Header.Get("X-Request-ID"))
	}
	if !strings.Contains(resp.Header.Get("Server-Timing"), "upstream;dur=") {
		t.Fatalf("Server-Timing %q", resp.Header.Get("Server-Timing"))
	}
	return m
}

// readAnthropicError reads an error of status and type whose message
// contains msg.
func readAnthropicError(t *testing.T, resp *http.Response, status int, typ, msg string) anthropicError {
	t.Helper()
	var e anthropicError
	raw := readJSON(t, resp, &e)
	if resp.StatusCode != status || e.Type != "error" || e.Error.Type != typ || !strings.Contains(e.Error.Message, msg) {
		t.Fatalf("%s %s, want %d %s %q", resp.Status, raw, status, typ, msg)
	}
	return e
}

// streamed is what a client makes of Anthropic's stream.
type streamed struct {
	names  []string // the events' names, pings (events and comments) left out
	text   string
	input  string // the tool calls' input_json_delta fragments
	model  string // message_start's
	stop   string // message_delta's
	usage  struct{ input, output int }
	blocks []string // content_block_start's block types
	err    string   // an error event's type
}

func readStream(t *testing.T, resp *http.Response) streamed {
	t.Helper()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("%s %s", resp.Status, b)
	}
	defer resp.Body.Close()
	var s streamed
	for _, ev := range readEvents(t, resp.Body) {
		if ev.Comment || ev.Name == "ping" {
			continue
		}
		var d struct {
			Type    string `json:"type"`
			Message struct {
				Model string `json:"model"`
				Usage struct {
					InputTokens int `json:"input_tokens"`
				} `json:"usage"`
			} `json:"message"`
			ContentBlock struct {
				Type string `json:"type"`
			} `json:"content_block"`
			Delta struct {
				Type        string `json:"type"`
				Text        string `json:"text"`
				PartialJSON string `json:"partial_json"`
				StopReason  string `json:"stop_reason"`
			} `json:"delta"`
			Usage struct {
				InputTokens  *int `json:"input_tokens"`
				OutputTokens int  `json:"output_tokens"`
			} `json:"usage"`
			Error struct {
				Type string `json:"type"`
			} `json:"error"`
		}
		if err := json.Unmarshal([]byte(ev.Data), &d); err != nil || d.Type != ev.Name {
			t.Fatalf("event %q carries %s (%v)", ev.Name, ev.Data, err)
		}
		s.names = append(s.names, ev.Name)
		switch ev.Name {
		case "message_start":
			s.model, s.usage.input = d.Message.Model, d.Message.Usage.InputTokens
		case "content_block_start":
			s.blocks = append(s.blocks, d.ContentBlock.Type)
		case "content_block_delta":
			s.text += d.Delta.Text
			s.input += d.Delta.PartialJSON
		case "message_delta":
			s.stop, s.usage.output = d.Delta.StopReason, d.Usage.OutputTokens
			if d.Usage.InputTokens != nil {
				s.usage.input = *d.Usage.InputTokens
			}
		case "error":
			s.err = d.Error.Type
		}
	}
	return s
}

// sequence is Anthropic's order of events for blocks blocks of deltas.
func sequence(blocks ...int) []string {
	seq := []string{"message_start"}
	for _, n := range blocks {
		seq = append(seq, "content_block_start")
		for range n {
			seq = append(seq, "content_block_delta")
		}
		seq = append(seq, "content_block_stop")
	}
	return append(seq, "message_delta", "message_stop")
}

// drain reads what s received since the last drain, and empties it.
func (s *Sim) drain(t testing.TB) []captured {
	t.Helper()
	reqs := s.requests(t)
	s.reset(t)
	return reqs
}

func paths(reqs []captured) string {
	var p []string
	for _, r := range reqs {
		p = append(p, r.Path)
	}
	return strings.Join(p, " ")
}

const (
	anthropicHello       = `"messages":[{"role":"user","content":[{"type":"text","text":"Say"},{"type":"text","text":"hello."}]}]`
	anthropicWeatherTool = `"tools":[{"name":"get_weather","description":"The weather of a city","input_schema":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}]`
)

// ---- the door, over HTTPS with a plain client ----

// TestAnthropicPassThrough: a body carried through reaches the replica
// byte for byte but for the documented edits (the model's name, its
// default system prompt, its reply cap), and the replica's answer and
// events reach the client as it wrote them, with the gateway's model name.
func TestAnthropicPassThrough(t *testing.T) {
	f := startAnthropicFixture(t, credentialKinds[0])
	f.pass.drain(t)

	body := `{"model":"qwen", "max_tokens":64,"system":[{"type":"text","text":"Be terse.","cache_control":{"type":"ephemeral"}}],` +
		anthropicHello + `,"temperature":0.5,"top_k":40,"stop_sequences":["END"],"metadata":{"user_id":"u-7"},"vendor_extra":{"x":1.50}}`
	m := readMessage(t, f.message(t, f.full, body))
	if m.Model != "qwen" || m.StopReason != "end_turn" || m.Usage.OutputTokens != 8 || m.Usage.InputTokens <= 0 || len(strings.Fields(m.text())) != 8 {
		t.Fatalf("message %+v", m)
	}
	got := f.pass.drain(t)
	want := strings.Replace(body, `"model":"qwen"`, `"model":"`+f.upstream+`"`, 1)
	if len(got) != 1 || got[0].Path != "/v1/messages" || string(got[0].Body) != want {
		t.Fatalf("the replica got %s\n%s\nwant\n%s", paths(got), got[0].Body, want)
	}

	// The model's edits: its default system prompt as "system", its cap.
	body = `{"model":"edited","max_tokens":100,` + anthropicHello + `}`
	m = readMessage(t, f.message(t, f.full, body))
	if m.Model != "edited" || m.StopReason != "end_turn" || m.Usage.OutputTokens != 8 {
		t.Fatalf("message %+v", m)
	}
	got = f.pass.drain(t)
	want = `{"model":"` + f.upstreamE + `","max_tokens":16,` + anthropicHello + `,"system":"You are terse."}`
	if string(got[0].Body) != want {
		t.Fatalf("the replica got\n%s\nwant\n%s", got[0].Body, want)
	}

	t.Run("stream", func(t *testing.T) {
		s := readStream(t, f.message(t, f.full, `{"model":"qwen","max_tokens":64,"stream":true,`+anthropicHello+`}`))
		if !slices.Equal(s.names, sequence(8)) || s.model != "qwen" || s.stop != "end_turn" || s.usage.output != 8 ||
			s.text != readMessage(t, f.message(t, f.full, `{"model":"qwen","max_tokens":64,`+anthropicHello+`}`)).text() {
			t.Fatalf("stream %+v", s)
		}
		if got := f.pass.drain(t); len(got) != 2 || !bytes.Contains(got[0].Body, []byte(`"stream":true`)) {
			t.Fatalf("the replica got %s", paths(got))
		}
	})
	t.Run("tool round trip", func(t *testing.T) { toolRoundTrip(t, f, "qwen", f.pass, "/v1/messages") })
}

// TestAnthropicTranslated: a model in translate mode, and one whose
// replica turns out not to serve /v1/messages, get chat completions; the
// client gets Anthropic's message and events all the same.
func TestAnthropicTranslated(t *testing.T) {
	f := startAnthropicFixture(t, credentialKinds[0])
	f.chat.drain(t)
	f.detect.drain(t)

	body := `{"model":"gemma","max_tokens":64,"system":"Be terse.",` + anthropicHello +
		`,"temperature":0.5,"top_k":40,"stop_sequences":["END"],"metadata":{"user_id":"u-7"}}`
	m := readMessage(t, f.message(t, f.full, body))
	if m.Model != "gemma" || m.StopReason != "end_turn" || m.Usage.OutputTokens != 8 || m.Usage.InputTokens <= 0 {
		t.Fatalf("message %+v", m)
	}
	got := f.chat.drain(t)
	want := `{"model":"gemma","messages":[{"role":"system","content":"Be terse."},{"role":"user","content":[{"type":"text","text":"Say"},{"type":"text","text":"hello."}]}],` +
		`"max_tokens":64,"temperature":0.5,"top_k":40,"stop":["END"],"user":"u-7"}`
	// No upstream_model: the translation, like the OpenAI door's bodies,
	// names none.
	want = strings.Replace(want, `"model":"gemma",`, "", 1)
	if len(got) != 1 || got[0].Path != "/v1/chat/completions" || string(got[0].Body) != want {
		t.Fatalf("the replica got %s\n%s\nwant\n%s", paths(got), got[0].Body, want)
	}
	// The same text as the replica carried through would say: the
	// simulators are seeded alike.
	if pass := readMessage(t, f.message(t, f.full, strings.Replace(body, "gemma", "qwen", 1))); m.text() != pass.text() {
		t.Fatalf("translated %q, carried through %q", m.text(), pass.text())
	}

	t.Run("detected", func(t *testing.T) {
		req := `{"model":"detect","max_tokens":64,` + anthropicHello + `}`
		first := readMessage(t, f.message(t, f.full, req))
		if got := f.detect.drain(t); paths(got) != "/v1/messages /v1/chat/completions" {
			t.Fatalf("first request: the replica got %s", paths(got))
		}
		second := readMessage(t, f.message(t, f.full, req))
		if got := f.detect.drain(t); paths(got) != "/v1/chat/completions" {
			t.Fatalf("second request: the replica got %s", paths(got))
		}
		if first.text() != second.text() || first.Model != "detect" || first.StopReason != "end_turn" {
			t.Fatalf("answers %+v %+v", first, second)
		}
	})
	t.Run("stream", func(t *testing.T) {
		s := readStream(t, f.message(t, f.full, `{"model":"gemma","max_tokens":5,"stream":true,`+anthropicHello+`}`))
		if !slices.Equal(s.names, sequence(5)) || s.model != "gemma" || s.stop != "max_tokens" || s.usage.output != 5 || s.usage.input <= 0 ||
			len(strings.Fields(s.text)) != 5 {
			t.Fatalf("stream %+v", s)
		}
		if got := f.chat.drain(t); !bytes.Contains(got[0].Body, []byte(`"stream":true`)) {
			t.Fatalf("the replica got %s", got[0].Body)
		}
	})
	t.Run("tool round trip", func(t *testing.T) { toolRoundTrip(t, f, "gemma", f.chat, "/v1/chat/completions") })
	t.Run("ollama protocol", func(t *testing.T) {
		m := readMessage(t, f.message(t, f.full, `{"model":"olla","max_tokens":64,`+anthropicHello+`}`))
		// Ollama counts the end of generation as a token.
		if m.Model != "olla" || len(strings.Fields(m.text())) != 5 || m.StopReason != "end_turn" || m.Usage.OutputTokens != 6 {
			t.Fatalf("message %+v", m)
		}
		s := readStream(t, f.message(t, f.full, `{"model":"olla","max_tokens":64,"stream":true,`+anthropicHello+`}`))
		if !slices.Equal(s.names, sequence(5)) || s.text != m.text() {
			t.Fatalf("stream %+v", s)
		}
		// Tools reach Ollama's /api/chat (the protocol translates them),
		// and its call comes back as a tool_use block.
		m = readMessage(t, f.message(t, f.full, `{"model":"olla","max_tokens":64,`+anthropicWeatherTool+`,`+anthropicHello+`}`))
		if m.StopReason != "tool_use" || len(m.Content) != 1 || m.Content[0].Type != "tool_use" || m.Content[0].Name != "get_weather" {
			t.Fatalf("message %+v", m)
		}
		// What Ollama's /api/chat cannot carry is refused, naming it: it
		// cannot force a call (tool_choice any is chat's "required").
		readAnthropicError(t, f.message(t, f.full, `{"model":"olla","max_tokens":64,`+anthropicWeatherTool+`,"tool_choice":{"type":"any"},`+anthropicHello+`}`),
			400, "invalid_request_error", "ollama protocol, which cannot carry a tool_choice other than")
	})
	t.Run("untranslatable", func(t *testing.T) {
		f.chat.drain(t)
		readAnthropicError(t, f.message(t, f.full, `{"model":"gemma","max_tokens":64,"mcp_servers":[{"type":"url","url":"https://mcp.example.com","name":"x"}],`+anthropicHello+`}`),
			400, "invalid_request_error", "'mcp_servers' has no equivalent in OpenAI's chat completions")
		if got := f.chat.drain(t); len(got) != 0 {
			t.Fatalf("the replica got %s", paths(got))
		}
	})
}

// toolRoundTrip asks model for a call of the weather tool, streamed and
// not, then gives it the tool's result; the replica sim must get the
// second turn on path.
func toolRoundTrip(t *testing.T, f *anthropicFixture, model string, sim *Sim, path string) {
	ask := `{"model":"` + model + `","max_tokens":64,` + anthropicWeatherTool + `,"tool_choice":{"type":"any"},"messages":[{"role":"user","content":"Weather in Paris?"}]}`
	m := readMessage(t, f.message(t, f.full, ask))
	if m.StopReason != "tool_use" || len(m.Content) != 1 || m.Content[0].Type != "tool_use" || m.Content[0].Name != "get_weather" || m.Content[0].ID == "" {
		t.Fatalf("message %+v", m)
	}
	var input struct{ City string }
	if err := json.Unmarshal(m.Content[0].Input, &input); err != nil || input.City == "" {
		t.Fatalf("input %s (%v)", m.Content[0].Input, err)
	}
	s := readStream(t, f.message(t, f.full, strings.Replace(ask, `"max_tokens"`, `"stream":true,"max_tokens"`, 1)))
	var streamedInput struct{ City string }
	if s.stop != "tool_use" || !slices.Equal(s.blocks, []string{"tool_use"}) || json.Unmarshal([]byte(s.input), &streamedInput) != nil ||
		streamedInput != input {
		t.Fatalf("stream %+v", s)
	}

	call, _ := json.Marshal(m.Content[0])
	answer := `{"model":"` + model + `","max_tokens":64,` + anthropicWeatherTool + `,"messages":[{"role":"user","content":"Weather in Paris?"},` +
		`{"role":"assistant","content":[` + string(call) + `]},` +
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"` + m.Content[0].ID + `","content":"Sunny, 21 C"}]}]}`
	sim.drain(t)
	done := readMessage(t, f.message(t, f.full, answer))
	if done.StopReason != "end_turn" || done.text() == "" {
		t.Fatalf("message %+v", done)
	}
	got := sim.drain(t)
	if len(got) != 1 || got[0].Path != path {
		t.Fatalf("the replica got %s", paths(got))
	}
	if path == "/v1/chat/completions" {
		// The call and its result as chat completions have them.
		var req struct {
			Messages []struct {
				Role       string `json:"role"`
				ToolCallID string `json:"tool_call_id"`
				Content    any    `json:"content"`
				ToolCalls  []struct {
					ID       string `json:"id"`
					Function struct{ Name, Arguments string }
				} `json:"tool_calls"`
			} `json:"messages"`
		}
		if err := json.Unmarshal(got[0].Body, &req); err != nil || len(req.Messages) != 3 {
			t.Fatalf("%v %s", err, got[0].Body)
		}
		a, tool := req.Messages[1], req.Messages[2]
		if a.Role != "assistant" || len(a.ToolCalls) != 1 || a.ToolCalls[0].ID != m.Content[0].ID || a.ToolCalls[0].Function.Name != "get_weather" ||
			tool.Role != "tool" || tool.ToolCallID != m.Content[0].ID || tool.Content != "Sunny, 21 C" {
			t.Fatalf("the replica got %s", got[0].Body)
		}
	}
}

// TestAnthropicErrors: each failure in Anthropic's shape, with the type
// its SDKs expect; nothing reaches a replica that the credential's scopes
// do not cover.
func TestAnthropicErrors(t *testing.T) {
	f := startAnthropicFixture(t, credentialKinds[0])
	g := f.g
	body := `{"model":"gemma","max_tokens":8,` + anthropicHello + `}`
	f.chat.drain(t)

	e := readAnthropicError(t, g.anthropicPost(t, g.Base, "/v1/messages", body), 401, "authentication_error", "Not authenticated")
	if e.RequestID == nil || *e.RequestID == "" {
		t.Fatal("no request_id")
	}
	readAnthropicError(t, f.message(t, "sk-ant-not-a-key", body), 401, "authentication_error", "")
	readAnthropicError(t, g.anthropicPost(t, g.Base, "/v1/messages", body, "Authorization", "Bearer sk-ant-not-a-key"), 401, "authentication_error", "")
	// alice may use qwen only: whatever field names the model.
	readAnthropicError(t, f.message(t, f.limited, body), 403, "permission_error", "model:gemma")
	readAnthropicError(t, g.anthropicPost(t, g.Base, "/v1/messages/count_tokens", `{"model":"gemma",`+anthropicHello+`}`, "X-Api-Key", f.limited),
		403, "permission_error", "model:gemma")
	readAnthropicError(t, g.anthropicPost(t, f.stageBase, "/v1/messages", body, "X-Api-Key", f.limited), 403, "permission_error", "model:gemma")
	if got := f.chat.drain(t); len(got) != 0 || f.chat.Stats(t).Requests != 0 {
		t.Fatalf("a request outside the credential's scope reached the replica: %s", paths(got))
	}

	readAnthropicError(t, f.message(t, f.full, `{"model":"gemma",`+anthropicHello+`}`), 400, "invalid_request_error", "max_tokens: Field required")
	readAnthropicError(t, f.message(t, f.full, `{"model":"gemma","max_tokens":8,"messages":[{"role":"user","content":[{"type":"text"}]}]}`),
		400, "invalid_request_error", "messages.0.content.0.text: Field required")
	readAnthropicError(t, f.message(t, f.full, `{"model":"gemma"`), 400, "invalid_request_error", "not valid JSON")
	readAnthropicError(t, f.message(t, f.full, `{"model":"claude-opus-4-5","max_tokens":8,`+anthropicHello+`}`), 404, "not_found_error", "claude-opus-4-5")
	readAnthropicError(t, g.anthropicPost(t, g.Base, "/v1/messages", body, "X-Api-Key", f.full, "Anthropic-Version", "yesterday"),
		400, "invalid_request_error", "anthropic-version")

	// The tenant's limit: one request a minute on limited.
	limited := `{"model":"limited","max_tokens":8,` + anthropicHello + `}`
	readMessage(t, f.message(t, f.full, limited))
	resp := f.message(t, f.full, limited)
	readAnthropicError(t, resp, 429, "rate_limit_error", "Rate limit reached")
	if resp.Header.Get("Retry-After") == "" {
		t.Fatal("429 without Retry-After")
	}

	// A failure after the stream started: an error event, after the text.
	for _, model := range []string{"flaky", "flakyt"} {
		s := readStream(t, f.message(t, f.full, `{"model":"`+model+`","max_tokens":8,"stream":true,`+anthropicHello+`}`))
		if s.err != "api_error" || s.names[len(s.names)-1] != "error" || s.names[0] != "message_start" || s.text == "" {
			t.Fatalf("%s: stream %+v", model, s)
		}
	}
}

// TestAnthropicCountTokens: count_tokens where the replica serves it, the
// same count /v1/messages reports; where it does not, its engine's
// tokenizer's; 404 for a protocol that cannot count (Ollama's /api/chat).
func TestAnthropicCountTokens(t *testing.T) {
	f := startAnthropicFixture(t, credentialKinds[1])
	g := f.g
	count := func(base, model string, header ...string) *http.Response {
		return g.anthropicPost(t, base, "/v1/messages/count_tokens", `{"model":"`+model+`","system":"Be terse.",`+anthropicHello+`}`,
			append([]string{"X-Api-Key", f.full}, header...)...)
	}
	resp := count(g.Base, "qwen")
	var c struct {
		InputTokens int `json:"input_tokens"`
	}
	raw := readJSON(t, resp, &c)
	m := readMessage(t, f.message(t, f.full, `{"model":"qwen","max_tokens":8,"system":"Be terse.",`+anthropicHello+`}`))
	if resp.StatusCode != 200 || c.InputTokens != m.Usage.InputTokens || resp.Header.Get("Request-Id") == "" {
		t.Fatalf("%s %s, the message counts %d", resp.Status, raw, m.Usage.InputTokens)
	}
	// The edits of /v1/messages but the reply cap: the model's name, and
	// its default system prompt only where the request gives none (the
	// request's own is counted, not replaced).
	f.pass.drain(t)
	for _, c := range []struct{ body, want string }{
		{`{"model":"edited","system":"Be terse.",` + anthropicHello + `}`, `{"model":"` + f.upstreamE + `","system":"Be terse.",` + anthropicHello + `}`},
		{`{"model":"edited",` + anthropicHello + `}`, `{"model":"` + f.upstreamE + `",` + anthropicHello + `,"system":"You are terse."}`},
	} {
		resp := g.anthropicPost(t, g.Base, "/v1/messages/count_tokens", c.body, "X-Api-Key", f.full)
		raw := readJSON(t, resp, nil)
		got := f.pass.drain(t)
		if resp.StatusCode != 200 || len(got) != 1 || got[0].Path != "/v1/messages/count_tokens" || string(got[0].Body) != c.want {
			t.Fatalf("%s %s; the replica got %d requests: %s", resp.Status, raw, len(got), bodies(got))
		}
	}
	// Replicas without count_tokens (translated, or found without it):
	// their engine's tokenizer counts, as /v1/messages charges.
	for _, model := range []string{"gemma", "detect"} {
		resp := count(g.Base, model)
		raw := readJSON(t, resp, &c)
		m := readMessage(t, f.message(t, f.full, `{"model":"`+model+`","max_tokens":8,"system":"Be terse.",`+anthropicHello+`}`))
		if resp.StatusCode != 200 || c.InputTokens != m.Usage.InputTokens {
			t.Fatalf("%s: %s %s, the message counts %d", model, resp.Status, raw, m.Usage.InputTokens)
		}
	}
	readAnthropicError(t, count(g.Base, "olla"), 404, "not_found_error", "count_tokens is not available")
	readAnthropicError(t, count(g.Base, "qwen", "X-Api-Key", "nope"), 401, "authentication_error", "")
}

// TestAnthropicStageHandlers: llm_auth anthropic and llm_route anthropic
// serve the door on a site of their own, x-api-key and all.
func TestAnthropicStageHandlers(t *testing.T) {
	f := startAnthropicFixture(t, credentialKinds[1])
	m := readMessage(t, f.g.anthropicPost(t, f.stageBase, "/v1/messages", `{"model":"qwen","max_tokens":8,`+anthropicHello+`}`, "X-Api-Key", f.full))
	if m.Model != "qwen" || m.Usage.OutputTokens != 8 {
		t.Fatalf("message %+v", m)
	}
	s := readStream(t, f.g.anthropicPost(t, f.stageBase, "/v1/messages", `{"model":"gemma","max_tokens":8,"stream":true,`+anthropicHello+`}`,
		"Authorization", "Bearer "+f.full))
	if !slices.Equal(s.names, sequence(8)) {
		t.Fatalf("stream %+v", s)
	}
}

// TestAnthropicSDK runs Anthropic's official SDK, the npm package
// @anthropic-ai/sdk (pinned in e2e/sdk/node/package-lock.json), against a
// real gateway over HTTPS: messages, the stream helper, a tool round trip
// in both modes, and each error class.
func TestAnthropicSDK(t *testing.T) {
	node, npm := lookPath(t, "node"), lookPath(t, "npm")
	for _, cred := range credentialKinds {
		t.Run(cred.name, func(t *testing.T) {
			f := startAnthropicFixture(t, cred)
			env := append(os.Environ(),
				"LLMEDGE_ANTHROPIC_BASE_URL="+f.g.Base,
				"LLMEDGE_KEY="+f.full,
				"LLMEDGE_KEY_LIMITED="+f.limited,
				"NODE_EXTRA_CA_CERTS="+f.g.CAFile(),
			)
			installNodeSDK(t, npm)
			run(t, 5*time.Minute, nodeSDKDir, env, node, "--test", "--test-reporter=spec", "anthropic.test.mjs")
		})
	}
}

// TestRealEngineAnthropic: Anthropic's door in front of a real engine,
// Ollama (bin/ollama, v0.17.4, which serves /v1/messages itself): the
// body carried through to it, and the same request translated to its
// /v1/chat/completions, get the model's words, plain and streamed, in
// Anthropic's shapes.
func TestRealEngineAnthropic(t *testing.T) {
	e := startOllama(t, ollamatest.Options{}, "tiny")
	g := engineGateway(t, e, map[string]string{
		"pass":  engineModel(e, "openai", "tiny", "anthropic passthrough"),
		"trans": engineModel(e, "openai", "tiny", "anthropic translate"),
	})
	tok := g.Token(t, "demo", "demo", "")
	want := tinymodel.Answer(tinyCfg, tinyWords)
	const ask = `"max_tokens":64,"system":"Be terse.","messages":[{"role":"user","content":"Hello! What is the capital of France?"}]`
	for _, model := range []string{"pass", "trans"} {
		t.Run(model, func(t *testing.T) {
			m := readMessage(t, g.anthropicPost(t, g.Base, "/v1/messages", `{"model":"`+model+`",`+ask+`}`, "X-Api-Key", tok))
			if got := strings.Fields(m.text()); !slices.Equal(got, want) || m.Model != model || m.StopReason != "end_turn" ||
				m.Usage.InputTokens <= 0 || m.Usage.OutputTokens < tinyWords {
				t.Fatalf("message %+v, want the words %q", m, want)
			}
			s := readStream(t, g.anthropicPost(t, g.Base, "/v1/messages", `{"model":"`+model+`","stream":true,`+ask+`}`, "X-Api-Key", tok))
			if s.text != m.text() || s.model != model || s.stop != "end_turn" || s.names[0] != "message_start" ||
				s.names[1] != "content_block_start" || !slices.Equal(s.names[len(s.names)-3:], []string{"content_block_stop", "message_delta", "message_stop"}) {
				t.Fatalf("stream %+v, want the text %q", s, m.text())
			}
			cut := readMessage(t, g.anthropicPost(t, g.Base, "/v1/messages",
				`{"model":"`+model+`",`+strings.Replace(ask, `"max_tokens":64`, `"max_tokens":3`, 1)+`}`, "X-Api-Key", tok))
			if cut.StopReason != "max_tokens" || len(strings.Fields(cut.text())) != 3 {
				t.Fatalf("cut message %+v", cut)
			}
		})
	}
}

// TestAnthropicOpenAPI checks the door's requests and answers, errors
// included, against the description the gateway serves at /openapi.json.
func TestAnthropicOpenAPI(t *testing.T) {
	f := startAnthropicFixture(t, credentialKinds[0])
	g := f.g
	resp, err := g.Client.Get(g.Base + "/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := libopenapi.NewDocument(readJSON(t, resp, nil))
	if err != nil {
		t.Fatal(err)
	}
	v, errs := validator.NewValidator(doc)
	if len(errs) > 0 {
		t.Fatalf("validator: %v", errs)
	}
	if ok, verrs := v.ValidateDocument(); !ok {
		for _, e := range verrs {
			t.Errorf("document: %s: %s", e.Message, e.Reason)
		}
		t.FailNow()
	}
	const hello = `"messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}]`
	for _, c := range []struct {
		name, path, body string
		header           []string
		status           int
	}{
		{"message", "/v1/messages", `{"model":"qwen","max_tokens":8,"system":"Be terse.",` + hello + `,"temperature":0.5,"stop_sequences":["x"]}`, []string{"X-Api-Key", f.full}, 200},
		{"translated", "/v1/messages", `{"model":"gemma","max_tokens":8,` + hello + `}`, []string{"Authorization", "Bearer " + f.full}, 200},
		{"claude code, translated", "/v1/messages", ccRequest("gemma", ccFirstMessages), []string{"Authorization", "Bearer " + f.full, "Anthropic-Beta", ccBeta}, 200},
		{"tool call", "/v1/messages", `{"model":"qwen","max_tokens":64,` + anthropicWeatherTool + `,"tool_choice":{"type":"any"},` + hello + `}`, []string{"X-Api-Key", f.full}, 200},
		{"stream", "/v1/messages", `{"model":"qwen","max_tokens":8,"stream":true,` + hello + `}`, []string{"X-Api-Key", f.full}, 200},
		{"no key", "/v1/messages", `{"model":"qwen","max_tokens":8,` + hello + `}`, nil, 401},
		{"invalid", "/v1/messages", `{"model":"qwen","max_tokens":0,` + hello + `}`, []string{"X-Api-Key", f.full}, 400},
		{"scope", "/v1/messages", `{"model":"gemma","max_tokens":8,` + hello + `}`, []string{"X-Api-Key", f.limited}, 403},
		{"unknown model", "/v1/messages", `{"model":"claude","max_tokens":8,` + hello + `}`, []string{"X-Api-Key", f.full}, 404},
		{"count", "/v1/messages/count_tokens", `{"model":"qwen",` + hello + `}`, []string{"X-Api-Key", f.full}, 200},
		{"count not served", "/v1/messages/count_tokens", `{"model":"olla",` + hello + `}`, []string{"X-Api-Key", f.full}, 404},
		{"count stream", "/v1/messages/count_tokens", `{"model":"qwen","stream":true,` + hello + `}`, []string{"X-Api-Key", f.full}, 400},
		{"bad version", "/v1/messages", `{"model":"qwen","max_tokens":8,` + hello + `}`, []string{"X-Api-Key", f.full, "Anthropic-Version", "latest"}, 400},
		{"system blocks", "/v1/messages", `{"model":"qwen","max_tokens":8,"system":[{"type":"image","source":{}}],` + hello + `}`, []string{"X-Api-Key", f.full}, 400},
	} {
		t.Run(c.name, func(t *testing.T) {
			build := func() *http.Request {
				req, _ := http.NewRequest("POST", g.Base+c.path, strings.NewReader(c.body))
				req.Header.Set("Content-Type", "application/json")
				for i := 0; i+1 < len(c.header); i += 2 {
					req.Header.Set(c.header[i], c.header[i+1])
				}
				return req
			}
			if c.status < 400 {
				if ok, verrs := v.ValidateHttpRequest(build()); !ok {
					for _, e := range verrs {
						t.Errorf("request: %s: %s", e.Message, e.Reason)
					}
				}
			}
			if c.status == 400 && c.name != "bad version" {
				// What the door refuses, the description refuses too (but
				// anthropic-version's pattern: the validator checks a
				// header's enum, not its pattern).
				if ok, _ := v.ValidateHttpRequest(build()); ok {
					t.Errorf("the description takes a request the door refuses: %s", c.body)
				}
			}
			resp, err := g.Client.Do(build())
			if err != nil {
				t.Fatal(err)
			}
			raw, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != c.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, c.status, raw)
			}
			resp.Body = io.NopCloser(bytes.NewReader(raw))
			if ok, verrs := v.ValidateHttpResponse(build(), resp); !ok {
				for _, e := range verrs {
					t.Errorf("response %d: %s: %s", resp.StatusCode, e.Message, e.Reason)
				}
			}
		})
	}
}

// bodies are the paths and bodies of reqs, for a message.
func bodies(reqs []captured) string {
	var b strings.Builder
	for _, r := range reqs {
		fmt.Fprintf(&b, "\n%s %s", r.Path, r.Body)
	}
	return b.String()
}
