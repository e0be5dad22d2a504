package simulator

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// sdkMessage is anthropic's Message.
type sdkMessage struct {
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
	StopReason   *string `json:"stop_reason"`
	StopSequence *string `json:"stop_sequence"`
	Usage        struct {
		InputTokens  int `json:"input_tokens"`
		OutputTokens int `json:"output_tokens"`
	} `json:"usage"`
}

// anthropicStream is a /v1/messages stream reassembled as anthropic's
// MessageStream accumulates it.
type anthropicStream struct {
	names   []string
	message sdkMessage
	text    string
	json    string
}

func messagesStream(t *testing.T, url, body string, hdr ...string) anthropicStream {
	t.Helper()
	resp, b := do(t, http.MethodPost, url+"/v1/messages", body, hdr...)
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("status %d %s: %s", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	evs := parseEvents(t, b)
	var s anthropicStream
	s.names = eventNames(evs)
	for _, e := range evs {
		switch e.Name {
		case "message_start":
			requireKeys(t, e.Data, "message.id", "message.type", "message.role", "message.content", "message.model",
				"message.stop_reason", "message.stop_sequence", "message.usage.input_tokens", "message.usage.output_tokens")
			s.message = decode[struct{ Message sdkMessage }](t, e.Data).Message
		case "content_block_start":
			requireKeys(t, e.Data, "index", "content_block.type")
			cb := decode[struct {
				Index        int
				ContentBlock json.RawMessage `json:"content_block"`
			}](t, e.Data)
			var blk struct {
				Type, Text, ID, Name string
				Input                json.RawMessage
			}
			json.Unmarshal(cb.ContentBlock, &blk)
			s.message.Content = append(s.message.Content, struct {
				Type  string          `json:"type"`
				Text  string          `json:"text"`
				ID    string          `json:"id"`
				Name  string          `json:"name"`
				Input json.RawMessage `json:"input"`
			}{blk.Type, blk.Text, blk.ID, blk.Name, blk.Input})
		case "content_block_delta":
			requireKeys(t, e.Data, "index", "delta.type")
			d := decode[struct {
				Index int
				Delta struct {
					Type        string
					Text        string
					PartialJSON string `json:"partial_json"`
				}
			}](t, e.Data)
			s.text += d.Delta.Text
			s.json += d.Delta.PartialJSON
		case "message_delta":
			requireKeys(t, e.Data, "delta.stop_reason", "delta.stop_sequence", "usage.output_tokens")
			d := decode[struct {
				Delta struct {
					StopReason   *string `json:"stop_reason"`
					StopSequence *string `json:"stop_sequence"`
				}
				Usage struct {
					OutputTokens int `json:"output_tokens"`
				}
			}](t, e.Data)
			s.message.StopReason, s.message.StopSequence = d.Delta.StopReason, d.Delta.StopSequence
			s.message.Usage.OutputTokens = d.Usage.OutputTokens
		}
	}
	return s
}

// wantMessageEvents is the order of a stream's events.
var wantMessageEvents = []string{"message_start", "content_block_start", "ping", "content_block_delta*", "content_block_stop", "message_delta", "message_stop"}

func TestMessages(t *testing.T) {
	ts, sim := start(t, Config{Tokens: 6, Seed: 9})
	tool := `[{"name":"get_weather","description":"weather","input_schema":` + weatherParams + `}]`
	textFull := decode[sdkMessage](t, mustPost(t, ts.URL, "/v1/messages", `{"model":"claude","max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`)).Content[0].Text
	stopWord := strings.Fields(textFull)[3]
	tests := []struct {
		name       string
		body       string
		wantStop   string
		wantSeq    *string
		wantTool   bool
		wantText   string // "" for any
		wantPrompt int    // 0 for any
	}{
		{"string content", `{"model":"claude","max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`, "end_turn", nil, false, textFull, 5},
		{"text blocks, system string", `{"model":"claude","max_tokens":100,"system":"be brief","messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}]}`, "end_turn", nil, false, "", 11},
		{"system blocks", `{"model":"claude","max_tokens":100,"system":[{"type":"text","text":"be"},{"type":"text","text":" brief"}],"messages":[{"role":"user","content":"hi"}]}`, "end_turn", nil, false, "", 11},
		{"max_tokens", `{"model":"claude","max_tokens":2,"messages":[{"role":"user","content":"hi"}]}`, "max_tokens", nil, false, "", 5},
		{"stop_sequences", `{"model":"claude","max_tokens":100,"stop_sequences":["` + stopWord + `"],"messages":[{"role":"user","content":"hi"}]}`, "stop_sequence", &stopWord, false, textFull[:strings.Index(textFull, stopWord)], 5},
		{"image block", `{"model":"claude","max_tokens":100,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AAAA"}},{"type":"text","text":"hi"}]}]}`, "end_turn", nil, false, "", 5 + imageTokens},
		{"tools: a tool_use", `{"model":"claude","max_tokens":100,"tools":` + tool + `,"messages":[{"role":"user","content":"weather?"}]}`, "tool_use", nil, true, "", 0},
		{"tool_choice any", `{"model":"claude","max_tokens":100,"tools":` + tool + `,"tool_choice":{"type":"any"},"messages":[{"role":"user","content":"weather?"}]}`, "tool_use", nil, true, "", 0},
		{"tool_choice tool", `{"model":"claude","max_tokens":100,"tools":` + tool + `,"tool_choice":{"type":"tool","name":"get_weather"},"messages":[{"role":"user","content":"weather?"}]}`, "tool_use", nil, true, "", 0},
		{"tool_choice none", `{"model":"claude","max_tokens":100,"tools":` + tool + `,"tool_choice":{"type":"none"},"messages":[{"role":"user","content":"weather?"}]}`, "end_turn", nil, false, "", 0},
		{"after a tool_result", `{"model":"claude","max_tokens":100,"tools":` + tool + `,"messages":[{"role":"user","content":"weather?"},` +
			`{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{"city":"Paris"}}]},` +
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":"sunny"}]}]}]}`, "end_turn", nil, false, "", 0},
		{"metadata, temperature, top_k", `{"model":"claude","max_tokens":100,"metadata":{"user_id":"u"},"temperature":0.5,"top_p":0.9,"top_k":5,"messages":[{"role":"user","content":"hi"}]}`, "end_turn", nil, false, textFull, 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := mustPost(t, ts.URL, "/v1/messages", tt.body)
			requireKeys(t, b, "id", "type", "role", "model", "content", "stop_reason", "stop_sequence", "usage.input_tokens", "usage.output_tokens")
			m := decode[sdkMessage](t, b)
			if !strings.HasPrefix(m.ID, "msg_") || m.Type != "message" || m.Role != "assistant" || m.Model != "sim-model" || len(m.Content) != 1 {
				t.Fatalf("message %s", b)
			}
			if *m.StopReason != tt.wantStop || !samePtr(m.StopSequence, tt.wantSeq) {
				t.Errorf("stop_reason %s stop_sequence %v, want %s %v", *m.StopReason, m.StopSequence, tt.wantStop, tt.wantSeq)
			}
			if tt.wantPrompt != 0 && m.Usage.InputTokens != tt.wantPrompt {
				t.Errorf("input_tokens %d, want %d", m.Usage.InputTokens, tt.wantPrompt)
			}
			blk := m.Content[0]
			if tt.wantTool {
				if blk.Type != "tool_use" || !strings.HasPrefix(blk.ID, "toolu_") || blk.Name != "get_weather" {
					t.Fatalf("block %+v", blk)
				}
				validateJSON(t, []byte(weatherParams), string(blk.Input))
			} else if blk.Type != "text" || tt.wantText != "" && blk.Text != tt.wantText {
				t.Errorf("block %+v, want text %q", blk, tt.wantText)
			}

			s := messagesStream(t, ts.URL, strings.Replace(tt.body, "{", `{"stream":true,`, 1))
			if fmt.Sprint(s.names) != fmt.Sprint(wantMessageEvents) {
				t.Errorf("events %v, want %v", s.names, wantMessageEvents)
			}
			if len(s.message.Content) != 1 || s.message.Content[0].Type != blk.Type || s.message.Usage.OutputTokens != m.Usage.OutputTokens ||
				s.message.Usage.InputTokens != m.Usage.InputTokens || *s.message.StopReason != *m.StopReason || !samePtr(s.message.StopSequence, m.StopSequence) {
				t.Errorf("streamed %+v, non-streamed %+v", s.message, m)
			}
			if tt.wantTool {
				if s.json != string(blk.Input) || s.message.Content[0].Name != blk.Name || string(s.message.Content[0].Input) != "{}" {
					t.Errorf("streamed input %s, non-streamed %s", s.json, blk.Input)
				}
			} else if s.text != blk.Text {
				t.Errorf("streamed text %q, non-streamed %q", s.text, blk.Text)
			}
		})
	}
	if lr := sim.Stats().LastRequest; lr == nil || lr.Model != "claude" || lr.Messages[len(lr.Messages)-1].Role != "user" {
		t.Errorf("last request %+v", lr)
	}
}

func TestMessagesToolResultConversion(t *testing.T) {
	ts, sim := start(t, Config{Tokens: 2})
	mustPost(t, ts.URL, "/v1/messages", `{"model":"c","max_tokens":9,"system":[{"type":"text","text":"sys"}],"messages":[`+
		`{"role":"user","content":"weather?"},`+
		`{"role":"assistant","content":[{"type":"text","text":"checking"},{"type":"tool_use","id":"t1","name":"w","input":{"city":"Paris"}}]},`+
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"sunny"},{"type":"text","text":"thanks"}]}]}`)
	var got []string
	for _, m := range sim.Stats().LastRequest.Messages {
		got = append(got, "{"+m.Role+" "+m.Content+"}")
	}
	if want := "{system sys} {user weather?} {assistant checking} {tool sunny} {user thanks}"; strings.Join(got, " ") != want {
		t.Errorf("converted %s, want %s (as vLLM converts it)", got, want)
	}
}

func TestMessagesErrors(t *testing.T) {
	ts, sim := start(t, Config{APIKey: "sk", MaxModelLen: 10})
	key := []string{"X-Api-Key", "sk"}
	tool := `[{"name":"f","input_schema":{"type":"object"}}]`
	tests := []struct {
		name, body string
		status     int
		typ, want  string
	}{
		{"no max_tokens", `{"model":"c","messages":[{"role":"user","content":"hi"}]}`, 400, "invalid_request_error", "max_tokens: Field required"},
		{"max_tokens 0", `{"model":"c","max_tokens":0,"messages":[{"role":"user","content":"hi"}]}`, 400, "invalid_request_error", "max_tokens must be positive"},
		{"no model", `{"max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`, 400, "invalid_request_error", "model: Field required"},
		{"no messages", `{"model":"c","max_tokens":5}`, 400, "invalid_request_error", "messages: Field required"},
		{"bad role", `{"model":"c","max_tokens":5,"messages":[{"role":"tool","content":"hi"}]}`, 400, "invalid_request_error", "messages[0].role"},
		{"bad block", `{"model":"c","max_tokens":5,"messages":[{"role":"user","content":[{"type":"video"}]}]}`, 400, "invalid_request_error", "messages[0].content[0].type"},
		{"tool without input_schema", `{"model":"c","max_tokens":5,"tools":[{"name":"f"}],"messages":[{"role":"user","content":"hi"}]}`, 400, "invalid_request_error", "tools[0].input_schema: Field required"},
		{"tool_choice tool without name", `{"model":"c","max_tokens":5,"tools":` + tool + `,"tool_choice":{"type":"tool"},"messages":[{"role":"user","content":"hi"}]}`, 400, "invalid_request_error", "tool_choice.name is required"},
		{"tool_choice of no tool", `{"model":"c","max_tokens":5,"tools":` + tool + `,"tool_choice":{"type":"tool","name":"g"},"messages":[{"role":"user","content":"hi"}]}`, 400, "invalid_request_error", "does not match"},
		{"tool_choice without tools", `{"model":"c","max_tokens":5,"tool_choice":{"type":"any"},"messages":[{"role":"user","content":"hi"}]}`, 400, "invalid_request_error", "`tools` must be set"},
		{"beyond the context", `{"model":"c","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}`, 400, "invalid_request_error", "maximum context length is 10 tokens"},
		{"malformed", `{"model":`, 400, "invalid_request_error", "invalid JSON"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, b := post(t, ts.URL, "/v1/messages", tt.body, key...)
			if status != tt.status {
				t.Fatalf("status %d: %s", status, b)
			}
			e := decode[anthropicError](t, b)
			requireKeys(t, b, "type", "error.type", "error.message")
			if e.Type != "error" || e.Error.Type != tt.typ || !strings.Contains(e.Error.Message, tt.want) {
				t.Errorf("error %s, want type %s and %q", b, tt.typ, tt.want)
			}
		})
	}
	// The key as x-api-key or as a bearer token; neither is a 401.
	body := `{"model":"c","max_tokens":2,"messages":[{"role":"user","content":"hi"}]}`
	for _, h := range [][]string{key, {"Authorization", "Bearer sk"}} {
		if status, b := post(t, ts.URL, "/v1/messages", body, h...); status != 200 {
			t.Errorf("with %s: %d %s", h[0], status, b)
		}
	}
	for _, h := range [][]string{nil, {"X-Api-Key", "wrong"}} {
		if status, b := post(t, ts.URL, "/v1/messages", body, h...); status != 401 || string(b) != `{"error":"Unauthorized"}` {
			t.Errorf("with %v: %d %s", h, status, b)
		}
	}
	// Injected failures take Anthropic's shape and types.
	for _, f := range []struct {
		patch  string
		status int
		typ    string
	}{{`{"error_rate":1}`, 500, "api_error"}, {`{"error_rate":1,"error_status":529}`, 529, "overloaded_error"}, {`{"error_rate":1,"error_status":429}`, 429, "rate_limit_error"}} {
		do(t, http.MethodPost, ts.URL+"/sim/config", f.patch)
		status, b := post(t, ts.URL, "/v1/messages", body, key...)
		if e := decode[anthropicError](t, b); status != f.status || e.Type != "error" || e.Error.Type != f.typ {
			t.Errorf("%s: %d %s", f.patch, status, b)
		}
	}
	do(t, http.MethodPost, ts.URL+"/sim/config", `{"error_rate":0,"error_after":2}`)
	_, b := post(t, ts.URL, "/v1/messages", strings.Replace(body, "{", `{"stream":true,`, 1), key...)
	evs := parseEvents(t, b)
	if last := evs[len(evs)-1]; last.Name != "error" || !strings.Contains(string(last.Data), `"type":"api_error"`) ||
		strings.Count(string(b), "content_block_delta\n") != 2 {
		t.Errorf("error_after stream: %s", b)
	}
	checkAccounting(t, sim.Stats())
}

