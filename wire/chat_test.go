package wire

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// checkChat reads body and holds the result to encoding/json.
func checkChat(t *testing.T, body []byte, c *Chat) error {
	t.Helper()
	err := ReadChat(body, c)
	checkAcceptance(t, body, err)
	if err != nil {
		return err
	}
	if !bytes.Equal(c.Body.Raw, bytes.Trim(body, " \t\r\n")) {
		t.Fatalf("body read as %q", c.Body.Raw)
	}
	checkSpan(t, body, "body", c.Body)
	if c.Body.Kind() != Object {
		if len(c.Members) != 0 || len(c.Items) != 0 || c.Model.Raw != nil {
			t.Fatalf("members read from %q", body)
		}
		return nil
	}
	obj := objectOf(t, body)
	checkMembers(t, body, c.Members, obj)
	for _, m := range c.Members {
		if _, field := c.field([]byte(m.Name), "messages"); m.Known != (field != nil) {
			t.Fatalf("member %q: Known %v", m.Name, m.Known)
		}
	}
	for name, v := range map[string]Value{"model": c.Model, "messages": c.Messages, "stream": c.Stream,
		"stream_options": c.StreamOptions, "temperature": c.Temperature, "top_p": c.TopP, "max_tokens": c.MaxTokens,
		"max_completion_tokens": c.MaxCompletionTokens, "stop": c.Stop, "seed": c.Seed, "user": c.User, "n": c.N} {
		checkValue(t, body, name, v, obj[name])
	}

	// stop's elements, stream_options' members.
	if c.Stop.Kind() == Array {
		arr := arrayOf(t, c.Stop.Raw)
		if len(c.Stops) != len(arr) {
			t.Fatalf("%d stops, encoding/json %d", len(c.Stops), len(arr))
		}
		for i, s := range c.Stops {
			checkValue(t, body, "stop item", s, arr[i])
		}
	} else if len(c.Stops) != 0 {
		t.Fatalf("stops read from %q", c.Stop.Raw)
	}
	if c.StreamOptions.Kind() == Object {
		checkMembers(t, body, c.Options, objectOf(t, c.StreamOptions.Raw))
		for _, o := range c.Options {
			if o.Known != (o.Name == "include_usage" || o.Name == "include_obfuscation") {
				t.Fatalf("option %q: Known %v", o.Name, o.Known)
			}
		}
	} else if len(c.Options) != 0 {
		t.Fatalf("options read from %q", c.StreamOptions.Raw)
	}

	// messages, element by element, and their content parts.
	if c.Messages.Kind() != Array {
		if len(c.Items) != 0 || len(c.Parts) != 0 {
			t.Fatalf("items read from %q", c.Messages.Raw)
		}
		return nil
	}
	arr := arrayOf(t, c.Messages.Raw)
	if len(c.Items) != len(arr) {
		t.Fatalf("%d items, encoding/json %d", len(c.Items), len(arr))
	}
	parts := 0
	for i := range c.Items {
		m := &c.Items[i]
		checkValue(t, body, "message", m.Value, arr[i])
		if m.PartsFrom != parts {
			t.Fatalf("message %d: parts from %d, after %d", i, m.PartsFrom, parts)
		}
		if m.Kind() != Object {
			if m.Role.Raw != nil || m.Content.Raw != nil || m.PartsTo != m.PartsFrom {
				t.Fatalf("members read from message %q", m.Raw)
			}
			continue
		}
		o := objectOf(t, arr[i])
		checkValue(t, body, "role", m.Role, o["role"])
		checkValue(t, body, "content", m.Content, o["content"])
		checkValue(t, body, "name", m.Name, o["name"])
		checkValue(t, body, "refusal", m.Refusal, o["refusal"])
		checkValue(t, body, "tool_calls", m.ToolCalls, o["tool_calls"])
		checkValue(t, body, "function_call", m.FunctionCall, o["function_call"])
		// Other is the first member of another name, in body order.
		var first string
		found := false
		_ = m.Value.Members(func(mm Member) bool {
			switch mm.Name {
			case "role", "content", "name", "refusal", "tool_calls", "function_call":
				return true
			}
			first, found = mm.Name, true
			return false
		})
		if m.Other.Name != first || (m.Other.Value.Raw != nil) != found {
			t.Fatalf("message %d: other member %q, want %q", i, m.Other.Name, first)
		}
		if found {
			checkValue(t, body, "other", m.Other.Value, o[first])
			if string(body[m.Other.Start:m.Other.End]) == "" || m.Other.End != m.Other.Value.End {
				t.Fatalf("other member's span [%d:%d]", m.Other.Start, m.Other.End)
			}
		}
		if m.Content.Kind() != Array {
			if m.PartsTo != m.PartsFrom {
				t.Fatalf("parts read from %q", m.Content.Raw)
			}
			continue
		}
		pa := arrayOf(t, m.Content.Raw)
		ps := c.PartsOf(m)
		if len(ps) != len(pa) {
			t.Fatalf("%d parts, encoding/json %d", len(ps), len(pa))
		}
		for j, p := range ps {
			checkValue(t, body, "part", p.Value, pa[j])
			if p.Kind() != Object {
				if p.Type.Raw != nil || p.Text.Raw != nil {
					t.Fatalf("members read from part %q", p.Raw)
				}
				continue
			}
			po := objectOf(t, pa[j])
			checkValue(t, body, "type", p.Type, po["type"])
			checkValue(t, body, "text", p.Text, po["text"])
		}
		parts = m.PartsTo
	}
	if parts != len(c.Parts) {
		t.Fatalf("%d parts, %d in messages", len(c.Parts), parts)
	}
	return nil
}

