package ollama

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/backends/protocols"
	"github.com/llmedge/llmedge/backends/protocols/protocoltest"
	"github.com/llmedge/llmedge/wire"
)

// chatWire is body as the OpenAI door carries it through.
func chatWire(t testing.TB, body string) *api.Wire {
	t.Helper()
	var c wire.Chat
	if err := wire.ReadChat([]byte(body), &c); err != nil {
		t.Fatal(err)
	}
	w := &api.Wire{Format: api.FormatOpenAIChat, Body: []byte(body), Object: c.Body, Members: append([]wire.Member(nil), c.Members...)}
	for _, it := range c.Items {
		w.Messages = append(w.Messages, it.Value)
	}
	return w
}

const png1 = "iVBORw0KGgo="

func TestTranslateRequest(t *testing.T) {
	for _, tc := range []struct {
		name string
		// body is the client's; req sets what the door and the model set.
		body string
		req  protocols.Request
		want string // the /api/chat body
	}{
		{name: "text",
			body: `{"model":"llama","messages":[{"role":"developer","content":"Be terse."},{"role":"user","content":[{"type":"text","text":"Say"},{"type":"text","text":"hi"}],"name":"bob"}]}`,
			want: `{"model":"up","messages":[{"role":"system","content":"Be terse."},{"role":"user","content":"Say\nhi"}],"stream":true,"options":{}}`},
		{name: "options",
			body: `{"model":"llama","messages":[{"role":"user","content":"x"}],"temperature":0,"top_p":0.9,"seed":7,"stop":["a"],"max_tokens":50,` +
				`"frequency_penalty":0.5,"presence_penalty":-0.25,"top_k":40,"min_p":0.05,"repetition_penalty":1.1,"n":1,"logprobs":false,"user":"u","stream_options":{"include_usage":true}}`,
			req:  protocols.Request{Temperature: ptr(0.0), TopP: ptr(0.9), Seed: ptr(int64(7)), Stop: []string{"a"}, MaxTokens: 20},
			want: `{"model":"up","messages":[{"role":"user","content":"x"}],"stream":true,"options":{"temperature":0,"top_p":0.9,"seed":7,"stop":["a"],"num_predict":20,"frequency_penalty":0.5,"presence_penalty":-0.25,"top_k":40,"min_p":0.05,"repeat_penalty":1.1}}`},
		{name: "default system message, tools and a schema",
			body: `{"model":"llama","messages":[{"role":"user","content":"weather?"}],"tools":[{"type":"function","function":{"name":"get_weather","description":"d","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]},"strict":true}}],` +
				`"tool_choice":"auto","parallel_tool_calls":false,"response_format":{"type":"json_schema","json_schema":{"name":"w","schema":{"type":"object","properties":{"ok":{"type":"boolean"}}},"strict":true}}}`,
			req: protocols.Request{AddSystem: "You are kind."},
			want: `{"model":"up","messages":[{"role":"system","content":"You are kind."},{"role":"user","content":"weather?"}],"stream":true,` +
				`"tools":[{"type":"function","function":{"name":"get_weather","description":"d","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]},"strict":true}}],` +
				`"format":{"type":"object","properties":{"ok":{"type":"boolean"}}},"options":{}}`},
		{name: "tool_choice none sends no tools; json_object",
			body: `{"model":"llama","messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"none","response_format":{"type":"json_object"}}`,
			want: `{"model":"up","messages":[{"role":"user","content":"x"}],"stream":true,"format":"json","options":{}}`},
		{name: "text format, empty tools",
			body: `{"model":"llama","messages":[{"role":"user","content":"x"}],"tools":[],"response_format":{"type":"text"}}`,
			want: `{"model":"up","messages":[{"role":"user","content":"x"}],"stream":true,"options":{}}`},
		{name: "tool round trip",
			body: `{"model":"llama","messages":[{"role":"user","content":"weather in Paris?"},` +
				`{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}},{"id":"call_2","type":"function","function":{"name":"get_time","arguments":""}}]},` +
				`{"role":"tool","tool_call_id":"call_1","content":"18C"},{"role":"tool","tool_call_id":"call_2","content":[{"type":"text","text":"noon"}]},{"role":"tool","tool_call_id":"zz","name":"legacy","content":"?"}]}`,
			want: `{"model":"up","messages":[{"role":"user","content":"weather in Paris?"},` +
				`{"role":"assistant","content":"","tool_calls":[{"id":"call_1","function":{"index":0,"name":"get_weather","arguments":{"city":"Paris"}}},{"id":"call_2","function":{"index":1,"name":"get_time","arguments":{}}}]},` +
				`{"role":"tool","content":"18C","tool_name":"get_weather","tool_call_id":"call_1"},{"role":"tool","content":"noon","tool_name":"get_time","tool_call_id":"call_2"},{"role":"tool","content":"?","tool_name":"legacy","tool_call_id":"zz"}],"stream":true,"options":{}}`},
		{name: "images, reasoning",
			body: `{"model":"llama","messages":[{"role":"user","content":[{"type":"text","text":"what is it?"},{"type":"image_url","image_url":{"url":"data:image/png;base64,` + png1 + `","detail":"low"}},{"type":"image_url","image_url":"data:;base64,` + png1 + `"}]},` +
				`{"role":"assistant","content":"a pixel","reasoning_content":"it is small"}]}`,
			want: `{"model":"up","messages":[{"role":"user","content":"what is it?","images":["` + png1 + `","` + png1 + `"]},{"role":"assistant","content":"a pixel","thinking":"it is small"}],"stream":true,"options":{}}`},
		{name: "thinking on: no think (Ollama refuses it for a model without thinking); other kwargs dropped",
			body: `{"model":"llama","messages":[{"role":"user","content":"x"}],"chat_template_kwargs":{"enable_thinking":true,"custom":1}}`,
			want: `{"model":"up","messages":[{"role":"user","content":"x"}],"stream":true,"options":{}}`},
		{name: "thinking off",
			body: `{"model":"llama","messages":[{"role":"user","content":"x"}],"chat_template_kwargs":{"enable_thinking":false}}`,
			want: `{"model":"up","messages":[{"role":"user","content":"x"}],"stream":true,"think":false,"options":{}}`},
		{name: "reasoning_effort",
			body: `{"model":"llama","messages":[{"role":"user","content":"x"}],"reasoning_effort":"high"}`,
			want: `{"model":"up","messages":[{"role":"user","content":"x"}],"stream":true,"options":{}}`},
		{name: "enable_thinking true wins over the effort none",
			body: `{"model":"llama","messages":[{"role":"user","content":"x"}],"reasoning_effort":"none","chat_template_kwargs":{"enable_thinking":true}}`,
			want: `{"model":"up","messages":[{"role":"user","content":"x"}],"stream":true,"options":{}}`},
		{name: "reasoning_effort none",
			body: `{"model":"llama","messages":[{"role":"user","content":"x"}],"reasoning_effort":"none"}`,
			want: `{"model":"up","messages":[{"role":"user","content":"x"}],"stream":true,"think":false,"options":{}}`},
		{name: "enable_thinking wins over reasoning_effort, in either order",
			body: `{"model":"llama","messages":[{"role":"user","content":"x"}],"reasoning_effort":"high","chat_template_kwargs":{"enable_thinking":false}}`,
			want: `{"model":"up","messages":[{"role":"user","content":"x"}],"stream":true,"think":false,"options":{}}`},
		{name: "enable_thinking wins after",
			body: `{"model":"llama","messages":[{"role":"user","content":"x"}],"chat_template_kwargs":{"enable_thinking":false},"reasoning_effort":"high"}`,
			want: `{"model":"up","messages":[{"role":"user","content":"x"}],"stream":true,"think":false,"options":{}}`},
		{name: "kwargs without enable_thinking",
			body: `{"model":"llama","messages":[{"role":"user","content":"x"}],"chat_template_kwargs":{"custom":1}}`,
			want: `{"model":"up","messages":[{"role":"user","content":"x"}],"stream":true,"options":{}}`},
		{name: "a continuation: the text so far as the last, assistant message",
			body: `{"model":"llama","messages":[{"role":"user","content":"x"}]}`,
			req:  protocols.Request{Continue: "Once upon"},
			want: `{"model":"up","messages":[{"role":"user","content":"x"},{"role":"assistant","content":"Once upon"}],"stream":true,"options":{}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := tc.req
			req.Model, req.Wire = "up", chatWire(t, tc.body)
			body, err := translate(&req)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := json.Marshal(body)
			if string(got) != tc.want {
				t.Fatalf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

func TestTranslateRefuses(t *testing.T) {
	for _, tc := range []struct{ name, body, param, what string }{
		{"logprobs", `{"logprobs":true}`, "logprobs", "'logprobs'"},
		{"n", `{"n":2}`, "n", "'n'"},
		{"logit_bias", `{"logit_bias":{"1":2}}`, "logit_bias", "'logit_bias'"},
		{"unknown vendor member", `{"guided_json":{}}`, "guided_json", "'guided_json'"},
		{"tool_choice required", `{"tool_choice":"required"}`, "tool_choice", "force a call"},
		{"named tool_choice", `{"tool_choice":{"type":"function","function":{"name":"f"}}}`, "tool_choice", "force a call"},
		{"custom tool", `{"tools":[{"type":"function","function":{"name":"f"}},{"type":"custom","custom":{}}]}`, "tools[1].type", "'custom'"},
		{"structural tag", `{"response_format":{"type":"structural_tag"}}`, "response_format", "'structural_tag'"},
		{"top_k a string", `{"top_k":"40"}`, "top_k", "not a number"},
		{"legacy functions", `{"functions":[{"name":"f"}]}`, "functions", "'functions'"},
		{"kwargs not an object", `{"chat_template_kwargs":[]}`, "chat_template_kwargs", "not an object"},
		{"enable_thinking not a boolean", `{"chat_template_kwargs":{"enable_thinking":"yes"}}`, "chat_template_kwargs.enable_thinking", "not a boolean"},
		{"reasoning_effort not a string", `{"reasoning_effort":1}`, "reasoning_effort", "not a string"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := `{"model":"llama","messages":[{"role":"user","content":"x"}],` + tc.body[1:]
			req := &protocols.Request{Model: "up", Wire: chatWire(t, body)}
			_, err := translate(req)
			checkRefusal(t, err, tc.param, tc.what)
		})
	}
	for _, tc := range []struct{ name, msgs, param, what string }{
		{"image by URL", `[{"role":"user","content":[{"type":"text","text":"x"},{"type":"image_url","image_url":{"url":"https://example.com/cat.png"}}]}]`,
			"messages[0].content[1]", "does not fetch URLs"},
		{"image data not base64", `[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/svg+xml,<svg/>"}}]}]`,
			"messages[0].content[0]", "not base64"},
		{"image base64 malformed", `[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,%%%"}}]}]`,
			"messages[0].content[0]", "malformed"},
		{"audio", `[{"role":"user","content":[{"type":"input_audio","input_audio":{"data":"x","format":"wav"}}]}]`,
			"messages[0].content[0]", "'input_audio'"},
		{"function role", `[{"role":"user","content":"x"},{"role":"function","name":"f","content":"1"}]`, "messages[1].role", "role 'function'"},
		{"legacy function_call", `[{"role":"assistant","content":null,"function_call":{"name":"f","arguments":"{}"}}]`, "messages[0].function_call", "function_call"},
		{"arguments not an object", `[{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"[1]"}}]}]`,
			"messages[0].tool_calls[0].function.arguments", "not a JSON object"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := &protocols.Request{Model: "up", Wire: chatWire(t, `{"model":"llama","messages":`+tc.msgs+`}`)}
			_, err := translate(req)
			checkRefusal(t, err, tc.param, tc.what)
		})
	}
	// The other APIs are refused whole, by name.
	req := &protocols.Request{Model: "up", Wire: &api.Wire{Format: api.FormatOpenAIResponses, Body: []byte(`{}`)}}
	_, err := (&Protocol{}).Chat(context.Background(), nil, req, nil)
	var pe *protocols.Error
	if !errors.As(err, &pe) {
		t.Fatal(err)
	}
	checkRefusal(t, pe, "", "OpenAI's Responses API (/v1/responses)")
}

func checkRefusal(t *testing.T, err *protocols.Error, param, what string) {
	t.Helper()
	if err == nil {
		t.Fatal("accepted")
	}
	if err.Kind != protocols.KindUnsupported || err.Param != param || !strings.Contains(err.Message, what) ||
		!strings.Contains(err.Message, "the ollama protocol") {
		t.Fatalf("got %v %q %q", err.Kind, err.Param, err.Message)
	}
}

// Lines of an answer with a tool call, as Ollama 0.17 writes them.
const (
	lineThink    = `{"model":"qwen3:0.6b","created_at":"2025-01-01T10:00:00Z","message":{"role":"assistant","content":"","thinking":"hmm"},"done":false}` + "\n"
	lineCall     = `{"model":"qwen3:0.6b","created_at":"2025-01-01T10:00:00Z","message":{"role":"assistant","content":"","tool_calls":[{"id":"call_abc","function":{"index":0,"name":"get_weather","arguments":{"city":"Paris"}}},{"function":{"index":1,"name":"get_time","arguments":{}}}]},"done":false}` + "\n"
	lineCallDone = `{"model":"qwen3:0.6b","created_at":"2025-01-01T10:00:00Z","message":{"role":"assistant","content":""},"done":true,"done_reason":"stop","prompt_eval_count":30,"eval_count":12}` + "\n"
)

// chunkOf is a chat.completion.chunk, as an SDK decodes it.
type chunkOf struct {
	ID, Object, Model string
	Choices           []struct {
		Index int
		Delta struct {
			Role, Content, Reasoning string
			ToolCalls                []struct {
				Index    int
				ID, Type string
				Function struct{ Name, Arguments string }
			} `json:"tool_calls"`
		}
		FinishReason *string `json:"finish_reason"`
	}
	Usage *api.Usage
}

func TestTranslateAnswer(t *testing.T) {
	for _, tc := range []struct {
		name  string
		lines []string
		// events are the deltas' data, summarized: role/content/reasoning/tool calls/finish/usage.
		events []string
		whole  string
		finish string
	}{
		{name: "text", lines: []string{lineHel, lineLo, lineDone},
			events: []string{"assistant|Hel", "|lo", "finish stop", "usage 26/2"},
			whole:  `{"role":"assistant","content":"Hello"}|stop|{"prompt_tokens":26,"completion_tokens":2,"total_tokens":28}`, finish: "stop"},
		{name: "cut by num_predict, no counts", lines: []string{lineHel, strings.Replace(lineDoneBare, `"stop"`, `"length"`, 1)},
			events: []string{"assistant|Hel", "finish length", "usage null"},
			whole:  `{"role":"assistant","content":"Hel"}|length|`, finish: "length"},
		{name: "thinking and tool calls", lines: []string{lineThink, lineCall, lineCallDone},
			events: []string{"assistant||hmm", "||call 0 call_abc get_weather {\"city\":\"Paris\"};call 1 call_? get_time {}", "finish tool_calls", "usage 30/12"},
			whole: `{"role":"assistant","content":null,"reasoning":"hmm","tool_calls":[{"id":"call_abc","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}},` +
				`{"id":"call_?","type":"function","function":{"name":"get_time","arguments":"{}"}}]}|tool_calls|{"prompt_tokens":30,"completion_tokens":12,"total_tokens":42}`,
			finish: "tool_calls"},
		{name: "empty reply", lines: []string{lineDone},
			events: []string{"finish stop assistant", "usage 26/2"},
			whole:  `{"role":"assistant","content":""}|stop|{"prompt_tokens":26,"completion_tokens":2,"total_tokens":28}`, finish: "stop"},
	} {
		for _, mode := range []string{"stream", "whole", "stream+whole"} {
			t.Run(tc.name+"/"+mode, func(t *testing.T) {
				srv := httptest.NewServer(ndjsonHandler(200, tc.lines...))
				defer srv.Close()
				req := &protocols.Request{BaseURL: srv.URL, Model: "up", Whole: mode == "stream+whole",
					Wire: chatWire(t, `{"model":"llama","messages":[{"role":"user","content":"x"}]}`)}
				var got []string
				var text strings.Builder
				var onDelta protocols.DeltaFunc
				if mode != "whole" {
					onDelta = func(d *protocols.Delta) error {
						if d.Format != api.FormatOpenAIChat || string(d.Data[d.Model.Start:d.Model.End]) != `"qwen3:0.6b"` && string(d.Data[d.Model.Start:d.Model.End]) != `"qwen2.5:7b"` {
							t.Fatalf("delta %+v %s", d, d.Data)
						}
						text.WriteString(d.Text)
						got = append(got, summarize(t, d))
						return nil
					}
				}
				res, err := (&Protocol{}).Chat(context.Background(), srv.Client(), req, onDelta)
				if err != nil {
					t.Fatal(err)
				}
				if res.FinishReason != tc.finish || (mode != "whole" && res.Content != text.String()) {
					t.Fatalf("result %+v", res)
				}
				if mode != "whole" && !reflect.DeepEqual(got, tc.events) {
					t.Fatalf("events\n got %q\nwant %q", got, tc.events)
				}
				if mode == "stream" {
					if res.Raw != nil {
						t.Fatalf("raw %s", res.Raw)
					}
					return
				}
				var a struct {
					ID, Object, Model string
					Choices           []struct {
						Message      json.RawMessage
						FinishReason string `json:"finish_reason"`
					}
					Usage json.RawMessage
				}
				if err := json.Unmarshal(res.Raw, &a); err != nil || a.Object != "chat.completion" || !strings.HasPrefix(a.ID, "chatcmpl-") ||
					res.Format != api.FormatOpenAIChat || string(res.Raw[res.Model.Start:res.Model.End]) != `"`+a.Model+`"` {
					t.Fatalf("%v %s", err, res.Raw)
				}
				msg := regexpID(string(a.Choices[0].Message))
				if s := msg + "|" + a.Choices[0].FinishReason + "|" + string(a.Usage); s != tc.whole {
					t.Fatalf("whole\n got %s\nwant %s", s, tc.whole)
				}
			})
		}
	}
}

// madeID is an id the translation made up.
var madeID = regexp.MustCompile(`"call_[0-9a-f]{24}"`)

// regexpID hides made-up call ids.
func regexpID(s string) string { return madeID.ReplaceAllString(s, `"call_?"`) }

// summarize renders a translated event for comparison.
func summarize(t *testing.T, d *protocols.Delta) string {
	t.Helper()
	var c chunkOf
	if err := json.Unmarshal(d.Data, &c); err != nil {
		t.Fatalf("%v: %s", err, d.Data)
	}
	if c.Object != "chat.completion.chunk" || !strings.HasPrefix(c.ID, "chatcmpl-") {
		t.Fatalf("head %s", d.Data)
	}
	if len(c.Choices) == 0 {
		if !d.UsageOnly || d.Token {
			t.Fatalf("usage chunk %+v", d)
		}
		if c.Usage == nil {
			return "usage null"
		}
		return "usage " + itoa(c.Usage.PromptTokens) + "/" + itoa(c.Usage.CompletionTokens)
	}
	ch := c.Choices[0]
	if !d.Token || d.UsageOnly {
		t.Fatalf("output chunk %+v", d)
	}
	if ch.FinishReason != nil {
		s := "finish " + *ch.FinishReason
		if ch.Delta.Role != "" {
			s += " " + ch.Delta.Role
		}
		return s
	}
	s := ch.Delta.Role + "|" + ch.Delta.Content
	if ch.Delta.Reasoning != "" {
		s += "|" + ch.Delta.Reasoning
	}
	var calls []string
	for _, tc := range ch.Delta.ToolCalls {
		id := tc.ID
		if id != "call_abc" {
			id = "call_?"
		}
		if tc.Type != "function" {
			t.Fatalf("call %+v", tc)
		}
		calls = append(calls, "call "+itoa(tc.Index)+" "+id+" "+tc.Function.Name+" "+tc.Function.Arguments)
	}
	if calls != nil {
		s += "|" + strings.Join(calls, ";")
	}
	return s
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// The request a translated chat sends, end to end.
func TestTranslatedRequestSent(t *testing.T) {
	var got []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, _ = io.ReadAll(r.Body)
		protocoltest.Handler(200, "application/x-ndjson", lineHel, lineDone)(w, r)
	}))
	defer srv.Close()
	req := &protocols.Request{BaseURL: srv.URL, Model: "up", MaxTokens: 5,
		Wire: chatWire(t, `{"model":"llama","messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_object"}}`)}
	if _, err := (&Protocol{}).Chat(context.Background(), srv.Client(), req, nil); err != nil {
		t.Fatal(err)
	}
	want := `{"model":"up","messages":[{"role":"user","content":"x"}],"stream":true,"format":"json","options":{"num_predict":5}}`
	if string(bytes.TrimSpace(got)) != want {
		t.Fatalf("sent %s", got)
	}
}

