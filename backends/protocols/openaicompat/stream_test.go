package openaicompat

import (
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/backends/protocols"
)

// Exact bytes of each engine's stream, as docs/engines.md describes them.
var (
	vllmStream = []string{
		`data: {"id":"chatcmpl-7f3a","object":"chat.completion.chunk","created":1735689600,"model":"Qwen/Qwen2.5-7B-Instruct","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}` + "\n\n",
		`data: {"id":"chatcmpl-7f3a","object":"chat.completion.chunk","created":1735689600,"model":"Qwen/Qwen2.5-7B-Instruct","choices":[{"index":0,"delta":{"content":"Hel"},"logprobs":null,"finish_reason":null}]}` + "\n\n",
		`data: {"id":"chatcmpl-7f3a","object":"chat.completion.chunk","created":1735689600,"model":"Qwen/Qwen2.5-7B-Instruct","choices":[{"index":0,"delta":{"content":"lo!"},"logprobs":null,"finish_reason":null}]}` + "\n\n",
		`data: {"id":"chatcmpl-7f3a","object":"chat.completion.chunk","created":1735689600,"model":"Qwen/Qwen2.5-7B-Instruct","choices":[{"index":0,"delta":{"content":""},"logprobs":null,"finish_reason":"stop","stop_reason":null}]}` + "\n\n",
		`data: {"id":"chatcmpl-7f3a","object":"chat.completion.chunk","created":1735689600,"model":"Qwen/Qwen2.5-7B-Instruct","choices":[],"usage":{"prompt_tokens":21,"total_tokens":24,"completion_tokens":3}}` + "\n\n",
		"data: [DONE]\n\n",
	}
	tgiStream = []string{
		`data:{"object":"chat.completion.chunk","id":"","created":1735689600,"model":"google/gemma-2-9b-it","system_fingerprint":"3.1.0-native","choices":[{"index":0,"delta":{"role":"assistant","content":"Hel"},"logprobs":null,"finish_reason":null}],"usage":null}` + "\n\n",
		":\n\n",
		": keep-alive\n\n",
		`data:{"object":"chat.completion.chunk","id":"","created":1735689600,"model":"google/gemma-2-9b-it","system_fingerprint":"3.1.0-native","choices":[{"index":0,"delta":{"role":"assistant","content":"lo"},"logprobs":null,"finish_reason":null}],"usage":null}` + "\n\n",
		`data:{"object":"chat.completion.chunk","id":"","created":1735689600,"model":"google/gemma-2-9b-it","system_fingerprint":"3.1.0-native","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":9,"completion_tokens":2,"total_tokens":11}}` + "\n\n",
		"data:[DONE]\n\n",
	}
	llamacppStream = []string{
		`data: {"choices":[{"finish_reason":null,"index":0,"delta":{"role":"assistant","content":null}}],"created":1735689600,"id":"chatcmpl-Xk2q","model":"gpt-3.5-turbo","system_fingerprint":"b4500-adc5dd92","object":"chat.completion.chunk"}` + "\n\n",
		`data: {"choices":[{"finish_reason":null,"index":0,"delta":{"content":"Hi"}}],"created":1735689600,"id":"chatcmpl-Xk2q","model":"gpt-3.5-turbo","system_fingerprint":"b4500-adc5dd92","object":"chat.completion.chunk"}` + "\n\n",
		`data: {"choices":[{"finish_reason":"length","index":0,"delta":{}}],"created":1735689600,"id":"chatcmpl-Xk2q","model":"gpt-3.5-turbo","system_fingerprint":"b4500-adc5dd92","object":"chat.completion.chunk","usage":{"completion_tokens":1,"prompt_tokens":10,"total_tokens":11},"timings":{"prompt_n":10,"prompt_ms":12.5,"predicted_n":1,"predicted_ms":8.1}}` + "\n\n",
		"data: [DONE]\n\n",
	}
)