var chatBodies = []string{
	`{"model":"qwen","messages":[{"role":"user","content":"hi"}]}`,
	`{"model":"gemma","messages":[{"role":"developer","content":[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"u"}}]}],"stream":true,"stream_options":{"include_usage":true,"x":1}}`,
	`{"model":"qwen","messages":[{"role":"user","content":"x"}],"temperature":2,"top_p":0,"max_tokens":1,"max_completion_tokens":2,"stop":["a","b"],"seed":-1,"n":1,"user":"u","tools":[]}`,
	`{"model":"qwen","messages":[{"role":"assistant","content":null,"name":"n","refusal":"r","tool_calls":[{"id":"1"}],"function_call":{},"mood":"x","z":1}],"stop":"END"}`,
	`{"model":"qwen","messages":[1,"two",null,[],{"content":[1,null,{"text":"t","cache_control":{}},{"type":"text"}]},{"content":[]}]}`,
	` { "model" : "qwen" , "messages" : [ ] , "metadata" : { "k" : "v" } , "stop" : [ ] , "stream_options" : { } } `,
	`{"mod\u0065l":"q\u0077en","messages":[{"r\u006fle":"us\u0065r","c\u006fntent":"\u00e9\ud83d\ude42\n"}],"stream_\u006fptions":{"include_\u0075sage":false}}`,
	`{"model":7,"messages":"hi","stream":"yes","stream_options":[1],"stop":1,"n":null}`,
	`{"\\\\":1,"\\\\\\\\":2,"stream_options":{"\\\\":3},"messages":[{"\\\\":4,"content":[{"\\\\":5,"type":"text"}]}]}`,
	`{}`, `null`, `[]`, `"str"`, `12`, `false`,
	`{"Model":"qwen","model":"qwen","messages":[{"Role":"user","role":"user","content":"x"}]}`,
	`{"model":"qwen","messages":[{"role":"user","content":"` + strings.Repeat("x", 1000) + `"}]}`,
}

func TestReadChat(t *testing.T) {
	var c Chat // reused, as the door reuses it
	for _, body := range chatBodies {
		if err := checkChat(t, []byte(body), &c); err != nil {
			t.Fatalf("%s: %v", body, err)
		}
	}
}

// TestReadChatSpans holds every top-level member's spans to the bytes the
// client wrote, so that a member can be cut out or replaced in place.
func TestReadChatSpans(t *testing.T) {
	body := []byte("{ \"model\" :\t\"qwen\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}] ,\n\"stream\":true,\"stream_options\": {\"include_usage\" : true},\"metadata\":{\"a\":[1, 2]},\"n\":1e0 }")
	var c Chat
	if err := ReadChat(body, &c); err != nil {
		t.Fatal(err)
	}
	want := []struct{ whole, value string }{
		{"\"model\" :\t\"qwen\"", `"qwen"`},
		{`"messages":[{"role":"user","content":"hi"}]`, `[{"role":"user","content":"hi"}]`},
		{`"stream":true`, `true`},
		{`"stream_options": {"include_usage" : true}`, `{"include_usage" : true}`},
		{`"metadata":{"a":[1, 2]}`, `{"a":[1, 2]}`},
		{`"n":1e0`, `1e0`},
	}
	if len(c.Members) != len(want) {
		t.Fatalf("%d members", len(c.Members))
	}
	for i, m := range c.Members {
		if got := string(body[m.Start:m.End]); got != want[i].whole {
			t.Errorf("member %d: %q, want %q", i, got, want[i].whole)
		}
		if got := string(body[m.Value.Start:m.Value.End]); got != want[i].value || string(m.Value.Raw) != got {
			t.Errorf("member %d's value: %q, want %q", i, got, want[i].value)
		}
	}
	// Cutting the model member out (from its start to the next member's)
	// and putting another in its place leaves the rest as written.
	m := c.Members[0]
	spliced := string(body[:m.Value.Start]) + `"gemma"` + string(body[m.Value.End:])
	if !strings.Contains(spliced, `"model" :`+"\t"+`"gemma","messages":[{"role":"user","content":"hi"}] ,`) {
		t.Fatalf("spliced %s", spliced)
	}
	if len(c.Options) != 1 || string(body[c.Options[0].Start:c.Options[0].End]) != `"include_usage" : true` {
		t.Fatalf("options %+v", c.Options)
	}
}

