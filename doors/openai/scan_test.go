package openai

import (
	"bytes"
	"encoding/json"
	"testing"
)

var walkSeeds = []string{
	`{}`, `[]`, `{"a":1,"b":[1,{"c":"]}"}],"d":"x\"y","a":null}`, ` { "k" : "v" , "e":{ } } `,
	`[1, "two", {"three":[3]}, [], true, false, null, -1.5e3]`, `{"mod\u0065l":"q","\u00e9":"\ud83d\ude42"}`,
	`{"s":"bad \\ \/ \b\f\n\r\t \u0000"}`, `"str"`, `12`, `{"a":{"b":{"c":[[[]]]}}}`,
}

// FuzzWalk holds the in-place walker to encoding/json on every valid JSON
// document: eachMember yields the members a map decoding keeps (the last
// of a repeated key), eachElement the elements, and unquote the strings.
func FuzzWalk(f *testing.F) {
	for _, s := range walkSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		if !json.Valid(doc) {
			return
		}
		var m map[string]json.RawMessage
		if json.Unmarshal(doc, &m) == nil && m != nil {
			got := map[string][]byte{}
			eachMember(doc, func(key, val []byte) bool {
				got[keyName(key)] = val
				return true
			})
			if len(got) != len(m) {
				t.Fatalf("%d members, encoding/json %d: %s", len(got), len(m), doc)
			}
			for k, v := range m {
				if !bytes.Equal(got[k], v) {
					t.Fatalf("member %q: %s, encoding/json %s", k, got[k], v)
				}
				checkValue(t, v)
			}
		}
		var a []json.RawMessage
		if json.Unmarshal(doc, &a) == nil && a != nil {
			var got [][]byte
			eachElement(doc, func(i int, val []byte) bool {
				if i != len(got) {
					t.Fatalf("index %d after %d elements", i, len(got))
				}
				got = append(got, val)
				return true
			})
			if len(got) != len(a) || countElements(doc) != len(a) {
				t.Fatalf("%d elements, encoding/json %d: %s", len(got), len(a), doc)
			}
			for i := range a {
				if !bytes.Equal(got[i], a[i]) {
					t.Fatalf("element %d: %s, encoding/json %s", i, got[i], a[i])
				}
				checkValue(t, a[i])
			}
		}
		checkValue(t, bytes.TrimSpace(doc))
	})
}

// checkValue compares unquote with encoding/json on a string value.
func checkValue(t *testing.T, v []byte) {
	if len(v) == 0 || v[0] != '"' {
		return
	}
	var want string
	if err := json.Unmarshal(v, &want); err != nil {
		t.Fatal(err)
	}
	if got := unquote(v); got != want {
		t.Fatalf("unquote(%s) = %q, encoding/json %q", v, got, want)
	}
}

// FuzzParse feeds arbitrary bodies to the request parser: it must never
// panic, must be deterministic, and must either accept a request that
// honours every limit or refuse with a 400 or 404 that says why.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		`{"model":"qwen","messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"gemma","messages":[{"role":"developer","content":[{"type":"text","text":"a"},{"type":"image_url"}]}],"stream":true,"stream_options":{"include_usage":true}}`,
		`{"model":"qwen","messages":[{"role":"user","content":"x"}],"temperature":2,"top_p":0,"max_tokens":1,"stop":["a"],"seed":-1,"n":1,"tools":[]}`,
		`{"model":"qwen","messages":[{"role":"user","content":"x"}],"max_tokens":1.0}`, `{"model":"qwen","messages":[]}`, `[]`, `null`, `{`,
	} {
		f.Add([]byte(s))
	}
	front := testDoor()
	f.Fuzz(func(t *testing.T, body []byte) {
		chat, err := front.parse(body)
		chat2, err2 := front.parse(body)
		if (err == nil) != (err2 == nil) || (err != nil && (err.Status != err2.Status || err.Param != err2.Param || err.Code != err2.Code)) {
			t.Fatalf("not deterministic: %v / %v", err, err2)
		}
		if err != nil {
			if (err.Status != 400 && err.Status != 404) || err.Code == "" || message(err) == "" {
				t.Fatalf("refusal %d %q %q", err.Status, err.Code, message(err))
			}
			return
		}
		if chat.Model != chat2.Model || len(chat.Messages) != len(chat2.Messages) {
			t.Fatal("not deterministic")
		}
		if (chat.Model != "qwen" && chat.Model != "gemma") || len(chat.Messages) == 0 || len(chat.Messages) > 4 {
			t.Fatalf("accepted %+v", chat)
		}
		for _, m := range chat.Messages {
			if m.Role != "system" && m.Role != "user" && m.Role != "assistant" {
				t.Fatalf("role %q", m.Role)
			}
		}
		s := chat.Sampling
		if (s.Temperature != nil && (*s.Temperature < 0 || *s.Temperature > 2)) || (s.TopP != nil && (*s.TopP < 0 || *s.TopP > 1)) ||
			s.MaxTokens < 0 || len(s.Stop) > maxStop || (chat.IncludeUsage && !chat.Stream) {
			t.Fatalf("accepted %+v", chat)
		}
	})
}
