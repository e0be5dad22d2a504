package e2e

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"
)

// longWords are a long message's text as JSON spells it: escapes, and
// characters of two, three and four bytes, those whose second byte has a
// narrower range among them (Devanagari after E0, Hangul after ED, an
// emoji after F0).
const longWords = `plain words, \"quoted\", a \\path, caf\u00e9 \ud83d\ude00 naïve 日本語 हिन्दी 한국어 😀 → end.\n `

// TestLongStringsChecked: a long message is checked 64 bytes at a time
// where the gateway reads it (its special bytes marked at once, each then
// checked in turn). Over HTTPS, through the chat and native doors: a
// conversation of long texts full of escapes and multi-byte characters
// reaches the replica as sent; the same conversation with one fault deep
// in one of its texts, at each offset of a block, is the door's refusal
// of a body that is not JSON (400 invalid_json, native 422 json_invalid),
// and reaches no replica.
func TestLongStringsChecked(t *testing.T) {
	sim := startSim(t, "-tokens", "2")
	g := startGateway(t, GatewayConfig{Models: map[string]string{"qwen": staticModel(sim)}})
	tok := g.Token(t, "demo", "demo", "")
	text := strings.Repeat(longWords, 400) // about 40 KB
	// A fault goes in at a word's start in the middle of the second text,
	// behind pad plain bytes.
	mid := len(text) / 2 / len(longWords) * len(longWords)
	body := func(head, fault string, pad int) []byte {
		second := text
		if fault != "" {
			second = text[:mid] + strings.Repeat("a", pad) + fault + text[mid:]
		}
		return []byte(head + `"messages":[{"role":"system","content":"` + text + `"},{"role":"user","content":"` +
			second + `"},{"role":"assistant","content":"ok"}]}`)
	}
	post := func(path string, b []byte) (int, []byte) {
		req, _ := http.NewRequestWithContext(t.Context(), "POST", g.Base+path, bytes.NewReader(b))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := g.Client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, out
	}
	doors := []struct {
		name, path, head string
		code             int    // the door's status for a body that is not JSON
		says             string // and what its error shape says
	}{
		{"chat", "/v1/chat/completions", `{"model":"qwen","max_tokens":4,`, http.StatusBadRequest, `"code":"invalid_json"`},
		{"native", "/tasks/assistant_inference", `{"model_type":"qwen",`, http.StatusUnprocessableEntity, `"type":"json_invalid"`},
	}

	// Whole: the messages reach the replica as the client wrote them.
	for _, d := range doors {
		sim.reset(t)
		b := body(d.head, "", 0)
		if code, out := post(d.path, b); code != 200 {
			t.Fatalf("%s: %d %s", d.name, code, out)
		}
		got := sim.requests(t)
		if len(got) != 1 {
			t.Fatalf("%s: the replica got %d requests", d.name, len(got))
		}
		msgs := b[bytes.Index(b, []byte(`"messages":`)):]
		if !bytes.Contains(got[0].Body, msgs[:len(msgs)-1]) {
			t.Fatalf("%s: the replica's body (%d bytes) lacks the messages as written", d.name, len(got[0].Body))
		}
	}

	// Broken: each fault behind 0 to 64 plain bytes, so that it falls at
	// the start, the middle and the end of a block, and where a sequence
	// crosses into the next block.
	faults := []struct{ name, s string }{
		{"invalid byte", "\xff"},
		{"continuation byte alone", "\x80"},
		{"truncated character", "\xe6\x97"},
		{"overlong form", "\xc0\xaf"},
		{"overlong after E0", "\xe0\x80\x80"},
		{"surrogate in UTF-8", "\xed\xa0\x80"},
		{"above U+10FFFF", "\xf4\x90\x80\x80"},
		{"control character", "\x01"},
		{"raw line break", "\n"},
		{"unknown escape", `\x`},
		{"short unicode escape", `\u12x`},
		{"lone surrogate escape", `\ud800`},
	}
	for _, d := range doors {
		sim.reset(t)
		for _, f := range faults {
			for _, pad := range []int{0, 1, 7, 31, 32, 61, 62, 63, 64} {
				code, out := post(d.path, body(d.head, f.s, pad))
				if code != d.code {
					t.Fatalf("%s, %s behind %d bytes: %d %s, want %d", d.name, f.name, pad, code, out, d.code)
				}
				if !bytes.Contains(out, []byte(d.says)) {
					t.Fatalf("%s, %s behind %d bytes: %s, want the door's error saying %s", d.name, f.name, pad, out, d.says)
				}
			}
		}
		if got := sim.requests(t); len(got) != 0 {
			t.Fatalf("%s: %d broken bodies reached the replica", d.name, len(got))
		}
	}
}
