package openai

import (
	"encoding/json"
	"testing"
)

func TestAppendString(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", `""`},
		{"plain text", `"plain text"`},
		{`say "hi" \ bye`, `"say \"hi\" \\ bye"`},
		{"line\nbreak\r\ttab", `"line\nbreak\r\ttab"`},
		{"\x00\x1f\x7f", `"\u0000\u001f` + "\x7f" + `"`},
		{"héllo wörld 日本 🙂", `"héllo wörld 日本 🙂"`},
		{"bad \xff byte", `"bad \ufffd byte"`},
		{"cut \xe6\x97", `"cut \ufffd\ufffd"`},
		{"js \u2028 \u2029", `"js \u2028 \u2029"`},
		{"<html> & co", `"<html> & co"`},
	}
	for _, tt := range tests {
		if got := string(appendString(nil, tt.in)); got != tt.want {
			t.Errorf("appendString(%q) = %s, want %s", tt.in, got, tt.want)
		}
	}
}

// FuzzAppendString holds the hand-written escaping to encoding/json: the
// output must be valid JSON and decode to what encoding/json's own
// encoding of the same string decodes to (invalid UTF-8 included).
func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "a\"b\\c", "\n\r\t\x00\x01", "\xff\xfe", "日本\u2028", "\xed\xa0\x80", "🙂\xf0\x9f"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := appendString([]byte("x"), s)[1:]
		if !json.Valid(got) {
			t.Fatalf("invalid JSON %q for %q", got, s)
		}
		ref, _ := json.Marshal(s)
		var a, b string
		if err := json.Unmarshal(got, &a); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(ref, &b); err != nil {
			t.Fatal(err)
		}
		if a != b {
			t.Fatalf("%q decodes to %q, encoding/json's to %q", got, a, b)
		}
	})
}
