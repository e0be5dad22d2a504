package nativeapi

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/backends/protocols"
	"github.com/llmedge/llmedge/backends/protocols/protocoltest"
	"github.com/llmedge/llmedge/wire"
)

// Events as llmedge (or a FastAPI twin) writes them.
const (
	evHel  = "data: {\"content\":\"Hel\"}\n\n"
	evLo   = "data: {\"content\":\"lo\"}\n\n"
	evPing = ": ping\n\n"
	evDone = "event: done\ndata: {\"content\":\"Hello\",\"model_type\":\"qwen\",\"usage\":{\"prompt_tokens\":12,\"completion_tokens\":2,\"total_tokens\":14},\"processing_time\":0.5,\"inference_time\":0.4,\"message_count\":1}\n\n"
	// evDoneUnknown is a done event whose replica did not know usage.
	evDoneUnknown = "event: done\ndata: {\"content\":\"Hello\",\"model_type\":\"qwen\",\"usage\":{\"prompt_tokens\":0,\"completion_tokens\":0,\"total_tokens\":0},\"usage_reported\":false,\"processing_time\":0.5,\"inference_time\":0.4,\"message_count\":1}\n\n"
	evError       = "event: error\ndata: {\"detail\":\"The replicas of model 'qwen' failed to answer (protocol error)\"}\n\n"
)

func testRequest(base string) *protocols.Request {
	return &protocols.Request{
		BaseURL: base, Model: "qwen", Temperature: protocoltest.Float(0.3), APIKey: "k",
		Messages: []api.Message{{Role: api.RoleUser, Content: "Say hello"}},
	}
}

func TestChat(t *testing.T) {
	const sse = "text/event-stream; charset=utf-8"
	full := api.Usage{PromptTokens: 12, CompletionTokens: 2, TotalTokens: 14}
	cases := []struct {
		name        string
		status      int
		contentType string
		parts       []string
		content     string
		usage       api.Usage
		usageKnown  bool
		kind        protocols.Kind // 0: success
		started     bool
		msg         string
	}{
		{"deltas then done", 200, sse, []string{evPing, evHel, evLo, evDone}, "Hello", full, true, 0, false, ""},
		{"usage not reported", 200, sse, []string{evHel, evLo, evDoneUnknown}, "Hello", api.Usage{}, false, 0, false, ""},
		{"no space after data:, CRLF", 200, sse, []string{"data:{\"content\":\"Hel\"}\r\n\r\n", evDone}, "Hel", full, true, 0, false, ""},
		{"event: error mid-stream", 200, sse, []string{evHel, evError}, "", api.Usage{}, false, protocols.KindServer, true, "failed to answer"},
		{"cut before done", 200, sse, []string{evHel, evLo}, "", api.Usage{}, false, protocols.KindProtocol, true, "before event: done"},
		{"malformed delta", 200, sse, []string{"data: {\"content\":\n\n"}, "", api.Usage{}, false, protocols.KindProtocol, false, "malformed"},
		{"422 FastAPI validation", 422, "application/json", []string{`{"detail":[{"type":"too_short","loc":["body","messages"],"msg":"List should have at least 1 item after validation, not 0","input":[]}]}`}, "", api.Usage{}, false, protocols.KindBadRequest, false, "at least 1 item"},
		{"422 replica context length", 422, "application/json", []string{`{"detail":"The model rejected the request: maximum context length is 8 tokens"}`}, "", api.Usage{}, false, protocols.KindBadRequest, false, "maximum context length"},
		{"429 saturated", 429, "application/json", []string{`{"detail":"Every replica of model 'qwen' is at capacity; retry later"}`}, "", api.Usage{}, false, protocols.KindOverloaded, false, "at capacity"},
		{"503 no replica", 503, "application/json", []string{`{"detail":"No healthy replica is available for model 'qwen'"}`}, "", api.Usage{}, false, protocols.KindOverloaded, false, "No healthy replica"},
		{"401 bad key", 401, "application/json", []string{`{"detail":"Could not validate credentials"}`}, "", api.Usage{}, false, protocols.KindServer, false, "Could not validate"},
		{"502", 502, "application/json", []string{`{"detail":"The replicas of model 'qwen' failed to answer"}`}, "", api.Usage{}, false, protocols.KindServer, false, "failed to answer"},
	}
	for _, tc := range cases {
		for _, stream := range []bool{false, true} {
			t.Run(tc.name+map[bool]string{true: "/stream"}[stream], func(t *testing.T) {
				t.Parallel()
				var got struct {
					path, auth string
					body       map[string]any
				}
				h := protocoltest.Handler(tc.status, tc.contentType, tc.parts...)
				srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					got.path, got.auth = r.URL.Path, r.Header.Get("Authorization")
					_ = json.NewDecoder(r.Body).Decode(&got.body)
					h(w, r)
				}))
				defer srv.Close()
				var deltas []string
				var onDelta protocols.DeltaFunc
				if stream {
					onDelta = func(d *protocols.Delta) error { deltas = append(deltas, d.Text); return nil }
				}
				res, err := (&Protocol{}).Chat(t.Context(), srv.Client(), testRequest(srv.URL), onDelta)
				if got.path != "/tasks/assistant_inference" || got.auth != "Bearer k" || got.body["stream"] != true ||
					got.body["model_type"] != "qwen" || got.body["temperature"] != 0.3 {
					t.Errorf("request: path %q auth %q body %v", got.path, got.auth, got.body)
				}
				if tc.kind != 0 {
					var be *protocols.Error
					if !errors.As(err, &be) || be.Kind != tc.kind || be.Started != tc.started ||
						!strings.Contains(be.Message, tc.msg) || res != nil || be.Status != tc.status {
						t.Fatalf("err = %#v, res %v; want kind %v started %v status %d message ~%q", err, res, tc.kind, tc.started, tc.status, tc.msg)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				if res.Content != tc.content || res.Usage != tc.usage || res.UsageKnown != tc.usageKnown {
					t.Errorf("result = %+v", res)
				}
				if stream && strings.Join(deltas, "") != tc.content {
					t.Errorf("deltas %q, want %q", deltas, tc.content)
				}
			})
		}
	}
}