func TestReadChatRefuses(t *testing.T) {
	tests := []struct {
		name, body string
		path       string // a duplicate's
		contains   string
	}{
		{"empty", ``, "", "unexpected end"},
		{"truncated", `{"model":`, "", "unexpected end"},
		{"truncated in a part", `{"model":"qwen","messages":[{"role":"user","content":[{"type":"text","text":"a"`, "", "unexpected end"},
		{"bad number", `{"temperature":.5}`, "", "invalid character"},
		{"second value", `{"model":"qwen"}{"model":"gemma"}`, "", "after top-level value"},
		{"invalid UTF-8", "{\"model\":\"q\xe9n\"}", "", "UTF-8"},
		{"unpaired surrogate", `{"user":"\ud83d"}`, "", "surrogate"},
		{"repeated model", `{"model":"qwen","messages":[],"model":"gemma"}`, "model", ""},
		{"repeated model, spelled with escapes", `{"mod\u0065l":"gemma","model":"qwen"}`, "model", ""},
		{"repeated in a message", `{"messages":[{"content":"a","content":"b"}]}`, "messages[0].content", ""},
		{"repeated in a part", `{"messages":[{"content":[{"type":"text"},{"text":"a","text":"b"}]}]}`, "messages[0].content[1].text", ""},
		{"repeated in stream_options", `{"stream_options":{"include_usage":true,"include_usage":false}}`, "stream_options.include_usage", ""},
		{"repeated in an unknown member", `{"metadata":{"k":1,"k":2}}`, "metadata.k", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c Chat
			err := ReadChat([]byte(tt.body), &c)
			var we *Error
			if !errors.As(err, &we) {
				t.Fatalf("err %v", err)
			}
			if tt.path != "" {
				if !we.Duplicate || PathString(we.Path) != tt.path || !strings.Contains(we.Error(), tt.path) {
					t.Fatalf("%v: duplicate %v path %q, want %q", we, we.Duplicate, PathString(we.Path), tt.path)
				}
				return
			}
			if we.Duplicate || !strings.Contains(we.Error(), tt.contains) {
				t.Fatalf("%v, want %q", we, tt.contains)
			}
		})
	}
}

func TestReadChatAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("allocations are not counted under the race detector")
	}
	body := []byte(`{"model":"qwen","messages":[{"role":"system","content":"You are terse."},{"role":"user","content":[{"type":"text","text":"Say hello."}]}],` +
		`"temperature":0.7,"max_tokens":256,"stream":true,"stream_options":{"include_usage":true},"stop":["a"]}`)
	var c Chat
	if err := ReadChat(body, &c); err != nil {
		t.Fatal(err)
	}
	if a := testing.AllocsPerRun(100, func() { _ = ReadChat(body, &c) }); a > 0 {
		t.Fatalf("%v allocations per read", a)
	}
}

// ReadInput reads a Responses API body's input as ReadChat reads a chat's
// messages: the same items, parts and spans as the body with "messages"
// in the place of "input"; a "messages" member is then one it does not
// read.
func TestReadInput(t *testing.T) {
	for _, body := range []string{
		`{"model":"qwen","instructions":"be brief","input":   [{"role":"user","content":"caf\u00e9"},` +
			`{"type":"message","role":"assistant","content":[{"type":"output_text","text":"ok"},{"type":"refusal","refusal":"no"}]},` +
			`{"type":"function_call","call_id":"c1","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c1","output":"42"}],"stream":true}`,
		`{"model":"qwen","input":   "hi"}`,
		`{"model":"qwen","input":   [1,"two",null,{"content":[1,{"type":"input_text"}]}]}`,
	} {
		var in, chat Chat
		if err := ReadInput([]byte(body), &in); err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		renamed := strings.Replace(body, `"input":   `, `"messages":`, 1) // the same length: the same spans
		if err := ReadChat([]byte(renamed), &chat); err != nil {
			t.Fatalf("%s: %v", renamed, err)
		}
		if !reflect.DeepEqual(in.Items, chat.Items) || !reflect.DeepEqual(in.Parts, chat.Parts) ||
			in.Messages.Start != chat.Messages.Start || in.Messages.End != chat.Messages.End {
			t.Fatalf("%s:\nReadInput %+v %+v\nReadChat  %+v %+v", body, in.Items, in.Parts, chat.Items, chat.Parts)
		}
		if in.Member("input").Raw == nil || in.Member("model").Raw == nil || in.Member("messages").Raw != nil {
			t.Fatalf("%s: members %+v", body, in.Members)
		}
	}
	var in Chat
	if err := ReadInput([]byte(`{"input":"hi","messages":[{"role":"user","content":"x"}]}`), &in); err != nil ||
		len(in.Items) != 0 || string(in.Messages.Raw) != `"hi"` || in.Members[1].Known {
		t.Fatalf("messages read beside input: %v %+v", err, in)
	}
}

