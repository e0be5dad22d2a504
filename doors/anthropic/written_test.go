package anthropic

import (
	"bytes"
	"io"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/doors/openai"
	"github.com/llmedge/llmedge/routing/prefix"
)

// within reports whether b is a sub-slice of body: the door kept the
// client's bytes, neither decoded nor copied.
func within(b, body []byte) bool {
	if len(b) == 0 || len(body) == 0 {
		return false
	}
	start := uintptr(unsafe.Pointer(unsafe.SliceData(body)))
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	return p >= start && p+uintptr(len(b)) <= start+uintptr(len(body))
}

// The routing messages of a body carried through are the body's bytes:
// string contents quoted, blocks as Parts (a text block's text, any other
// block whole), the system prompt alike; nothing decoded.
func TestMessagesAsWritten(t *testing.T) {
	d := New(api.Limits{}, []string{"qwen"}, map[string]Mode{"qwen": ModePassthrough})
	body := `{"model":"qwen","max_tokens":8,"system":[{"type":"text","text":"caf\u00e9"},{"type":"text","text":"na\u00efve 你好"}],` +
		`"messages":[{"role":"user","content":"say \"hi\"\n"},{"role":"assistant","content":[{"type":"text","text":"\ud83d\ude80 ok"},` +
		`{"type":"tool_use","id":"t1","name":"f","input":{"a":1}}]}]}`
	chat, raw, aerr := d.Decode(post(PathMessages, body))
	if aerr != nil {
		t.Fatal(aerr)
	}
	want := []struct {
		role, written, text string
		parts               int
	}{
		{api.RoleSystem, `caf\u00e9` + "\n" + `na\u00efve 你好`, "café\nnaïve 你好", 2},
		{api.RoleUser, `say \"hi\"\n`, "say \"hi\"\n", 0},
		{api.RoleAssistant, `\ud83d\ude80 ok` + "\n" + `{"type":"tool_use","id":"t1","name":"f","input":{"a":1}}`,
			"🚀 ok\n" + `{"type":"tool_use","id":"t1","name":"f","input":{"a":1}}`, 2},
	}
	if len(chat.Messages) != len(want) {
		t.Fatalf("%d messages, want %d", len(chat.Messages), len(want))
	}
	for i, w := range want {
		m := &chat.Messages[i]
		if m.Role != w.role || m.Content != "" || m.Written() != w.written || m.Text() != w.text || len(m.Parts) != w.parts {
			t.Fatalf("message %d: %s %q written %q text %q, %d parts; want %s %q %q, %d parts",
				i, m.Role, m.Content, m.Written(), m.Text(), len(m.Parts), w.role, w.written, w.text, w.parts)
		}
		for j, p := range append(m.Parts, m.Quoted) {
			if p != nil && !within(p, raw) {
				t.Fatalf("message %d, piece %d: %s is a copy, not the body's bytes", i, j, p)
			}
		}
	}
}

// max_content_chars counts characters, as the chat door does: an escape
// is one, a multi-byte character one, and the newline that joins two text
// blocks one; only a text longer in bytes than the limit is decoded to be
// counted.
func TestContentCharsAsWritten(t *testing.T) {
	d := testDoor() // at most 20 characters
	for _, tc := range []struct {
		name, content, refused string
	}{
		{"20 escapes", `"` + strings.Repeat(`\u00e9`, 20) + `"`, ""},
		{"21 escapes", `"` + strings.Repeat(`\u00e9`, 21) + `"`, "got 21"},
		{"20 two-byte characters", `"` + strings.Repeat("é", 20) + `"`, ""},
		{"surrogate pairs", `"` + strings.Repeat(`\ud83d\ude80`, 20) + `"`, ""},
		{"blocks within", `[{"type":"text","text":"` + strings.Repeat(`\n`, 10) + `"},{"type":"text","text":"` + strings.Repeat("x", 9) + `"}]`, ""},
		{"blocks and their newline", `[{"type":"text","text":"` + strings.Repeat("é", 10) + `"},{"type":"text","text":"` + strings.Repeat("x", 10) + `"}]`, "got 21"},
		{"an image is not text", `[{"type":"text","text":"` + strings.Repeat("x", 19) + `"},{"type":"image","source":{"type":"url","url":"https://example.com/` + strings.Repeat("a", 100) + `"}}]`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := `{"model":"llama","max_tokens":5,"messages":[{"role":"user","content":` + tc.content + `}]}`
			_, _, aerr := d.Decode(post(PathMessages, body))
			switch {
			case tc.refused == "" && aerr != nil:
				t.Fatalf("refused: %v", aerr)
			case tc.refused != "" && (aerr == nil || aerr.Status != 400 || !strings.Contains(message(aerr), "messages.0.content: the text is too long") ||
				!strings.Contains(message(aerr), tc.refused)):
				t.Fatalf("%v, want a 400 saying %q", aerr, tc.refused)
			}
			sys := `{"model":"llama","max_tokens":5,"system":` + tc.content + `,"messages":[{"role":"user","content":"hi"}]}`
			if strings.Contains(tc.content, "image") {
				return // the system prompt takes text blocks only
			}
			_, _, aerr = d.Decode(post(PathMessages, sys))
			if (tc.refused == "") != (aerr == nil) || (aerr != nil && !strings.Contains(message(aerr), "system: the text is too long")) {
				t.Fatalf("as the system prompt: %v", aerr)
			}
		})
	}
}