func TestChatLineTooLong(t *testing.T) {
	srv := httptest.NewServer(protocoltest.Handler(200, "text/event-stream", evHel, "data: {\"content\":\""+strings.Repeat("x", 200)+"\"}\n\n"))
	defer srv.Close()
	_, err := (&Protocol{MaxLineBytes: 128}).Chat(t.Context(), srv.Client(), testRequest(srv.URL), nil)
	var be *protocols.Error
	if !errors.As(err, &be) || be.Kind != protocols.KindProtocol || !be.Started {
		t.Fatalf("err = %v", err)
	}
}

// What the native API cannot carry of an OpenAI chat request is refused,
// naming the member and the protocol; what it ignores or carries passes.
func TestNativeRefuses(t *testing.T) {
	for _, tc := range []struct{ members, param string }{
		{`"top_p":0.9`, "top_p"},
		{`"stop":["x"]`, "stop"},
		{`"seed":1`, "seed"},
		{`"tools":[{"type":"function","function":{"name":"f"}}]`, "tools"},
		{`"response_format":{"type":"json_object"}`, "response_format"},
		{`"logprobs":true`, "logprobs"},
		{`"n":2`, "n"},
		{`"top_p":1,"stop":[],"max_tokens":5,"temperature":0.2,"n":1,"tools":[],"stream_options":{"include_usage":true}`, ""},
	} {
		body := `{"model":"m","messages":[{"role":"user","content":"x"}],` + tc.members + `}`
		var o wire.Request
		if err := wire.ReadRequest([]byte(body), &o); err != nil {
			t.Fatal(err)
		}
		req := &protocols.Request{Wire: &api.Wire{Format: api.FormatOpenAIChat, Body: []byte(body), Object: o.Body, Members: o.Members}}
		err := protocols.Refuse(req, "native", carried, protocols.TextOnly)
		if tc.param == "" {
			if err != nil {
				t.Errorf("%s: refused %v", tc.members, err)
			}
			continue
		}
		if err == nil || err.Kind != protocols.KindUnsupported || err.Param != tc.param ||
			!strings.Contains(err.Message, "the native protocol, which cannot carry '"+tc.param+"'") {
			t.Errorf("%s: %v", tc.members, err)
		}
	}
	for _, msgs := range []string{
		`[{"role":"tool","tool_call_id":"c","content":"1"}]`,
		`[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:;base64,AA=="}}]}]`,
		`[{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]}]`,
	} {
		var c wire.Chat
		if err := wire.ReadChat([]byte(`{"messages":`+msgs+`}`), &c); err != nil {
			t.Fatal(err)
		}
		w := &api.Wire{Format: api.FormatOpenAIChat, Members: c.Members}
		for _, it := range c.Items {
			w.Messages = append(w.Messages, it.Value)
		}
		err := protocols.Refuse(&protocols.Request{Wire: w}, "native", carried, protocols.TextOnly)
		if err == nil || err.Param != "messages[0]" || !strings.Contains(err.Message, "native protocol") {
			t.Errorf("%s: %v", msgs, err)
		}
	}
}
