package ollama

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
)

// Lines as Ollama 0.x writes them.
const (
	lineHel  = `{"model":"qwen2.5:7b","created_at":"2025-01-01T10:00:00.000000Z","message":{"role":"assistant","content":"Hel"},"done":false}` + "\n"
	lineLo   = `{"model":"qwen2.5:7b","created_at":"2025-01-01T10:00:00.100000Z","message":{"role":"assistant","content":"lo"},"done":false}` + "\n"
	lineDone = `{"model":"qwen2.5:7b","created_at":"2025-01-01T10:00:00.200000Z","message":{"role":"assistant","content":""},"done_reason":"stop","done":true,"total_duration":2146237500,"load_duration":10912083,"prompt_eval_count":26,"prompt_eval_duration":120000000,"eval_count":2,"eval_duration":200000000}` + "\n"
	// lineDoneBare has no counts at all.
	lineDoneBare = `{"model":"qwen2.5:7b","created_at":"2025-01-01T10:00:00.200000Z","message":{"role":"assistant","content":""},"done_reason":"stop","done":true,"total_duration":2146237500}` + "\n"
	// lineDoneCached omits prompt_eval_count: the prompt was cached (0).
	lineDoneCached = `{"model":"qwen2.5:7b","message":{"role":"assistant","content":""},"done_reason":"length","done":true,"eval_count":2,"eval_duration":200000000}` + "\n"
)

func ndjsonHandler(status int, parts ...string) http.HandlerFunc {
	return protocoltest.Handler(status, "application/x-ndjson", parts...)
}

func testRequest(base string) *protocols.Request {
	return &protocols.Request{
		BaseURL: base, Model: "qwen2.5:7b", Temperature: protocoltest.Float(0.3), MaxTokens: 64, APIKey: "k",
		Messages: []api.Message{{Role: api.RoleUser, Content: "Say hello"}},
	}
}

