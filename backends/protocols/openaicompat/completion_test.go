package openaicompat

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/backends/protocols"
	"github.com/llmedge/llmedge/wire"
)

func TestChatNonStreamed(t *testing.T) {
	cases := []struct {
		name           string
		backend        Protocol
		body           string
		wantContent    string
		wantFinish     string
		wantUsage      api.Usage
		wantUsageKnown bool
		wantKind       protocols.Kind
		wantMsg        string
	}{
		{
			name:        "vLLM completion with usage",
			body:        `{"id":"chatcmpl-1","object":"chat.completion","created":1735689600,"model":"Qwen/Qwen2.5-7B-Instruct","choices":[{"index":0,"message":{"role":"assistant","content":"Hello!","tool_calls":[]},"logprobs":null,"finish_reason":"stop","stop_reason":null}],"usage":{"prompt_tokens":21,"total_tokens":24,"completion_tokens":3},"prompt_logprobs":null}`,
			wantContent: "Hello!", wantFinish: "stop",
			wantUsage: api.Usage{PromptTokens: 21, CompletionTokens: 3, TotalTokens: 24}, wantUsageKnown: true,
		},
		{
			name:        "no usage",
			body:        `{"choices":[{"index":0,"message":{"role":"assistant","content":"Hi"},"finish_reason":"length"}]}`,
			wantContent: "Hi", wantFinish: "length",
		},
		{
			name:        "null usage and null content",
			body:        `{"choices":[{"index":0,"message":{"role":"assistant","content":null},"finish_reason":"stop"}],"usage":null}`,
			wantContent: "", wantFinish: "stop",
		},
		{
			name:     "malformed JSON",
			body:     `{"choices":[{"index":0,"message":`,
			wantKind: protocols.KindProtocol, wantMsg: "malformed JSON",
		},
		{
			name:     "not an object",
			body:     `<html>ok</html>`,
			wantKind: protocols.KindProtocol, wantMsg: "malformed JSON",
		},
		{
			name:     "no choices",
			body:     `{"id":"x","choices":[]}`,
			wantKind: protocols.KindProtocol, wantMsg: "no choices",
		},
		{
			name:     "error object under 200",
			body:     `{"error":{"message":"engine crashed","type":"InternalServerError","code":500}}`,
			wantKind: protocols.KindServer, wantMsg: "engine crashed",
		},
		{
			name:     "body over the limit",
			backend:  Protocol{MaxBodyBytes: 64},
			body:     `{"choices":[{"index":0,"message":{"content":"` + strings.Repeat("z", 100) + `"}}]}`,
			wantKind: protocols.KindProtocol, wantMsg: "larger than 64 bytes",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(bodyHandler(http.StatusOK, "application/json", tc.body))
			defer srv.Close()
			b := tc.backend
			res, err := b.Chat(t.Context(), srv.Client(), testRequest(srv.URL), nil)
			if tc.wantKind != 0 {
				checkError(t, err, tc.wantKind, http.StatusOK, false, tc.wantMsg)
				return
			}
			if err != nil {
				t.Fatalf("Chat: %v", err)
			}
			if res.Content != tc.wantContent || res.FinishReason != tc.wantFinish {
				t.Errorf("got %q/%q, want %q/%q", res.Content, res.FinishReason, tc.wantContent, tc.wantFinish)
			}
			if res.UsageKnown != tc.wantUsageKnown || res.Usage != tc.wantUsage {
				t.Errorf("Usage = %+v known=%v, want %+v known=%v", res.Usage, res.UsageKnown, tc.wantUsage, tc.wantUsageKnown)
			}
			checkTimes(t, res)
		})
	}
}

func TestUsageToAPI(t *testing.T) {
	n := func(v int) wire.Count { return wire.Count{N: v, Given: true} }
	cases := []struct {
		in    wire.Usage
		want  api.Usage
		known bool
	}{
		{wire.Usage{}, api.Usage{}, false},
		{wire.Usage{Given: true}, api.Usage{}, false},
		{wire.Usage{Given: true, PromptTokens: n(3), CompletionTokens: n(4)}, api.Usage{PromptTokens: 3, CompletionTokens: 4, TotalTokens: 7}, true},
		{wire.Usage{Given: true, PromptTokens: n(3), CompletionTokens: n(4), TotalTokens: n(9)}, api.Usage{PromptTokens: 3, CompletionTokens: 4, TotalTokens: 9}, true},
		{wire.Usage{Given: true, CompletionTokens: n(4)}, api.Usage{CompletionTokens: 4}, true},
		{wire.Usage{Given: true, PromptTokens: n(0), CompletionTokens: n(0), TotalTokens: n(0)}, api.Usage{}, true},
	}
	for i, tc := range cases {
		got, known := usage(tc.in)
		if got != tc.want || known != tc.known {
			t.Errorf("%d: got %+v %v, want %+v %v", i, got, known, tc.want, tc.known)
		}
	}
}
