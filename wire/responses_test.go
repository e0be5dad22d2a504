package wire

import (
	"encoding/json"
	"reflect"
	"testing"
)

func TestReadResponsesEvent(t *testing.T) {
	completed := `{"type":"response.completed","sequence_number":9,"response":{"id":"resp_1","object":"response",` +
		`"status":"incomplete","incomplete_details":{"reason":"max_output_tokens"},"error":null,"model":"m-7b",` +
		`"output":[{"type":"reasoning","content":[{"type":"reasoning_text","text":"hmm"}]},` +
		`{"content":[{"type":"output_text","text":"Hello","annotations":[]},{"type":"refusal","refusal":"no"},{"type":"output_text","text":" world"}],"type":"message"}],` +
		`"usage":{"input_tokens":7,"input_tokens_details":{"cached_tokens":0},"output_tokens":3,"total_tokens":10}}}`
	for _, tc := range []struct {
		name, data string
		want       ResponsesEvent
		model      string
		wantErr    bool
	}{
		{name: "delta", data: `{"type":"response.output_text.delta","item_id":"m","output_index":0,"content_index":0,"delta":"Hi \u00e9","logprobs":[]}`,
			want: ResponsesEvent{Type: "response.output_text.delta", Delta: "Hi é"}},
		{name: "escaped names", data: `{"typ\u0065":"response.refusal.delta","delta":"x"}`,
			want: ResponsesEvent{Type: "response.refusal.delta", Delta: "x"}},
		{name: "object delta", data: `{"type":"response.custom.delta","delta":{"a":1}}`,
			want: ResponsesEvent{Type: "response.custom.delta"}},
		{name: "error event", data: `{"type":"error","code":"server_error","message":"boom","param":null}`,
			want: ResponsesEvent{Type: "error", Message: "boom"}},
		{name: "error payload", data: `{"error":{"message":"bad"}}`, want: ResponsesEvent{Error: true}},
		{name: "repeated member, last counts", data: `{"type":"a","type":"response.output_text.delta","delta":"1","delta":"2"}`,
			want: ResponsesEvent{Type: "response.output_text.delta", Delta: "2"}},
		{name: "completed", data: completed, model: `"m-7b"`, want: ResponsesEvent{Type: "response.completed", Response: Response{
			Given: true, Status: "incomplete", IncompleteReason: "max_output_tokens", Object: "response", Text: "Hello world",
			Usage: Usage{Given: true, PromptTokens: Count{7, true}, CompletionTokens: Count{3, true}, TotalTokens: Count{10, true}, CachedTokens: Count{0, true}}}}},
		{name: "failed", data: `{"type":"response.failed","response":{"status":"failed","error":{"code":"server_error","message":"oops"},"usage":null,"model":null}}`,
			model: "null", want: ResponsesEvent{Type: "response.failed", Response: Response{Given: true, Status: "failed", Error: true, ErrorMessage: "oops"}}},
		{name: "type not a string", data: `{"type":1}`, wantErr: true},
		{name: "not an object", data: `[1]`, wantErr: true},
		{name: "malformed", data: `{"type":"a"`, wantErr: true},
		{name: "fractional count", data: `{"response":{"usage":{"input_tokens":1.5}}}`, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var e ResponsesEvent
			err := ReadResponsesEvent([]byte(tc.data), &e)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err %v", err)
			}
			if tc.wantErr {
				return
			}
			model, span := e.Response.Model, e.Response.Span
			if string(model.Raw) != tc.model || (model.Raw != nil && tc.data[model.Start:model.End] != tc.model) {
				t.Fatalf("model %q at %d:%d", model.Raw, model.Start, model.End)
			}
			if e.Response.Given && tc.data[span.Start:span.End] != string(span.Raw) {
				t.Fatalf("span %d:%d", span.Start, span.End)
			}
			e.Response.Model, e.Response.Span = Value{}, Value{}
			if !reflect.DeepEqual(e, tc.want) {
				t.Fatalf("got  %+v\nwant %+v", e, tc.want)
			}
		})
	}
}

