package wire

import (
	"encoding/json"
	"testing"
)

func TestEdits(t *testing.T) {
	body := []byte(`{ "model" : "qwen", "n":2 ,"messages":[{"role":"user","content":"caf\u00e9"}],"x":1.50}`)
	var c Chat
	if err := ReadChat(body, &c); err != nil {
		t.Fatal(err)
	}
	idx := func(name string) int {
		for i, m := range c.Members {
			if m.Name == name {
				return i
			}
		}
		t.Fatalf("no member %s", name)
		return -1
	}
	for _, tc := range []struct {
		name  string
		edits []Edit
		want  string
	}{
		{"replace the model", []Edit{Replace(c.Model, []byte(`"Qwen/Qwen2.5"`))},
			`{ "model" : "Qwen/Qwen2.5", "n":2 ,"messages":[{"role":"user","content":"caf\u00e9"}],"x":1.50}`},
		{"remove the first member", []Edit{RemoveMember(c.Members, idx("model"))},
			`{ "n":2 ,"messages":[{"role":"user","content":"caf\u00e9"}],"x":1.50}`},
		{"remove a middle member", []Edit{RemoveMember(c.Members, idx("n"))},
			`{ "model" : "qwen", "messages":[{"role":"user","content":"caf\u00e9"}],"x":1.50}`},
		{"remove the last member", []Edit{RemoveMember(c.Members, idx("x"))},
			`{ "model" : "qwen", "n":2 ,"messages":[{"role":"user","content":"caf\u00e9"}]}`},
		{"add a member", []Edit{AddMember(c.Body, c.Members, "stream_options", []byte(`{"include_usage":true}`))},
			`{ "model" : "qwen", "n":2 ,"messages":[{"role":"user","content":"caf\u00e9"}],"x":1.50,"stream_options":{"include_usage":true}}`},
		{"insert a message and replace the model", []Edit{
			{Start: c.Items[0].Start, End: c.Items[0].Start, Text: []byte(`{"role":"system","content":"Be brief."},`)},
			Replace(c.Model, []byte(`"m"`)),
		}, `{ "model" : "m", "n":2 ,"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"caf\u00e9"}],"x":1.50}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := string(Apply(nil, body, tc.edits))
			if got != tc.want {
				t.Fatalf("got  %s\nwant %s", got, tc.want)
			}
			if !json.Valid([]byte(got)) {
				t.Fatalf("not JSON: %s", got)
			}
		})
	}
	var empty Chat
	if err := ReadChat([]byte(`{}`), &empty); err != nil {
		t.Fatal(err)
	}
	if got := string(Apply(nil, []byte(`{}`), []Edit{AddMember(empty.Body, empty.Members, "a", []byte(`1`))})); got != `{"a":1}` {
		t.Fatalf("add to an empty object: %s", got)
	}
}

func TestReadRequest(t *testing.T) {
	body := []byte(` {"model":"q","input":["a","b"],"n":{"x":[1,2]}} `)
	var o Request
	if err := ReadRequest(body, &o); err != nil {
		t.Fatal(err)
	}
	if len(o.Members) != 3 || string(o.Member("input").Raw) != `["a","b"]` || o.Member("missing").Raw != nil ||
		string(body[o.Body.Start:o.Body.End]) != string(o.Body.Raw) {
		t.Fatalf("%+v", o)
	}
	for _, m := range o.Members {
		if string(body[m.Value.Start:m.Value.End]) != string(m.Value.Raw) {
			t.Fatalf("span of %s", m.Name)
		}
	}
	for _, bad := range []string{`{"a":1,"a":2}`, `{"a":{"b":1,"b":2}}`, "{\"a\":\"\xff\"}", `{"a":1} x`, `{"a":`} {
		if err := ReadRequest([]byte(bad), &o); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
