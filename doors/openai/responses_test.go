package openai

import (
	"encoding/json"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/backends/protocols"
	"github.com/llmedge/llmedge/gateway"
	"github.com/llmedge/llmedge/wire"
)

func TestResponsesDecode(t *testing.T) {
	rs := Responses{testDoor()}
	accepts := []struct {
		name, body string
		want       api.Chat
	}{
		{"string input", `{"model":"qwen","input":"hi"}`,
			api.Chat{Model: "qwen", Messages: []api.Message{{Role: "user", Content: "hi"}}}},
		{"instructions first, items", `{"model":"gemma","instructions":"be brief","input":[` +
			`{"role":"developer","content":"sys"},{"type":"message","role":"user","content":[{"type":"input_text","text":"one"},{"type":"input_image","image_url":"data:x"}]},` +
			`{"type":"function_call","call_id":"c1","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c1","output":"42"}],` +
			`"stream":true,"max_output_tokens":9,"temperature":0.5,"top_p":1,"user":"u",` +
			`"tools":[{"type":"function","name":"f","parameters":{}},{"type":"web_search"}],"text":{"format":{"type":"json_schema","name":"x","schema":{}}},` +
			`"store":false,"background":false,"previous_response_id":null,"stream_options":{"include_obfuscation":false},"reasoning":{"effort":"low"},"include":[]}`,
			api.Chat{Model: "gemma", Stream: true, User: "u", Messages: []api.Message{{Role: "system", Content: "be brief"}, {Role: "system", Content: "sys"},
				{Role: "user", Content: `one` + "\n" + `{"type":"input_image","image_url":"data:x"}`},
				{Role: "assistant", Content: `{"type":"function_call","call_id":"c1","name":"f","arguments":"{}"}`},
				{Role: "tool", Content: `{"type":"function_call_output","call_id":"c1","output":"42"}`}},
				Sampling: api.Sampling{MaxTokens: 9, Temperature: ptr(0.5), TopP: ptr(1.0)}, Items: 4}},
		{"text formats", `{"model":"qwen","input":"hi","text":{"format":{"type":"json_object"},"verbosity":"low"}}`,
			api.Chat{Model: "qwen", Messages: []api.Message{{Role: "user", Content: "hi"}}}},
	}
	for _, tc := range accepts {
		t.Run(tc.name, func(t *testing.T) {
			got, err := rs.parseResponses([]byte(tc.body))
			if err != nil {
				t.Fatalf("refused: %v (param %q code %q)", err, err.Param, err.Code)
			}
			if got.Wire == nil || got.Wire.Format != api.FormatOpenAIResponses || string(got.Wire.Body) != tc.body || len(got.Wire.Members) == 0 {
				t.Fatalf("wire %+v", got.Wire)
			}
			got.Wire = nil
			for i, m := range got.Messages {
				got.Messages[i] = api.Message{Role: m.Role, Content: m.Text()} // compared as text
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
	refuses := []struct{ name, body, param, code, msg string }{
		{"no model", `{"input":"hi"}`, "model", codeMissing, ""},
		{"unknown model", `{"model":"nope","input":"hi"}`, "model", codeModelNotFound, ""},
		{"no input", `{"model":"qwen"}`, "input", codeMissing, ""},
		{"input a number", `{"model":"qwen","input":1}`, "input", codeInvalidType, ""},
		{"empty input", `{"model":"qwen","input":[]}`, "input", codeEmptyArray, ""},
		{"too many items", `{"model":"qwen","input":[{"role":"user","content":"a"},{"role":"user","content":"a"},{"role":"user","content":"a"},{"role":"user","content":"a"},{"role":"user","content":"a"}]}`, "input", codeArrayTooLong, ""},
		{"item not an object", `{"model":"qwen","input":["a"]}`, "input[0]", codeInvalidType, ""},
		{"item without role", `{"model":"qwen","input":[{"content":"x"}]}`, "input[0].role", codeMissing, ""},
		{"bad role", `{"model":"qwen","input":[{"role":"tool","content":"x"}]}`, "input[0].role", codeInvalidValue, ""},
		{"content too long", `{"model":"qwen","input":[{"role":"user","content":"123456789012345678901"}]}`, "input[0].content", codeStringTooLong, ""},
		{"input too long", `{"model":"qwen","input":"123456789012345678901"}`, "input", codeStringTooLong, ""},
		{"instructions not a string", `{"model":"qwen","input":"hi","instructions":1}`, "instructions", codeInvalidType, ""},
		{"previous_response_id", `{"model":"qwen","input":"hi","previous_response_id":"resp_1"}`, "previous_response_id", codeUnsupported, "keeps no responses"},
		{"conversation", `{"model":"qwen","input":"hi","conversation":"conv_1"}`, "conversation", codeUnsupported, "store: false"},
		{"background", `{"model":"qwen","input":"hi","background":true}`, "background", codeUnsupported, "polled"},
		{"store true", `{"model":"qwen","input":"hi","store":true}`, "store", codeUnsupported, "another replica"},
		{"stored prompt", `{"model":"qwen","input":"hi","prompt":{"id":"pmpt_1"}}`, "prompt", codeUnsupported, "template"},
		{"item reference", `{"model":"qwen","input":[{"role":"user","content":"a"},{"type":"item_reference","id":"msg_1"}]}`, "input[1].type", codeUnsupported, "stored"},
		{"max_output_tokens 0", `{"model":"qwen","input":"hi","max_output_tokens":0}`, "max_output_tokens", codeInvalidValue, ""},
		{"stream a string", `{"model":"qwen","input":"hi","stream":"yes"}`, "stream", codeInvalidType, ""},
		{"stream_options without stream", `{"model":"qwen","input":"hi","stream_options":{}}`, "stream_options", codeInvalidValue, ""},
		{"temperature", `{"model":"qwen","input":"hi","temperature":3}`, "temperature", codeInvalidValue, ""},
		{"tools not an array", `{"model":"qwen","input":"hi","tools":{}}`, "tools", codeInvalidType, ""},
		{"tool without type", `{"model":"qwen","input":"hi","tools":[{"name":"f"}]}`, "tools[0].type", codeMissing, ""},
		{"text.format type", `{"model":"qwen","input":"hi","text":{"format":{"type":"xml"}}}`, "text.format.type", codeInvalidValue, ""},
		{"json_schema without schema", `{"model":"qwen","input":"hi","text":{"format":{"type":"json_schema","name":"n"}}}`, "text.format.schema", codeMissing, ""},
		{"json_schema without name", `{"model":"qwen","input":"hi","text":{"format":{"type":"json_schema","schema":{}}}}`, "text.format.name", codeMissing, ""},
		{"duplicate", `{"model":"qwen","input":"hi","input":"ho"}`, "input", codeDuplicate, ""},
		{"not JSON", `{"model":`, "", codeInvalidJSON, ""},
		{"not an object", `[]`, "", codeInvalidType, ""},
	}
	for _, tc := range refuses {
		t.Run(tc.name, func(t *testing.T) {
			_, err := rs.parseResponses([]byte(tc.body))
			if err == nil {
				t.Fatal("accepted")
			}
			if err.Param != tc.param || err.Code != tc.code || !strings.Contains(err.Detail.(string), tc.msg) {
				t.Fatalf("got %d %q %q %v", err.Status, err.Param, err.Code, err.Detail)
			}
			if want := map[bool]int{true: 404, false: 400}[tc.code == codeModelNotFound]; err.Status != want {
				t.Fatalf("status %d", err.Status)
			}
		})
	}
}

func responsesAnswer() *gateway.Answer {
	return &gateway.Answer{ID: "r1", Model: "qwen", Created: time.Unix(1700000000, 0), Content: "Hello there",
		FinishReason: "stop", Usage: api.Usage{PromptTokens: 3, CompletionTokens: 2, TotalTokens: 5}, UsageKnown: true}
}

func TestResponsesRelay(t *testing.T) {
	rs := Responses{testDoor()}
	a := responsesAnswer()
	data := []byte(`{"type":"response.created","response":{"id":"x","model":"up/model-7b","status":"in_progress"}}`)
	start := strings.Index(string(data), `"up/model-7b"`)
	d := &protocols.Delta{Data: data, Format: api.FormatOpenAIResponses, Event: "response.created",
		Model: wire.Value{Raw: data[start : start+13], Start: start, End: start + 13}}
	got := string(rs.AppendDelta(nil, a, d))
	want := "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"x\",\"model\":\"qwen\",\"status\":\"in_progress\"}}\n\n"
	if got != want || !a.Relayed {
		t.Fatalf("got %q", got)
	}
	// Unnamed events stay unnamed; nothing is added at the end.
	got = string(rs.AppendDelta(nil, a, &protocols.Delta{Data: []byte(`{"type":"response.output_text.delta","delta":"a"}`)}))
	if got != "data: {\"type\":\"response.output_text.delta\",\"delta\":\"a\"}\n\n" {
		t.Fatalf("got %q", got)
	}
	if end := rs.AppendEnd(nil, a); len(end) != 0 {
		t.Fatalf("end %q", end)
	}

	// The replica's whole response, renamed.
	raw := []byte(`{"id":"resp_9","object":"response","model":"up","output":[]}`)
	a = responsesAnswer()
	a.Raw, a.RawFormat, a.RawModel = raw, api.FormatOpenAIResponses, wire.Value{Raw: raw[43:47], Start: 43, End: 47}
	w := httptest.NewRecorder()
	rs.WriteAnswer(w, a)
	if w.Body.String() != `{"id":"resp_9","object":"response","model":"qwen","output":[]}`+"\n" || w.Code != 200 {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
}

// A replica that answered with text alone: the door writes the Responses
// API's events and response itself.
func TestResponsesFromText(t *testing.T) {
	rs := Responses{testDoor()}
	a := responsesAnswer()
	b := rs.AppendDelta(nil, a, &protocols.Delta{Text: "Hello there", Token: true})
	a.Deltas++
	a.FinishReason = "length"
	b = rs.AppendEnd(b, a)
	evs := namedEvents(t, b)
	var types []string
	for _, e := range evs {
		var ev struct {
			Type     string
			Delta    string
			Response *struct {
				Model, Status string
				Output        []struct {
					Content []struct{ Type, Text string }
				}
				Usage *struct{ InputTokens, OutputTokens int }
			}
		}
		if err := json.Unmarshal([]byte(e), &ev); err != nil {
			t.Fatalf("%v: %s", err, e)
		}
		types = append(types, ev.Type)
		if ev.Response != nil && (ev.Response.Model != "qwen" || ev.Type == "response.incomplete" &&
			(ev.Response.Status != "incomplete" || ev.Response.Output[0].Content[0].Text != "Hello there")) {
			t.Fatalf("%s", e)
		}
	}
	if strings.Join(types, " ") != "response.created response.in_progress response.output_item.added response.content_part.added "+
		"response.output_text.delta response.output_text.done response.content_part.done response.output_item.done response.incomplete" {
		t.Fatalf("events %v\n%s", types, b)
	}
	if !strings.Contains(string(b), "event: response.incomplete\n") {
		t.Fatalf("%s", b)
	}

	w := httptest.NewRecorder()
	rs.WriteAnswer(w, responsesAnswer())
	var resp map[string]any
	if err := json.Unmarshal(w.Body.Bytes(), &resp); err != nil || resp["status"] != "completed" || resp["object"] != "response" {
		t.Fatalf("%v %s", err, w.Body)
	}
}

func TestResponsesStreamError(t *testing.T) {
	rs := Responses{testDoor()}
	b := rs.AppendStreamError(nil, responsesAnswer(), api.NewError(504, "The replica did not answer in time"))
	want := "event: error\ndata: {\"type\":\"error\",\"code\":\"upstream_timeout\",\"message\":\"The replica did not answer in time\",\"param\":null}\n\n"
	if string(b) != want {
		t.Fatalf("got %q", b)
	}
}

func TestStoredResponsePaths(t *testing.T) {
	_, m := testSite()
	for _, p := range []string{"/v1/responses/resp_1", "/v1/responses/resp_1/cancel", "/v1/responses/resp_1/input_items"} {
		h := m.Handler(p)
		if h == nil {
			t.Fatalf("%s: no handler", p)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", p, nil))
		var e openAIErr
		if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil || w.Code != 404 || e.Error.Code != "not_found" ||
			!strings.Contains(e.Error.Message, "stores no responses") {
			t.Fatalf("%s: %d %s", p, w.Code, w.Body)
		}
	}
	if m.Handler(PathResponses) == nil {
		t.Fatal("no /v1/responses")
	}
}

type openAIErr struct {
	Error struct{ Message, Type, Code string }
}

// namedEvents splits a stream of named events into their data, checking
// that each event's name is its data's type.
func namedEvents(t *testing.T, b []byte) []string {
	t.Helper()
	var out []string
	for _, ev := range strings.Split(strings.TrimSuffix(string(b), "\n\n"), "\n\n") {
		name, data, ok := strings.Cut(ev, "\ndata: ")
		name, named := strings.CutPrefix(name, "event: ")
		if !ok || !named || !strings.HasPrefix(data, `{"type":"`+name+`"`) {
			t.Fatalf("bad event %q", ev)
		}
		out = append(out, data)
	}
	return out
}