// chunk is a minimal content chunk with the given delta and finish reason.
func chunk(content, finish string) string {
	fr := "null"
	if finish != "" {
		fr = `"` + finish + `"`
	}
	return `data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"` + content + `"},"finish_reason":` + fr + `}]}` + "\n\n"
}

type streamCase struct {
	name    string
	backend Protocol
	parts   []string
	// success
	wantDeltas     []string
	wantFinish     string
	wantUsage      api.Usage
	wantUsageKnown bool
	// failure (wantKind != 0)
	wantKind    protocols.Kind
	wantStarted bool
	wantMsg     string
}

var streamCases = []streamCase{
	{
		name:       "vLLM separate usage chunk",
		parts:      vllmStream,
		wantDeltas: []string{"Hel", "lo!"}, wantFinish: "stop",
		wantUsage: api.Usage{PromptTokens: 21, CompletionTokens: 3, TotalTokens: 24}, wantUsageKnown: true,
	},
	{
		name:       "TGI no space, keep-alives, empty id, usage on finishing chunk",
		parts:      tgiStream,
		wantDeltas: []string{"Hel", "lo"}, wantFinish: "stop",
		wantUsage: api.Usage{PromptTokens: 9, CompletionTokens: 2, TotalTokens: 11}, wantUsageKnown: true,
	},
	{
		name:       "llama.cpp null content, usage and timings on finishing chunk",
		parts:      llamacppStream,
		wantDeltas: []string{"Hi"}, wantFinish: "length",
		wantUsage: api.Usage{PromptTokens: 10, CompletionTokens: 1, TotalTokens: 11}, wantUsageKnown: true,
	},
	{
		name:       "usage on the finishing chunk",
		parts:      []string{chunk("A", ""), `data: {"choices":[{"index":0,"delta":{"content":"B"},"finish_reason":"stop"}],"usage":{"prompt_tokens":4,"completion_tokens":2,"total_tokens":6}}` + "\n\n", "data: [DONE]\n\n"},
		wantDeltas: []string{"A", "B"}, wantFinish: "stop",
		wantUsage: api.Usage{PromptTokens: 4, CompletionTokens: 2, TotalTokens: 6}, wantUsageKnown: true,
	},
	{
		name: "last non-null usage wins",
		parts: []string{
			`data: {"choices":[{"index":0,"delta":{"content":"A"}}],"usage":{"prompt_tokens":4,"completion_tokens":1,"total_tokens":5}}` + "\n\n",
			`data: {"choices":[{"index":0,"delta":{"content":"B"},"finish_reason":"stop"}],"usage":{"prompt_tokens":4,"completion_tokens":2}}` + "\n\n",
			`data: {"choices":[],"usage":null}` + "\n\n",
			"data: [DONE]\n\n",
		},
		wantDeltas: []string{"A", "B"}, wantFinish: "stop",
		wantUsage: api.Usage{PromptTokens: 4, CompletionTokens: 2, TotalTokens: 6}, wantUsageKnown: true,
	},
	{
		name:       "no usage at all",
		parts:      []string{chunk("A", ""), chunk("B", "stop"), "data: [DONE]\n\n"},
		wantDeltas: []string{"A", "B"}, wantFinish: "stop",
	},
	{
		name:       "finish_reason then end without [DONE] is accepted",
		parts:      []string{chunk("A", ""), chunk("", "stop")},
		wantDeltas: []string{"A"}, wantFinish: "stop",
	},
	{
		name:       "CRLF line ends, id and retry fields, event: message",
		parts:      []string{"retry: 3000\r\nid: 1\r\nevent: message\r\n" + strings.TrimSuffix(chunk("A", ""), "\n\n") + "\r\n\r\n", strings.ReplaceAll(chunk("B", "stop"), "\n", "\r\n"), "data: [DONE]\r\n\r\n"},
		wantDeltas: []string{"A", "B"}, wantFinish: "stop",
	},
	{
		name: "line split across writes",
		parts: []string{
			`data: {"choices":[{"index":0,"delta":{"con`, `tent":"A"}}]}`, "\n", "\n",
			`da`, `ta: {"choices":[{"index":0,"delta":{"content":"B"},"finish_reason":"stop"}]}` + "\n\ndata: [DO", "NE]\n\n",
		},
		wantDeltas: []string{"A", "B"}, wantFinish: "stop",
	},
	{
		name:       "other event types are ignored",
		parts:      []string{"event: ping\ndata: ping\n\n", chunk("A", "stop"), "data: [DONE]\n\n"},
		wantDeltas: []string{"A"}, wantFinish: "stop",
	},
	{
		name:       "nothing after [DONE] is read",
		parts:      []string{chunk("A", "stop"), "data: [DONE]\n\n", "data: {not json\n\n"},
		wantDeltas: []string{"A"}, wantFinish: "stop",
	},
	{
		name:       "empty answer",
		parts:      []string{chunk("", "stop"), "data: [DONE]\n\n"},
		wantDeltas: nil, wantFinish: "stop",
	},
	{
		name:     "llama.cpp error: line mid-stream",
		parts:    []string{llamacppStream[0], llamacppStream[1], `error: {"code":500,"message":"failed to decode the batch","type":"server_error"}` + "\n\n"},
		wantKind: protocols.KindServer, wantStarted: true, wantMsg: "failed to decode the batch",
	},
	{
		name:     "llama.cpp error: line wrapped in error, before any delta",
		parts:    []string{llamacppStream[0], `error: {"error":{"code":400,"message":"the request exceeds the available context size","type":"exceed_context_size_error"}}` + "\n\n"},
		wantKind: protocols.KindServer, wantStarted: false, wantMsg: "exceeds the available context size",
	},
	{
		name:     "vLLM error payload under 200 mid-stream",
		parts:    []string{vllmStream[0], vllmStream[1], `data: {"error": {"object": "error", "message": "CUDA out of memory. Tried to allocate 2.00 GiB", "type": "InternalServerError", "param": null, "code": 500}}` + "\n\n", "data: [DONE]\n\n"},
		wantKind: protocols.KindServer, wantStarted: true, wantMsg: "CUDA out of memory",
	},
	{
		name:     "vLLM new error payload shape before any delta",
		parts:    []string{vllmStream[0], `data: {"error":{"message":"engine dead","type":"EngineDeadError","param":null,"code":500}}` + "\n\n"},
		wantKind: protocols.KindServer, wantStarted: false, wantMsg: "engine dead",
	},
	{
		name:     "flat object:error payload (SGLang)",
		parts:    []string{chunk("A", ""), `data: {"object":"error","message":"scheduler crashed","type":"InternalServerError","param":null,"code":500}` + "\n\n"},
		wantKind: protocols.KindServer, wantStarted: true, wantMsg: "scheduler crashed",
	},
	{
		name:     "event: error",
		parts:    []string{chunk("A", ""), "event: error\ndata: {\"message\":\"worker lost\"}\n\n"},
		wantKind: protocols.KindServer, wantStarted: true, wantMsg: "worker lost",
	},
	{
		name:     "cut before [DONE] after deltas",
		parts:    []string{vllmStream[0], vllmStream[1]},
		wantKind: protocols.KindProtocol, wantStarted: true, wantMsg: "before [DONE]",
	},
	{
		name:     "cut before any delta",
		parts:    []string{vllmStream[0]},
		wantKind: protocols.KindProtocol, wantStarted: false, wantMsg: "before [DONE]",
	},
	{
		name:     "cut mid-line",
		parts:    []string{chunk("A", ""), `data: {"choices":[{"index":0,"delta":{"content":"B`},
		wantKind: protocols.KindProtocol, wantStarted: true, wantMsg: "malformed JSON",
	},
	{
		name:     "malformed chunk JSON",
		parts:    []string{"data: {\"choices\": [\n\n", "data: [DONE]\n\n"},
		wantKind: protocols.KindProtocol, wantStarted: false, wantMsg: "malformed JSON",
	},
	{
		name:     "over-long line with the default limit",
		parts:    []string{chunk("A", ""), "data: " + strings.Repeat("x", DefaultMaxLineBytes+10) + "\n\n", "data: [DONE]\n\n"},
		wantKind: protocols.KindProtocol, wantStarted: true, wantMsg: "longer than",
	},
	{
		name:     "over-long line with a set limit",
		backend:  Protocol{MaxLineBytes: 256},
		parts:    []string{": " + strings.Repeat("k", 300) + "\n\n", "data: [DONE]\n\n"},
		wantKind: protocols.KindProtocol, wantStarted: false, wantMsg: "longer than 256",
	},
	{
		name:     "over-long event made of many data lines",
		backend:  Protocol{MaxLineBytes: 256},
		parts:    []string{strings.Repeat("data: "+strings.Repeat("y", 100)+"\n", 5) + "\n", "data: [DONE]\n\n"},
		wantKind: protocols.KindProtocol, wantStarted: false, wantMsg: "longer than",
	},
}