func TestReadResponse(t *testing.T) {
	data := `{"id":"resp_1","object":"response","model":"x","status":"completed","error":null,` +
		`"output":[{"type":"function_call","name":"f","arguments":"{}"}],"usage":{"input_tokens":2,"output_tokens":1}}`
	var r Response
	if err := ReadResponse([]byte(data), &r); err != nil {
		t.Fatal(err)
	}
	if r.Status != "completed" || r.Text != "" || string(r.Model.Raw) != `"x"` || data[r.Model.Start:r.Model.End] != `"x"` ||
		r.Usage.PromptTokens.N != 2 || r.Usage.CompletionTokens.N != 1 || r.Usage.TotalTokens.Given || r.Error {
		t.Fatalf("%+v", r)
	}
	if err := ReadResponse([]byte(`{"object":"error","message":"no"}`), &r); err != nil || r.Object != "error" {
		t.Fatalf("%v %+v", err, r)
	}
	if err := ReadResponse([]byte(`"x"`), &r); err == nil {
		t.Fatal("a string read as a response")
	}
}

// FuzzResponsesEvent: any data is read or refused without a panic, a
// body encoding/json refuses is refused, and the spans read are spans of
// the data.
func FuzzResponsesEvent(f *testing.F) {
	for _, s := range []string{
		`{"type":"response.completed","response":{"model":"m","status":"completed","usage":{"input_tokens":1,"output_tokens":2},"output":[{"type":"message","content":[{"type":"output_text","text":"a"}]}]}}`,
		`{"type":"response.output_text.delta","delta":"x"}`, `{"type":"error","message":"m"}`, `{"response":null}`, `{"response":{"error":"x"}}`,
		"{\"type\":\"\xff\"}", `{"a":1,"a":2}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var e ResponsesEvent
		err := ReadResponsesEvent(data, &e)
		var x any
		if json.Unmarshal(data, &x) != nil && err == nil {
			t.Fatalf("read what encoding/json refuses: %q", data)
		}
		if err != nil {
			return
		}
		for _, v := range []Value{e.Response.Model, e.Response.Span} {
			if v.Raw != nil && string(data[v.Start:v.End]) != string(v.Raw) {
				t.Fatalf("span %d:%d of %q", v.Start, v.End, data)
			}
		}
	})
}

// TestResponseOutputText: the text of an answer is its message items'
// output_text parts, in order, whatever the order of their members; what
// is not of the kind looked for counts as absent rather than refusing the
// answer.
func TestResponseOutputText(t *testing.T) {
	for _, tc := range []struct{ name, output, want string }{
		{"parts", `[{"type":"message","content":[{"type":"output_text","text":"a"},{"type":"output_text","text":"b"}]}]`, "ab"},
		{"type after content", `[{"content":[{"text":"a","type":"output_text"}],"type":"message"}]`, "a"},
		{"items of other types", `[{"type":"reasoning","content":[{"type":"output_text","text":"no"}]},{"type":"message","content":[{"type":"output_text","text":"yes"}]},{"type":"function_call","arguments":"{}"}]`, "yes"},
		{"parts of other types", `[{"type":"message","content":[{"type":"refusal","refusal":"no"},{"type":"output_text","text":"x\u00e9"}]}]`, "xé"},
		{"a repeated content, the last counts", `[{"type":"message","content":[{"type":"output_text","text":"old"}],"content":[{"type":"output_text","text":"new"}]}]`, "new"},
		{"a repeated type, the last counts", `[{"type":"message","content":[{"type":"output_text","text":"a"}],"type":"reasoning"}]`, ""},
		{"escaped names", `[{"typ\u0065":"message","content":[{"type":"output_text","t\u0065xt":"a"}]}]`, "a"},
		{"not an array", `{"type":"message"}`, ""},
		{"null", `null`, ""},
		{"elements not objects", `[1,"x",null,[{"type":"message"}],{"type":"message","content":[2,{"type":"output_text","text":"ok"}]}]`, "ok"},
		{"content not an array", `[{"type":"message","content":"text"}]`, ""},
		{"type not a string", `[{"type":1,"content":[{"type":"output_text","text":"no"}]}]`, ""},
		{"text not a string", `[{"type":"message","content":[{"type":"output_text","text":7}]}]`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := `{"object":"response","output":` + tc.output + `,"status":"completed"}`
			var r Response
			if err := ReadResponse([]byte(data), &r); err != nil {
				t.Fatal(err)
			}
			if r.Text != tc.want || r.Status != "completed" {
				t.Fatalf("text %q status %q, want %q", r.Text, r.Status, tc.want)
			}
		})
	}
	for _, bad := range []string{`[{"type":"message","content":[{"type":"output_text","text":"a"]}]`, `[{"type":"message"`, `[1,]`} {
		var r Response
		if err := ReadResponse([]byte(`{"output":`+bad+`}`), &r); err == nil {
			t.Fatalf("%s read", bad)
		}
	}
}