func TestMessagesOffAndCountTokens(t *testing.T) {
	ts, sim := start(t, Config{})
	body := `{"model":"c","messages":[{"role":"user","content":"hello there"}]}`
	b := mustPost(t, ts.URL, "/v1/messages/count_tokens", body)
	if string(b) != `{"input_tokens":6}` {
		t.Errorf("count_tokens %s", b)
	}
	// With tools, the prompt grows as the answer's input_tokens does.
	withTools := `{"model":"c","max_tokens":3,"tools":[{"name":"f","input_schema":{"type":"object","properties":{"q":{"type":"string"}}}}],"tool_choice":{"type":"none"},"messages":[{"role":"user","content":"hello there"}]}`
	n := decode[map[string]int](t, mustPost(t, ts.URL, "/v1/messages/count_tokens", withTools))["input_tokens"]
	if m := decode[sdkMessage](t, mustPost(t, ts.URL, "/v1/messages", withTools)); n <= 6 || m.Usage.InputTokens != n {
		t.Errorf("count_tokens %d, answer's input_tokens %d", n, m.Usage.InputTokens)
	}
	if status, b := post(t, ts.URL, "/v1/messages/count_tokens", `{"model":"c"}`); status != 400 || !strings.Contains(string(b), `"type":"error"`) {
		t.Errorf("invalid count_tokens: %d %s", status, b)
	}

	do(t, http.MethodPost, ts.URL+"/sim/config", `{"no_messages":true}`)
	for _, p := range []string{"/v1/messages", "/v1/messages/count_tokens"} {
		if status, b := post(t, ts.URL, p, body); status != 404 || string(b) != `{"detail":"Not Found"}` {
			t.Errorf("no_messages: POST %s: %d %s", p, status, b)
		}
	}
	if _, b := do(t, http.MethodGet, ts.URL+"/sim/config", ""); !strings.Contains(string(b), `"no_messages":true`) {
		t.Errorf("config %s", b)
	}
	do(t, http.MethodPost, ts.URL+"/sim/config", `{"no_messages":false}`)
	if status, _ := post(t, ts.URL, "/v1/messages/count_tokens", body); status != 200 {
		t.Errorf("served again: %d", status)
	}
	if e := sim.Stats().Endpoints["/v1/messages/count_tokens"]; e.Requests != 4 || e.Completed != 3 || e.Rejected != 1 {
		t.Errorf("count_tokens stats %+v", e)
	}
}

// samePtr tells whether a and b are both nil or point to equal values.
func samePtr[T comparable](a, b *T) bool {
	return a == nil && b == nil || a != nil && b != nil && *a == *b
}