// The members of a content part other than type and text are read with
// the rest (a tool_result's content, an image's source), each with its
// span, so that a door needs not read the part again.
func TestChatPartMembers(t *testing.T) {
	body := []byte(`{"messages":[{"role":"user","content":[` +
		`{"type":"text","text":"hi","cache_control":{"type":"ephemeral"}},` +
		`{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"out"}],"is_error":false,"x-\u0079":1},` +
		`"plain"]},{"role":"assistant","content":[{"type":"text","text":"ok"}]}]}`)
	var c Chat
	for range 2 { // the second read reuses the first's slices
		if err := ReadChat(body, &c); err != nil {
			t.Fatal(err)
		}
		want := [][]string{
			{`"cache_control":{"type":"ephemeral"}`},
			{`"tool_use_id":"t1"`, `"content":[{"type":"text","text":"out"}]`, `"is_error":false`, `"x-\u0079":1`},
			nil,
			nil,
		}
		if len(c.Parts) != len(want) {
			t.Fatalf("%d parts, want %d", len(c.Parts), len(want))
		}
		for i := range c.Parts {
			ms := c.MembersOf(&c.Parts[i])
			if len(ms) != len(want[i]) {
				t.Fatalf("part %d: %d members %+v, want %q", i, len(ms), ms, want[i])
			}
			for j, m := range ms {
				if got := string(body[m.Start:m.End]); got != want[i][j] {
					t.Errorf("part %d member %d: %s, want %s", i, j, got, want[i][j])
				}
			}
		}
		if ms := c.MembersOf(&c.Parts[1]); ms[3].Name != "x-y" || ms[1].Name != "content" || ms[1].Value.Kind() != Array {
			t.Errorf("names %q %q, kind %v", ms[3].Name, ms[1].Name, ms[1].Value.Kind())
		}
	}
}

// Forget leaves nothing of the body in a Chat's slices, their room
// included (a pooled reader kept every part's members otherwise), and the
// Chat reads the next body as a fresh one would.
func TestChatForget(t *testing.T) {
	body := []byte(`{"model":"m","messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"x"},` +
		`{"type":"image","source":{}}]}],"stop":["a","b"],"stream_options":{"include_usage":true}}`)
	var c Chat
	if err := ReadChat(body, &c); err != nil {
		t.Fatal(err)
	}
	if len(c.PartMembers) == 0 || len(c.Stops) == 0 || len(c.Options) == 0 {
		t.Fatalf("the body's lists were not read: %+v", c)
	}
	c.Forget()
	if c.Body.Raw != nil || c.Model.Raw != nil || c.Messages.Raw != nil {
		t.Fatal("Forget kept a member's bytes")
	}
	for name, n := range map[string]int{"Members": len(c.Members), "Items": len(c.Items), "Parts": len(c.Parts),
		"PartMembers": len(c.PartMembers), "Stops": len(c.Stops), "Options": len(c.Options)} {
		if n != 0 {
			t.Errorf("%s: %d left", name, n)
		}
	}
	for _, m := range c.Members[:cap(c.Members)] {
		if m.Value.Raw != nil {
			t.Fatal("a member's room still points into the body")
		}
	}
	for _, m := range c.PartMembers[:cap(c.PartMembers)] {
		if m.Value.Raw != nil {
			t.Fatal("a part member's room still points into the body")
		}
	}
	for _, p := range c.Parts[:cap(c.Parts)] {
		if p.Value.Raw != nil || p.Type.Raw != nil {
			t.Fatal("a part's room still points into the body")
		}
	}
	var fresh Chat
	if err := ReadChat(body, &c); err != nil {
		t.Fatal(err)
	}
	if err := ReadChat(body, &fresh); err != nil {
		t.Fatal(err)
	}
	if len(c.PartMembers) != len(fresh.PartMembers) || len(c.Parts) != len(fresh.Parts) {
		t.Fatal("a forgotten Chat reads the body differently")
	}
}
