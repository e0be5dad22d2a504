package api

import (
	"encoding/json"
	"testing"
)

// A message left quoted reads, measures and encodes as the one decoded.
func TestMessageQuoted(t *testing.T) {
	for _, tc := range []struct {
		name, quoted, text string
	}{
		{"plain", `"hello"`, "hello"},
		{"empty", `""`, ""},
		{"escapes", `"caf\u00e9 \"q\"\n\\ <b>"`, "café \"q\"\n\\ <b>"},
		{"surrogate pair", `"\ud83d\ude80 launch"`, "🚀 launch"},
		{"multi-byte as is", `"naïve 你好"`, "naïve 你好"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := Message{Role: RoleUser, Quoted: []byte(tc.quoted)}
			d := Message{Role: RoleUser, Content: tc.text}
			if q.Text() != tc.text {
				t.Fatalf("Text %q, want %q", q.Text(), tc.text)
			}
			if q.Written() != tc.quoted[1:len(tc.quoted)-1] {
				t.Fatalf("Written %q, want the inside of %q", q.Written(), tc.quoted)
			}
			if q.Size() < len(tc.text) || q.Size() != len(tc.quoted)-2 {
				t.Fatalf("Size %d for %d bytes of text, %d inside the quotes", q.Size(), len(tc.text), len(tc.quoted)-2)
			}
			// Encoded, both say the same to a replica.
			qj, err := json.Marshal([]Message{q})
			if err != nil {
				t.Fatal(err)
			}
			var back []Message
			if err := json.Unmarshal(qj, &back); err != nil || len(back) != 1 || back[0].Content != tc.text || back[0].Role != RoleUser {
				t.Fatalf("%s decodes to %+v (%v)", qj, back, err)
			}
			dj, _ := json.Marshal(d)
			var plain struct {
				Role    string `json:"role"`
				Content string `json:"content"`
			}
			pj, _ := json.Marshal(struct {
				Role    string `json:"role"`
				Content string `json:"content"`
			}{RoleUser, tc.text})
			if string(dj) != string(pj) || json.Unmarshal(dj, &plain) != nil {
				t.Fatalf("decoded message encodes as %s, encoding/json as %s", dj, pj)
			}
		})
	}
}
