package wire

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// checkNative reads body and holds the result to encoding/json.
func checkNative(t *testing.T, body []byte, n *Native) error {
	t.Helper()
	err := ReadNative(body, n)
	checkAcceptance(t, body, err)
	if err != nil {
		return err
	}
	if !bytes.Equal(n.Body.Raw, bytes.Trim(body, " \t\r\n")) {
		t.Fatalf("body read as %q", n.Body.Raw)
	}
	checkSpan(t, body, "body", n.Body)
	if n.Body.Kind() != Object {
		if len(n.Members) != 0 || len(n.Items) != 0 || n.Messages.Raw != nil {
			t.Fatalf("members read from %q", body)
		}
		return nil
	}
	obj := objectOf(t, body)
	checkMembers(t, body, n.Members, obj)
	for _, m := range n.Members {
		if _, field := n.field([]byte(m.Name)); m.Known != (field != nil) {
			t.Fatalf("member %q: Known %v", m.Name, m.Known)
		}
	}
	checkValue(t, body, "messages", n.Messages, obj["messages"])
	checkValue(t, body, "model_type", n.ModelType, obj["model_type"])
	checkValue(t, body, "temperature", n.Temperature, obj["temperature"])
	checkValue(t, body, "stream", n.Stream, obj["stream"])
	checkValue(t, body, "system_message", n.SystemMessage, obj["system_message"])
	if n.Messages.Kind() != Array {
		if len(n.Items) != 0 {
			t.Fatalf("%d items of %q", len(n.Items), n.Messages.Raw)
		}
		return nil
	}
	arr := arrayOf(t, n.Messages.Raw)
	if len(n.Items) != len(arr) {
		t.Fatalf("%d items, encoding/json %d", len(n.Items), len(arr))
	}
	for i, it := range n.Items {
		checkValue(t, body, "item", it.Value, arr[i])
		if it.Kind() != Object {
			if it.Role.Raw != nil || it.Content.Raw != nil {
				t.Fatalf("members read from item %q", it.Raw)
			}
			continue
		}
		o := objectOf(t, arr[i])
		checkValue(t, body, "role", it.Role, o["role"])
		checkValue(t, body, "content", it.Content, o["content"])
	}
	return nil
}

var nativeBodies = []string{
	`{"messages":[{"role":"user","content":"hi"}]}`,
	`{"messages":[{"role":"system","content":"s"},{"role":"user","content":"u"}],"model_type":"gemma","temperature":1.5,"stream":true,"system_message":"x"}`,
	` { "messages" : [ { "role" : "user" , "content" : "spaced" } ] , "extra" : { "a" : [ 1 , 2 ] } } `,
	"{\n\t\"messages\":[\r\n{\"content\":\"a\",\"role\":\"user\",\"name\":\"n\"}],\"model_type\":null}",
	`{"messages":[1,null,"s",[],{}],"temperature":"hot","stream":"yes","system_message":7}`,
	`{"mess\u0061ges":[{"r\u006fle":"user","content":"\u00e9\n\"\\\/\ud83d\ude42"}],"model\u005ftype":"q\u0077en"}`,
	`{"Messages":[],"MODEL_TYPE":"x","model_type":"qwen"}`,
	`{"\\\\":1,"\\\\\\\\":2,"messages":[{"\\\\":3,"role":"user","content":"x"}]}`,
	`{}`, `null`, `[]`, `[1,{"a":2}]`, `"str"`, `12`, `true`,
	`{"messages":{"role":"user"}}`, `{"messages":null,"temperature":-0,"stream":1}`,
	`{"messages":[{"role":"user","content":"` + strings.Repeat("é", 300) + `"}]}`,
}

func TestReadNative(t *testing.T) {
	var n Native // reused, as the validator reuses it
	for _, body := range nativeBodies {
		if err := checkNative(t, []byte(body), &n); err != nil {
			t.Fatalf("%s: %v", body, err)
		}
	}
}