func TestChat(t *testing.T) {
	cases := []struct {
		name       string
		status     int
		parts      []string
		content    string
		finish     string
		usage      api.Usage
		usageKnown bool
		kind       protocols.Kind // 0: success
		started    bool
		msg        string
	}{
		{"usage on the done line", 200, []string{lineHel, lineLo, lineDone}, "Hello", "stop", api.Usage{PromptTokens: 26, CompletionTokens: 2, TotalTokens: 28}, true, 0, false, ""},
		{"no counts: usage unknown", 200, []string{lineHel, lineLo, lineDoneBare}, "Hello", "stop", api.Usage{}, false, 0, false, ""},
		{"cached prompt: missing count is 0", 200, []string{lineHel, lineLo, lineDoneCached}, "Hello", "length", api.Usage{CompletionTokens: 2, TotalTokens: 2}, true, 0, false, ""},
		{"CRLF and blank lines", 200, []string{strings.ReplaceAll(lineHel, "\n", "\r\n"), "\n", lineLo, lineDone}, "Hello", "stop", api.Usage{PromptTokens: 26, CompletionTokens: 2, TotalTokens: 28}, true, 0, false, ""},
		{"one line split across writes", 200, []string{lineHel[:20], lineHel[20:], lineLo, lineDone[:50], lineDone[50:]}, "Hello", "stop", api.Usage{PromptTokens: 26, CompletionTokens: 2, TotalTokens: 28}, true, 0, false, ""},
		{"done line without trailing newline", 200, []string{lineHel, strings.TrimSuffix(lineDone, "\n")}, "Hel", "stop", api.Usage{PromptTokens: 26, CompletionTokens: 2, TotalTokens: 28}, true, 0, false, ""},
		{"mid-stream error line under 200", 200, []string{lineHel, `{"error":"an error was encountered while running the model: CUDA error"}` + "\n"}, "", "", api.Usage{}, false, protocols.KindServer, true, "CUDA error"},
		{"error before any content", 200, []string{`{"error":"model requires more system memory"}` + "\n"}, "", "", api.Usage{}, false, protocols.KindServer, false, "more system memory"},
		{"cut before done", 200, []string{lineHel, lineLo}, "", "", api.Usage{}, false, protocols.KindProtocol, true, "ended before done"},
		{"malformed line", 200, []string{lineHel, "{nope\n"}, "", "", api.Usage{}, false, protocols.KindProtocol, true, "malformed"},
		{"503 queue full", 503, []string{`{"error":"server busy, please try again.  maximum pending requests exceeded"}`}, "", "", api.Usage{}, false, protocols.KindOverloaded, false, "server busy"},
		{"404 model not found", 404, []string{`{"error":"model \"qwen9\" not found, try pulling it first"}`}, "", "", api.Usage{}, false, protocols.KindServer, false, "not found"},
		{"400 context", 400, []string{`{"error":"input length exceeds the context length"}`}, "", "", api.Usage{}, false, protocols.KindBadRequest, false, "exceeds the context length"},
	}
	for _, tc := range cases {
		for _, stream := range []bool{false, true} {
			t.Run(tc.name+map[bool]string{true: "/stream"}[stream], func(t *testing.T) {
				t.Parallel()
				var got struct {
					path, auth string
					body       map[string]any
				}
				h := ndjsonHandler(tc.status, tc.parts...)
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
				if got.path != "/api/chat" || got.auth != "Bearer k" || got.body["stream"] != true ||
					got.body["model"] != "qwen2.5:7b" {
					t.Errorf("request: path %q auth %q body %v", got.path, got.auth, got.body)
				}
				if o, _ := got.body["options"].(map[string]any); o["temperature"] != 0.3 || o["num_predict"] != float64(64) {
					t.Errorf("options = %v", got.body["options"])
				}
				if tc.kind != 0 {
					var be *protocols.Error
					if !errors.As(err, &be) || be.Kind != tc.kind || be.Started != tc.started ||
						!strings.Contains(be.Message, tc.msg) || res != nil {
						t.Fatalf("err = %#v, res %v; want kind %v started %v message ~%q", err, res, tc.kind, tc.started, tc.msg)
					}
					if tc.status != 200 && be.Status != tc.status {
						t.Errorf("status = %d, want %d", be.Status, tc.status)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				if res.Content != tc.content || res.FinishReason != tc.finish || res.Usage != tc.usage || res.UsageKnown != tc.usageKnown {
					t.Errorf("result = %+v", res)
				}
				if stream && strings.Join(deltas, "") != tc.content {
					t.Errorf("deltas %q, want %q", deltas, tc.content)
				}
				if res.Sent.IsZero() || res.FirstByte.Before(res.Sent) || res.Done.Before(res.FirstByte) {
					t.Errorf("times: sent %v first %v done %v", res.Sent, res.FirstByte, res.Done)
				}
			})
		}
	}
}

func TestChatConnectionRefused(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	_, err := (&Protocol{}).Chat(t.Context(), nil, testRequest(url), nil)
	var be *protocols.Error
	if !errors.As(err, &be) || be.Kind != protocols.KindConnect {
		t.Fatalf("err = %v, want KindConnect", err)
	}
}

// An error from onDelta stops the stream and is returned as is.
func TestChatDeltaError(t *testing.T) {
	srv := httptest.NewServer(ndjsonHandler(200, lineHel, lineLo, lineDone))
	defer srv.Close()
	stop := errors.New("client gone")
	_, err := (&Protocol{}).Chat(t.Context(), srv.Client(), testRequest(srv.URL), func(*protocols.Delta) error { return stop })
	if err != stop {
		t.Fatalf("err = %v, want %v", err, stop)
	}
}

func TestChatLineTooLong(t *testing.T) {
	srv := httptest.NewServer(ndjsonHandler(200, lineHel, `{"message":{"content":"`+strings.Repeat("x", 200)+`"}}`+"\n"))
	defer srv.Close()
	_, err := (&Protocol{MaxLineBytes: 128}).Chat(t.Context(), srv.Client(), testRequest(srv.URL), nil)
	var be *protocols.Error
	if !errors.As(err, &be) || be.Kind != protocols.KindProtocol || !strings.Contains(be.Message, "longer than 128") {
		t.Fatalf("err = %v", err)
	}
}
