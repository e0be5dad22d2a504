package openai

import (
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/llmedge/llmedge/api"
)

func testDoor() *Door {
	return New(api.Limits{MaxMessages: 4, MaxContentChars: 20, MaxBodyBytes: 4096}, []string{"qwen", "gemma"})
}

const hi = `"messages":[{"role":"user","content":"hi"}]`

func ptr[T any](v T) *T { return &v }

func TestParseAccepts(t *testing.T) {
	tests := []struct {
		name string
		body string
		want api.Chat
	}{
		{"minimal", `{"model":"qwen",` + hi + `}`,
			api.Chat{Model: "qwen", Messages: []api.Message{{Role: "user", Content: "hi"}}}},
		{"every supported field", `{"model":"gemma",` + hi + `,"temperature":0.5,"top_p":1,"max_tokens":9,"stop":"END",` +
			`"seed":-7,"user":"u-1","n":1,"stream":true,"stream_options":{"include_usage":true}}`,
			api.Chat{Model: "gemma", Messages: []api.Message{{Role: "user", Content: "hi"}}, Stream: true, IncludeUsage: true, User: "u-1",
				Sampling: api.Sampling{Temperature: ptr(0.5), TopP: ptr(1.0), MaxTokens: 9, Stop: []string{"END"}, Seed: ptr(int64(-7))}}},
		{"max_completion_tokens wins over max_tokens", `{"model":"qwen",` + hi + `,"max_tokens":9,"max_completion_tokens":3}`,
			api.Chat{Model: "qwen", Messages: []api.Message{{Role: "user", Content: "hi"}}, Sampling: api.Sampling{MaxTokens: 3}}},
		{"stop array", `{"model":"qwen",` + hi + `,"stop":["a","b"]}`,
			api.Chat{Model: "qwen", Messages: []api.Message{{Role: "user", Content: "hi"}}, Sampling: api.Sampling{Stop: []string{"a", "b"}}}},
		{"nulls are not given", `{"model":"qwen",` + hi + `,"temperature":null,"top_p":null,"max_tokens":null,"stop":null,"seed":null,"user":null,"n":null,"stream":null,"stream_options":null}`,
			api.Chat{Model: "qwen", Messages: []api.Message{{Role: "user", Content: "hi"}}}},
		{"text parts joined, developer is system", `{"model":"qwen","messages":[{"role":"developer","content":"be brief"},` +
			`{"role":"user","content":[{"type":"text","text":"one"},{"type":"text","text":"two"}],"name":"bob"},{"role":"assistant","content":"ok","refusal":null,"tool_calls":[]}]}`,
			api.Chat{Model: "qwen", Messages: []api.Message{{Role: "system", Content: "be brief"}, {Role: "user", Content: "one\ntwo"}, {Role: "assistant", Content: "ok"}}}},
		{"inert fields at their neutral values", `{"model":"qwen",` + hi + `,"frequency_penalty":0,"presence_penalty":0.0,"logprobs":false,` +
			`"logit_bias":{},"tools":[],"tool_choice":"none","parallel_tool_calls":true,"response_format":{"type":"text"},"store":false,` +
			`"metadata":{"k":"v"},"service_tier":"auto","modalities":["text"],"reasoning_effort":null,"safety_identifier":"s","prompt_cache_key":"k"}`,
			api.Chat{Model: "qwen", Messages: []api.Message{{Role: "user", Content: "hi"}}}},
		{"include_usage false, include_obfuscation ignored", `{"model":"qwen",` + hi + `,"stream":true,"stream_options":{"include_usage":false,"include_obfuscation":true}}`,
			api.Chat{Model: "qwen", Messages: []api.Message{{Role: "user", Content: "hi"}}, Stream: true}},
		{"keys spelled with escapes", `{"mod\u0065l":"qwen","messages":[{"r\u006fle":"user","content":"hi"}]}`,
			api.Chat{Model: "qwen", Messages: []api.Message{{Role: "user", Content: "hi"}}}},
		{"content at the limit, written with escapes", `{"model":"qwen","messages":[{"role":"user","content":"` + strings.Repeat(`\u00e9`, 19) + `\\"}]}`,
			api.Chat{Model: "qwen", Messages: []api.Message{{Role: "user", Content: strings.Repeat("é", 19) + `\`}}}},
		{"content at the limit, in characters", `{"model":"qwen","messages":[{"role":"user","content":"ééééééééééééééééééé€"}]}`,
			api.Chat{Model: "qwen", Messages: []api.Message{{Role: "user", Content: "ééééééééééééééééééé€"}}}},
	}
	f := testDoor()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := f.parse([]byte(tt.body))
			if err != nil {
				t.Fatalf("refused: %v (param %q code %q)", err, err.Param, err.Code)
			}
			if got.Wire == nil || got.Wire.Format != api.FormatOpenAIChat || string(got.Wire.Body) != tt.body {
				t.Fatalf("the body is not kept to carry through: %+v", got.Wire)
			}
			got.Wire = nil
			for i, m := range got.Messages {
				got.Messages[i] = api.Message{Role: m.Role, Content: m.Text()} // compared as text
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got  %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

// What the gateway once refused is carried through: the replica judges
// the members the gateway does not read.
func TestParsePassesThrough(t *testing.T) {
	f := testDoor()
	for _, tc := range []struct {
		name, body, member string
		content            string // the first message's text, as routing sees it
	}{
		{"tools", `{"model":"qwen",` + hi + `,"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"required"}`, "tools", "hi"},
		{"a tool round trip", `{"model":"qwen","messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"1","type":"function","function":{"name":"f","arguments":"{}"}}]},` +
			`{"role":"tool","tool_call_id":"1","content":"42"}]}`, "messages", `[{"id":"1","type":"function","function":{"name":"f","arguments":"{}"}}]`},
		{"an image part, its bytes not counted as text", `{"model":"qwen","messages":[{"role":"user","content":[{"type":"text","text":"look"},{"type":"image_url","image_url":{"url":"data:image/png;base64,` + strings.Repeat("A", 64) + `"}}]}]}`,
			"messages", `look` + "\n" + `{"type":"image_url","image_url":{"url":"data:image/png;base64,` + strings.Repeat("A", 64) + `"}}`},
		{"n of 2", `{"model":"qwen",` + hi + `,"n":2}`, "n", "hi"},
		{"json schema", `{"model":"qwen",` + hi + `,"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"object"}}}}`, "response_format", "hi"},
		{"penalties, logprobs, logit_bias, seed", `{"model":"qwen",` + hi + `,"presence_penalty":0.5,"frequency_penalty":-1,"logprobs":true,"top_logprobs":3,"logit_bias":{"50256":-100}}`, "logit_bias", "hi"},
		{"a vendor's own members", `{"model":"qwen",` + hi + `,"top_k":40,"chat_template_kwargs":{"enable_thinking":false},"cache_salt":"s"}`, "chat_template_kwargs", "hi"},
		{"a vendor's stream option", `{"model":"qwen",` + hi + `,"stream":true,"stream_options":{"include_usage":true,"continuous_usage_stats":true}}`, "stream_options", "hi"},
		{"reasoning effort, an unknown message member", `{"model":"qwen","messages":[{"role":"user","content":"hi","mood":"happy"}],"reasoning_effort":"low"}`, "reasoning_effort", "hi"},
		{"names are read exactly: Model is not model", `{"Model":"gemma","model":"qwen",` + hi + `}`, "Model", "hi"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			chat, err := f.parse([]byte(tc.body))
			if err != nil {
				t.Fatalf("refused: %v (param %q code %q)", err, err.Param, err.Code)
			}
			if chat.Wire == nil || string(chat.Wire.Body) != tc.body {
				t.Fatal("the body is not kept")
			}
			if _, ok := chat.Wire.Member(tc.member); !ok {
				t.Fatalf("no member %s among %+v", tc.member, chat.Wire.Members)
			}
			if chat.Model != "qwen" || chat.Messages[0].Text() != tc.content {
				t.Fatalf("model %q, first message %q, want %q", chat.Model, chat.Messages[0].Text(), tc.content)
			}
		})
	}
}

// A string content is left as the client wrote it, for routing to read
// without a copy; a message that also carries calls is joined with them
// as text.
func TestParseKeepsContentQuoted(t *testing.T) {
	f := testDoor()
	for _, tc := range []struct {
		name, body            string
		quoted, text, written string
	}{
		{"plain", `{"model":"qwen","messages":[{"role":"user","content":"hi"}]}`, `"hi"`, "hi", "hi"},
		{"escapes", `{"model":"qwen","messages":[{"role":"user","content":"caf\u00e9 \"q\"\n"}]}`,
			`"caf\u00e9 \"q\"\n"`, "café \"q\"\n", `caf\u00e9 \"q\"\n`},
		{"text and tool calls", `{"model":"qwen","messages":[{"role":"assistant","content":"a\tb","tool_calls":[{"id":"1"}]}]}`,
			"", "a\tb" + `[{"id":"1"}]`, "a\tb" + `[{"id":"1"}]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			chat, err := f.parse([]byte(tc.body))
			if err != nil {
				t.Fatalf("refused: %v", err)
			}
			m := chat.Messages[0]
			if string(m.Quoted) != tc.quoted || m.Text() != tc.text || m.Written() != tc.written {
				t.Fatalf("quoted %q, text %q, written %q; want %q, %q, %q", m.Quoted, m.Text(), m.Written(), tc.quoted, tc.text, tc.written)
			}
			if m.Size() < len(m.Text()) {
				t.Fatalf("size %d is below the text's %d bytes", m.Size(), len(m.Text()))
			}
		})
	}
}

func TestParseRefuses(t *testing.T) {
	long := strings.Repeat("x", 21)
	tests := []struct {
		name, body    string
		status        int
		code, param   string
		msgContaining string
	}{
		{"not json", `{"model":`, 400, codeInvalidJSON, "", "parse the JSON"},
		{"empty body", ``, 400, codeInvalidJSON, "", ""},
		{"not an object", `[1]`, 400, codeInvalidType, "", "JSON object"},
		{"null body", `null`, 400, codeInvalidType, "", "JSON object"},
		{"no model", `{` + hi + `}`, 400, codeMissing, "model", "model"},
		{"model not a string", `{"model":7,` + hi + `}`, 400, codeInvalidType, "model", "got an integer"},
		{"unknown model", `{"model":"gpt-4o",` + hi + `}`, 404, codeModelNotFound, "model", "'gpt-4o' does not exist"},
		{"no messages", `{"model":"qwen"}`, 400, codeMissing, "messages", ""},
		{"messages not an array", `{"model":"qwen","messages":"hi"}`, 400, codeInvalidType, "messages", "got a string"},
		{"empty messages", `{"model":"qwen","messages":[]}`, 400, codeEmptyArray, "messages", "empty array"},
		{"too many messages", `{"model":"qwen","messages":[{"role":"user","content":"a"},{"role":"user","content":"a"},{"role":"user","content":"a"},{"role":"user","content":"a"},{"role":"user","content":"a"}]}`,
			400, codeArrayTooLong, "messages", "maximum length 4"},
		{"message not an object", `{"model":"qwen","messages":["hi"]}`, 400, codeInvalidType, "messages[0]", ""},
		{"no role", `{"model":"qwen","messages":[{"content":"hi"}]}`, 400, codeMissing, "messages[0].role", ""},
		{"bad role", `{"model":"qwen","messages":[{"role":"user","content":"a"},{"role":"robot","content":"hi"}]}`, 400, codeInvalidValue, "messages[1].role", "'robot'"},
		{"no content", `{"model":"qwen","messages":[{"role":"user"}]}`, 400, codeMissing, "messages[0].content", ""},
		{"null content", `{"model":"qwen","messages":[{"role":"assistant","content":null}]}`, 400, codeMissing, "messages[0].content", ""},
		{"content a number", `{"model":"qwen","messages":[{"role":"user","content":5}]}`, 400, codeInvalidType, "messages[0].content", "got an integer"},
		{"part without text", `{"model":"qwen","messages":[{"role":"user","content":[{"type":"text"}]}]}`, 400, codeMissing, "messages[0].content[0].text", ""},
		{"part not an object", `{"model":"qwen","messages":[{"role":"user","content":["hi"]}]}`, 400, codeInvalidType, "messages[0].content[0]", ""},
		{"content too long", `{"model":"qwen","messages":[{"role":"user","content":"` + long + `"}]}`, 400, codeStringTooLong, "messages[0].content", "maximum length 20"},
		{"content too long, written with escapes", `{"model":"qwen","messages":[{"role":"user","content":"` + strings.Repeat(`\u00e9`, 21) + `"}]}`,
			400, codeStringTooLong, "messages[0].content", "got a string with length 21"},
		{"joined parts too long", `{"model":"qwen","messages":[{"role":"user","content":[{"type":"text","text":"0123456789"},{"type":"text","text":"0123456789"}]}]}`,
			400, codeStringTooLong, "messages[0].content", ""},
		{"temperature too high", `{"model":"qwen",` + hi + `,"temperature":2.5}`, 400, codeInvalidValue, "temperature", "between 0 and 2"},
		{"temperature negative", `{"model":"qwen",` + hi + `,"temperature":-0.1}`, 400, codeInvalidValue, "temperature", ""},
		{"temperature huge", `{"model":"qwen",` + hi + `,"temperature":1e400}`, 400, codeInvalidValue, "temperature", ""},
		{"temperature a string", `{"model":"qwen",` + hi + `,"temperature":"hot"}`, 400, codeInvalidType, "temperature", "got a string"},
		{"top_p above 1", `{"model":"qwen",` + hi + `,"top_p":1.01}`, 400, codeInvalidValue, "top_p", "between 0 and 1"},
		{"max_tokens zero", `{"model":"qwen",` + hi + `,"max_tokens":0}`, 400, codeInvalidValue, "max_tokens", "at least 1"},
		{"max_tokens decimal", `{"model":"qwen",` + hi + `,"max_tokens":5.5}`, 400, codeInvalidType, "max_tokens", "got a decimal"},
		{"max_tokens too large", `{"model":"qwen",` + hi + `,"max_tokens":99999999999}`, 400, codeInvalidValue, "max_tokens", ""},
		{"max_completion_tokens negative", `{"model":"qwen",` + hi + `,"max_completion_tokens":-1}`, 400, codeInvalidValue, "max_completion_tokens", ""},
		{"seed out of range", `{"model":"qwen",` + hi + `,"seed":99999999999999999999}`, 400, codeInvalidValue, "seed", "out of range"},
		{"seed a string", `{"model":"qwen",` + hi + `,"seed":"1"}`, 400, codeInvalidType, "seed", ""},
		{"stop a number", `{"model":"qwen",` + hi + `,"stop":1}`, 400, codeInvalidType, "stop", ""},
		{"stop item a number", `{"model":"qwen",` + hi + `,"stop":["a",2]}`, 400, codeInvalidType, "stop[1]", ""},
		{"stop empty", `{"model":"qwen",` + hi + `,"stop":""}`, 400, codeInvalidValue, "stop", "must not be empty"},
		{"too many stops", `{"model":"qwen",` + hi + `,"stop":["1","2","3","4","5","6","7","8","9","10","11","12","13","14","15","16","17"]}`,
			400, codeArrayTooLong, "stop", ""},
		{"user a number", `{"model":"qwen",` + hi + `,"user":1}`, 400, codeInvalidType, "user", ""},
		{"n of 0", `{"model":"qwen",` + hi + `,"n":0}`, 400, codeInvalidValue, "n", ""},
		{"stream a string", `{"model":"qwen",` + hi + `,"stream":"yes"}`, 400, codeInvalidType, "stream", "boolean"},
		{"stream_options without stream", `{"model":"qwen",` + hi + `,"stream_options":{"include_usage":true}}`, 400, codeInvalidValue, "stream_options", "only allowed"},
		{"include_usage a string", `{"model":"qwen",` + hi + `,"stream":true,"stream_options":{"include_usage":"yes"}}`, 400, codeInvalidType, "stream_options.include_usage", ""},
		// Two readers of one body must never see two models: a repeated
		// member, however spelled, is refused, not resolved.
		{"a repeated model, spelled with escapes", `{"mod\u0065l":"gemma","model":"qwen",` + hi + `}`, 400, codeDuplicate, "model", "'model' is given more than once"},
		{"a repeated member of a message", `{"model":"qwen","messages":[{"role":"user","content":"a"},{"role":"system","content":"hi","role":"user"}]}`,
			400, codeDuplicate, "messages[1].role", ""},
		{"a repeated member in an unread value", `{"model":"qwen",` + hi + `,"metadata":{"k":"a","k":"b"}}`, 400, codeDuplicate, "metadata.k", ""},
		{"invalid UTF-8", "{\"model\":\"qwen\",\"messages\":[{\"role\":\"user\",\"content\":\"\xff\"}]}", 400, codeInvalidJSON, "", "not valid JSON"},
		{"an unpaired surrogate", `{"model":"qwen","messages":[{"role":"user","content":"\ud800"}]}`, 400, codeInvalidJSON, "", ""},
		{"a second value after the body", `{"model":"qwen",` + hi + `} {}`, 400, codeInvalidJSON, "", ""},
	}
	f := testDoor()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := f.parse([]byte(tt.body))
			if err == nil {
				t.Fatal("accepted")
			}
			msg := message(err)
			if err.Status != tt.status || err.Code != tt.code || err.Param != tt.param || !strings.Contains(msg, tt.msgContaining) {
				t.Fatalf("got %d %q param %q: %s; want %d %q param %q containing %q",
					err.Status, err.Code, err.Param, msg, tt.status, tt.code, tt.param, tt.msgContaining)
			}
		})
	}
}

func TestDecodeReadsTheRequest(t *testing.T) {
	f := testDoor()
	tests := []struct {
		name, ct, body string
		status         int
	}{
		{"json", "application/json", `{"model":"qwen",` + hi + `}`, 0},
		{"json with charset", "application/json; charset=utf-8", `{"model":"qwen",` + hi + `}`, 0},
		{"no content type", "", `{"model":"qwen",` + hi + `}`, 0},
		{"form", "application/x-www-form-urlencoded", `{"model":"qwen",` + hi + `}`, 400},
		{"too large", "application/json", `{"model":"qwen",` + hi + `,"user":"` + strings.Repeat("u", 5000) + `"}`, 413},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, PathChatCompletions, strings.NewReader(tt.body))
			if tt.ct != "" {
				r.Header.Set("Content-Type", tt.ct)
			}
			chat, body, err := f.Decode(r)
			switch {
			case tt.status == 0 && (err != nil || chat.Model != "qwen" || string(body) != tt.body):
				t.Fatalf("got %+v %q %v", chat, body, err)
			case tt.status != 0 && (err == nil || err.Status != tt.status):
				t.Fatalf("got %v, want %d", err, tt.status)
			}
		})
	}
}