func TestChatStreamDialects(t *testing.T) {
	for _, tc := range streamCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(sseHandler(tc.parts...))
			defer srv.Close()

			var rec recorder
			b := tc.backend
			res, err := b.Chat(t.Context(), srv.Client(), testRequest(srv.URL), rec.onDelta)
			if tc.wantKind != 0 {
				checkError(t, err, tc.wantKind, http.StatusOK, tc.wantStarted, tc.wantMsg)
				if res != nil {
					t.Errorf("got a result with an error")
				}
				return
			}
			if err != nil {
				t.Fatalf("Chat: %v", err)
			}
			if !reflect.DeepEqual(rec.deltas, tc.wantDeltas) {
				t.Errorf("deltas = %q, want %q", rec.deltas, tc.wantDeltas)
			}
			if want := strings.Join(tc.wantDeltas, ""); res.Content != want {
				t.Errorf("Content = %q, want %q", res.Content, want)
			}
			if res.FinishReason != tc.wantFinish {
				t.Errorf("FinishReason = %q, want %q", res.FinishReason, tc.wantFinish)
			}
			if res.UsageKnown != tc.wantUsageKnown || res.Usage != tc.wantUsage {
				t.Errorf("Usage = %+v known=%v, want %+v known=%v", res.Usage, res.UsageKnown, tc.wantUsage, tc.wantUsageKnown)
			}
			checkTimes(t, res)
		})
	}
}