// FuzzTranslatedStream checks that any /api/chat answer to a translated
// request ends in a result or a classified error, and that every event
// passed on is a chunk of valid JSON whose model span is its model.
func FuzzTranslatedStream(f *testing.F) {
	for _, s := range []string{
		lineHel + lineLo + lineDone, lineThink + lineCall + lineCallDone, lineDone,
		`{"message":{"tool_calls":[{"function":{"arguments":null}}]},"done":true}` + "\n",
		`{"message":{"content":"\u2028\"<"},"model":"\u00e9"}` + "\n" + lineDone,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, whole := range []bool{false, true} {
			c := newChunker("up", whole)
			res, err := parseStream(context.Background(), bytes.NewReader(data), 512, c, func(d *protocols.Delta) error {
				if !json.Valid(d.Data) {
					t.Fatalf("invalid chunk %s", d.Data)
				}
				var m struct{ Model string }
				if json.Unmarshal(d.Data, &m) != nil || m.Model == "" && string(d.Data[d.Model.Start:d.Model.End]) != `""` {
					t.Fatalf("model at %d:%d of %s", d.Model.Start, d.Model.End, d.Data)
				}
				return nil
			})
			if err != nil {
				var be *protocols.Error
				if !errors.As(err, &be) {
					t.Fatalf("%T %v", err, err)
				}
				continue
			}
			if whole && !json.Valid(res.Raw) {
				t.Fatalf("invalid answer %s", res.Raw)
			}
		}
	})
}