func TestReadNativeMembers(t *testing.T) {
	body := []byte(`{"messages":[{"role":"user","content":"hi"}], "x":{"k":[1]},"model_type" : "qwen"}`)
	var n Native
	if err := ReadNative(body, &n); err != nil {
		t.Fatal(err)
	}
	type member struct {
		name, whole, value string
		known              bool
	}
	want := []member{
		{"messages", `"messages":[{"role":"user","content":"hi"}]`, `[{"role":"user","content":"hi"}]`, true},
		{"x", `"x":{"k":[1]}`, `{"k":[1]}`, false},
		{"model_type", `"model_type" : "qwen"`, `"qwen"`, true},
	}
	if len(n.Members) != len(want) {
		t.Fatalf("%d members", len(n.Members))
	}
	for i, m := range n.Members {
		got := member{m.Name, string(body[m.Start:m.End]), string(body[m.Value.Start:m.Value.End]), m.Known}
		if got != want[i] {
			t.Fatalf("member %d: %+v, want %+v", i, got, want[i])
		}
	}
	if len(n.Items) != 1 || n.Items[0].Role.Text() != "user" || n.Items[0].Content.Text() != "hi" || n.ModelType.Text() != "qwen" {
		t.Fatalf("read %+v", n)
	}
}

func TestReadNativeRefuses(t *testing.T) {
	tests := []struct {
		name, body string
		offset     int
		path       string // PathString of a duplicate's path
		contains   string
	}{
		{"empty", ``, 0, "", "unexpected end of JSON input"},
		{"space only", "  \n", 3, "", "unexpected end of JSON input"},
		{"truncated", `{"messages":`, 12, "", "unexpected end of JSON input"},
		{"truncated in a message", `{"messages":[{"role":"user"`, 27, "", "unexpected end"},
		{"bad literal", `{"stream":tru}`, 13, "", "invalid character"},
		{"trailing comma", `{"messages":[],}`, 14, "", "invalid character"},
		{"leading zero", `{"temperature":01}`, 16, "", "invalid character"},
		{"second value", `{"messages":[]} {}`, 15, "", "after top-level value"},
		{"garbage after", `{"messages":[]}x`, 15, "", "invalid character"},
		{"control character", "{\"messages\":\"\x01\"}", 13, "", "invalid character"},
		{"invalid UTF-8", "{\"messages\":\"\xff\"}", 13, "", "UTF-8"},
		{"invalid UTF-8 in a name", "{\"\xc0\":1}", 2, "", "UTF-8"},
		{"unpaired surrogate", `{"system_message":"\udc00"}`, 19, "", "surrogate"},
		{"repeated member", `{"model_type":"qwen","model_type":"gemma"}`, 0, "model_type", ""},
		{"repeated, spelled with escapes", `{"model_type":"qwen","model\u005ftype":"gemma"}`, 0, "model_type", ""},
		{"repeated in a message", `{"messages":[{"role":"user","content":"a"},{"role":"user","role":"system"}]}`, 0, "messages[1].role", ""},
		{"repeated in an unknown member", `{"x":[{"a":{"0":1,"0":2}}]}`, 0, "x[0].a.0", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var n Native
			err := ReadNative([]byte(tt.body), &n)
			var we *Error
			if !errors.As(err, &we) {
				t.Fatalf("err %v", err)
			}
			if tt.path != "" {
				if !we.Duplicate || PathString(we.Path) != tt.path {
					t.Fatalf("duplicate %v path %q, want %q", we.Duplicate, PathString(we.Path), tt.path)
				}
				return
			}
			if we.Duplicate || we.Offset != tt.offset || !strings.Contains(we.Error(), tt.contains) {
				t.Fatalf("%v (offset %d), want offset %d containing %q", we, we.Offset, tt.offset, tt.contains)
			}
		})
	}
}

func TestValueIs(t *testing.T) {
	for _, tt := range []struct {
		raw, s string
		want   bool
	}{
		{`"user"`, "user", true}, {`"us\u0065r"`, "user", false}, {`"a\nb"`, `a\nb`, false},
		{`"user"`, "users", false}, {`5`, "5", false}, {`"5"`, "5", true}, {``, "", false},
	} {
		v := Value{Raw: []byte(tt.raw)}
		if tt.raw == "" {
			v.Raw = nil
		}
		if got := v.Is(tt.s); got != tt.want {
			t.Errorf("%s.Is(%q) = %v", tt.raw, tt.s, got)
		}
	}
}

func TestReadNativeAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("allocations are not counted under the race detector")
	}
	body := []byte(`{"messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"Say hello."}],"model_type":"qwen","extra":{"a":[1,2,3]}}`)
	var n Native
	if err := ReadNative(body, &n); err != nil {
		t.Fatal(err)
	}
	// Known names, raw values, a reused Native: nothing to allocate but
	// the unknown member's name.
	if a := testing.AllocsPerRun(100, func() { _ = ReadNative(body, &n) }); a > 1 {
		t.Fatalf("%v allocations per read", a)
	}
}