// A replica that ignores "stream": true and answers with one JSON
// completion is delivered as a single delta.
func TestChatStreamAnsweredWithJSON(t *testing.T) {
	srv := httptest.NewServer(bodyHandler(http.StatusOK, "application/json",
		`{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"Hello"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`))
	defer srv.Close()
	var rec recorder
	res, err := (&Protocol{}).Chat(t.Context(), srv.Client(), testRequest(srv.URL), rec.onDelta)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(rec.deltas, []string{"Hello"}) || res.Content != "Hello" || !res.UsageKnown || res.Usage.TotalTokens != 4 {
		t.Errorf("deltas %q, result %+v", rec.deltas, res)
	}
}

// The first content delta sets FirstByte; the role-only first chunk and
// the response headers do not.
func TestChatStreamFirstByteIsFirstDelta(t *testing.T) {
	const pause = 50 * time.Millisecond
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write([]byte(vllmStream[0]))
		w.(http.Flusher).Flush()
		time.Sleep(pause)
		for _, p := range vllmStream[1:] {
			_, _ = w.Write([]byte(p))
		}
	}))
	defer srv.Close()

	var rec recorder
	res, err := (&Protocol{}).Chat(t.Context(), srv.Client(), testRequest(srv.URL), rec.onDelta)
	if err != nil {
		t.Fatal(err)
	}
	checkTimes(t, res)
	if d := res.FirstByte.Sub(res.Sent); d < pause {
		t.Errorf("FirstByte - Sent = %v, want >= %v (the first content delta)", d, pause)
	}
}
