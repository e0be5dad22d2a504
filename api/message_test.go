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

// A message of content parts left as written reads as its parts decoded
// and joined with newlines (what the door once made of them), and routing
// and the limits read its parts in place.
func TestMessageParts(t *testing.T) {
	img := `{"type":"image_url","image_url":{"url":"data:x"}}`
	for _, tc := range []struct {
		name    string
		parts   []string
		text    string // decoded and joined
		written string // as routing renders it
	}{
		{"one text", []string{`"hi"`}, "hi", "hi"},
		{"texts joined", []string{`"one"`, `"two"`}, "one\ntwo", "one\ntwo"},
		{"escapes decoded only for Text", []string{`"caf\u00e9"`, `"\"q\"\n"`}, "café\n\"q\"\n", `caf\u00e9` + "\n" + `\"q\"\n`},
		{"an image as written", []string{`"look"`, img}, "look\n" + img, "look\n" + img},
		{"empty texts", []string{`""`, `""`}, "\n", "\n"},
		{"none", []string{}, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := Message{Role: RoleUser, Parts: make([][]byte, len(tc.parts))}
			for i, p := range tc.parts {
				m.Parts[i] = []byte(p)
			}
			if m.Text() != tc.text {
				t.Fatalf("Text %q, want %q", m.Text(), tc.text)
			}
			if m.Written() != tc.written {
				t.Fatalf("Written %q, want %q", m.Written(), tc.written)
			}
			var pieces string
			for s := range m.Pieces {
				pieces += s
			}
			if pieces != tc.written {
				t.Fatalf("Pieces %q, want %q", pieces, tc.written)
			}
			if m.Size() != len(tc.written) || m.Size() < len(tc.text)-len(img) {
				t.Fatalf("Size %d, written %d bytes", m.Size(), len(tc.written))
			}
			// Translated, it is the one string the door once joined.
			want, _ := json.Marshal(Message{Role: RoleUser, Content: tc.text})
			if got := AppendMessage(nil, &m); string(got) != string(want) {
				t.Fatalf("encoded %s, want %s", got, want)
			}
		})
	}
}

// Pieces stops when its consumer does.
func TestMessagePiecesStop(t *testing.T) {
	m := Message{Parts: [][]byte{[]byte(`"a"`), []byte(`"b"`), []byte(`"c"`)}}
	n := 0
	for range m.Pieces {
		if n++; n == 2 {
			break
		}
	}
	if n != 2 {
		t.Fatalf("%d pieces after a break at 2", n)
	}
}

// CharsOver counts a message's text as max_content_chars does, whatever
// its form, and decodes nothing within the limit.
func TestMessageCharsOver(t *testing.T) {
	img := []byte(`{"type":"image_url","image_url":{"url":"data:xxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}}`)
	for _, tc := range []struct {
		name  string
		m     Message
		limit int
		n     int
		over  bool
	}{
		{"content within", Message{Content: "héllo"}, 5, 0, false},
		{"content over", Message{Content: "héllo!"}, 5, 6, true},
		{"quoted escapes within", Message{Quoted: []byte(`"\u00e9\u00e9\u00e9\n\"\\"`)}, 6, 0, false},
		{"quoted escapes over", Message{Quoted: []byte(`"\u00e9\u00e9\u00e9\n\"\\"`)}, 5, 6, true},
		{"quoted surrogate pair is one", Message{Quoted: []byte(`"\ud83d\ude80"`)}, 1, 0, false},
		{"quoted multi-byte", Message{Quoted: []byte(`"你好世界"`)}, 3, 4, true},
		{"parts and newlines", Message{Parts: [][]byte{[]byte(`"ab"`), []byte(`"c\u00e9"`)}}, 4, 5, true},
		{"parts within", Message{Parts: [][]byte{[]byte(`"ab"`), []byte(`"c\u00e9"`)}}, 5, 0, false},
		{"an image counts its newline only", Message{Parts: [][]byte{[]byte(`"abc"`), img}}, 4, 0, false},
		{"no parts", Message{Parts: [][]byte{}}, 0, 0, false},
		{"empty quoted", Message{Quoted: []byte(`""`)}, 0, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, over := tc.m.CharsOver(tc.limit)
			if n != tc.n || over != tc.over {
				t.Fatalf("CharsOver(%d) = %d, %v; want %d, %v", tc.limit, n, over, tc.n, tc.over)
			}
		})
	}
	long := Message{Quoted: []byte(`"a long text within the limit"`)}
	if n := testing.AllocsPerRun(100, func() { long.CharsOver(100) }); n != 0 {
		t.Fatalf("CharsOver within the limit allocates %v times", n)
	}
}