// One conversation asked through OpenAI's chat door, Anthropic's and the
// Responses door is one prompt to prefix routing: the same hashes,
// escapes and non-ASCII text included (each door reads the text as the
// client wrote it), so that a conversation's replica is the same
// whichever API its client speaks.
func TestRoutingKeyAcrossDoors(t *testing.T) {
	h, err := prefix.NewHasher("qwen", 16, prefix.DefaultMaxBlocks)
	if err != nil {
		t.Fatal(err)
	}
	anth := New(api.Limits{}, []string{"qwen"}, map[string]Mode{"qwen": ModePassthrough})
	chat := openai.New(api.Limits{}, []string{"qwen"})
	resp := openai.Responses{Door: chat}
	for _, tc := range []struct{ name, sys, a, b string }{
		{"plain", `"Be terse."`, `"What is in a.go?"`, `"And in b.go?"`},
		{"escapes", `"caf\u00e9 \"q\"\n\\path"`, `"line one\nline two\t\u2603"`, `"\ud83d\ude80 launch"`},
		{"non-ASCII", `"naïve 你好"`, `"größer als"`, `"日本語のテキスト"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bodies := map[string]string{
				"chat": `{"model":"qwen","messages":[{"role":"system","content":` + tc.sys + `},` +
					`{"role":"user","content":[{"type":"text","text":` + tc.a + `},{"type":"text","text":` + tc.b + `}]}]}`,
				"anthropic": `{"model":"qwen","max_tokens":8,"system":` + tc.sys + `,` +
					`"messages":[{"role":"user","content":[{"type":"text","text":` + tc.a + `},{"type":"text","text":` + tc.b + `}]}]}`,
				"responses": `{"model":"qwen","instructions":` + tc.sys + `,` +
					`"input":[{"role":"user","content":[{"type":"input_text","text":` + tc.a + `},{"type":"input_text","text":` + tc.b + `}]}]}`,
			}
			hashes := map[string][]uint64{}
			for door, body := range bodies {
				var c api.Chat
				var aerr *api.Error
				switch r := post("/", body); door {
				case "chat":
					c, _, aerr = chat.Decode(r)
				case "anthropic":
					c, _, aerr = anth.Decode(r)
				case "responses":
					c, _, aerr = resp.Decode(r)
				}
				if aerr != nil {
					t.Fatalf("%s: %v", door, aerr)
				}
				hashes[door] = h.Append(nil, c.Messages)
			}
			if len(hashes["chat"]) == 0 || !slices.Equal(hashes["chat"], hashes["anthropic"]) || !slices.Equal(hashes["chat"], hashes["responses"]) {
				t.Fatalf("hashes differ: %v", hashes)
			}
		})
	}
}

// Reading a 100 KB conversation carried through allocates a bounded
// number of small objects, not a copy of its text: nothing is decoded
// or joined. (Before, the door decoded every text and joined the blocks:
// about 160 KB and 142 allocations per request.)
func TestDecodeAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector changes what is allocated")
	}
	d := New(api.Limits{}, []string{"qwen"}, map[string]Mode{"qwen": ModePassthrough})
	for _, size := range []int{100 << 10, 1 << 20} {
		body := agentContext(size)
		decode := func() {
			r := &http.Request{Header: http.Header{"Content-Type": {"application/json"}},
				Body: io.NopCloser(bytes.NewReader(body)), ContentLength: int64(len(body))}
			chat, _, aerr := d.Decode(r)
			if aerr != nil {
				t.Fatal(aerr)
			}
			chat.Wire.Lease.Release()
		}
		if n := testing.AllocsPerRun(20, decode); n > 70 {
			t.Errorf("%d bytes: %v allocations per request, want at most 70", len(body), n)
		}
		const runs = 20
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for range runs {
			decode()
		}
		runtime.ReadMemStats(&after)
		if per := (after.TotalAlloc - before.TotalAlloc) / runs; per > 32<<10 {
			t.Errorf("%d bytes: %d bytes allocated per request, want at most 32 KiB", len(body), per)
		}
	}
}
