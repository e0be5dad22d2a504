package openai

import (
	"bytes"
	"io"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"unsafe"

	"github.com/llmedge/llmedge/api"
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

// The routing messages of a Responses body are the body's bytes:
// instructions and a string input or content quoted, a content array as
// Parts (a text part's text, any other part whole), another item (a call,
// its output) whole; nothing decoded.
func TestResponsesMessagesAsWritten(t *testing.T) {
	rs := Responses{New(api.Limits{}, []string{"qwen"}).WithResponsesModes(map[string]ResponsesMode{"qwen": ResponsesPassthrough})}
	call := `{"type":"function_call","call_id":"c1","name":"f","arguments":"{\"a\":1}"}`
	body := `{"model":"qwen","instructions":"caf\u00e9 na\u00efve","input":[{"role":"user","content":"say \"hi\"\n你好"},` +
		`{"type":"message","role":"assistant","content":[{"type":"output_text","text":"\ud83d\ude80 ok"},{"type":"refusal","refusal":"no"}]},` + call + `]}`
	chat, aerr := rs.parseResponses([]byte(body))
	if aerr != nil {
		t.Fatal(aerr)
	}
	raw := chat.Wire.Body
	want := []struct{ role, written, text string }{
		{api.RoleSystem, `caf\u00e9 na\u00efve`, "café naïve"},
		{api.RoleUser, `say \"hi\"\n你好`, "say \"hi\"\n你好"},
		{api.RoleAssistant, `\ud83d\ude80 ok` + "\n" + `{"type":"refusal","refusal":"no"}`, "🚀 ok\n" + `{"type":"refusal","refusal":"no"}`},
		{api.RoleAssistant, call, call},
	}
	if len(chat.Messages) != len(want) {
		t.Fatalf("%d messages, want %d", len(chat.Messages), len(want))
	}
	for i, w := range want {
		m := &chat.Messages[i]
		if m.Role != w.role || m.Content != "" || m.Written() != w.written || m.Text() != w.text {
			t.Fatalf("message %d: %s %q written %q text %q; want %s %q %q", i, m.Role, m.Content, m.Written(), m.Text(), w.role, w.written, w.text)
		}
		for j, p := range append(m.Parts, m.Quoted) {
			if p != nil && !within(p, raw) {
				t.Fatalf("message %d, piece %d: %s is a copy, not the body's bytes", i, j, p)
			}
		}
	}
}

// max_content_chars counts characters, as the chat door does: an escape
// is one, a multi-byte character one, the newline that joins two parts
// one, and a part that is not text nothing.
func TestResponsesContentChars(t *testing.T) {
	rs := Responses{New(api.Limits{MaxContentChars: 20}, []string{"qwen"})}
	for _, tc := range []struct {
		name, content, refused string
	}{
		{"20 escapes", `"` + strings.Repeat(`\u00e9`, 20) + `"`, ""},
		{"21 escapes", `"` + strings.Repeat(`\u00e9`, 21) + `"`, "got a string with length 21"},
		{"20 two-byte characters", `"` + strings.Repeat("é", 20) + `"`, ""},
		{"parts and their newline", `[{"type":"input_text","text":"` + strings.Repeat("é", 10) + `"},{"type":"input_text","text":"` + strings.Repeat(`\n`, 10) + `"}]`, "got a string with length 21"},
		{"an image is not text", `[{"type":"input_text","text":"` + strings.Repeat("x", 19) + `"},{"type":"input_image","image_url":"https://example.com/` + strings.Repeat("a", 100) + `"}]`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, shape := range []struct{ body, param string }{
				{`{"model":"qwen","input":[{"role":"user","content":` + tc.content + `}]}`, "input[0].content"},
				{`{"model":"qwen","input":` + tc.content + `}`, "input"},
				{`{"model":"qwen","instructions":` + tc.content + `,"input":"hi"}`, "instructions"},
			} {
				if !strings.HasPrefix(tc.content, `"`) && shape.param != "input[0].content" {
					continue // only a message's content is an array of parts
				}
				_, aerr := rs.parseResponses([]byte(shape.body))
				switch {
				case tc.refused == "" && aerr != nil:
					t.Fatalf("%s: refused: %v", shape.param, aerr)
				case tc.refused != "" && (aerr == nil || aerr.Code != codeStringTooLong || aerr.Param != shape.param || !strings.Contains(message(aerr), tc.refused)):
					t.Fatalf("%s: %v, want %s saying %q", shape.param, aerr, codeStringTooLong, tc.refused)
				}
			}
		})
	}
}

// Reading a 100 KB or 1 MB conversation carried through allocates a
// bounded number of small objects, not a copy of its text. (Before, the
// door decoded every text and joined the parts: about 160 KB and 149
// allocations per 100 KB request.)
func TestResponsesDecodeAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector changes what is allocated")
	}
	rs := Responses{New(api.Limits{}, []string{"qwen"}).WithResponsesModes(map[string]ResponsesMode{"qwen": ResponsesPassthrough})}
	for _, size := range []int{100 << 10, 1 << 20} {
		body := responsesConversation(size)
		decode := func() {
			r := &http.Request{Header: http.Header{"Content-Type": {"application/json"}},
				Body: io.NopCloser(bytes.NewReader(body)), ContentLength: int64(len(body))}
			chat, _, aerr := rs.Decode(r)
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

// A completion's string prompt and an embedding's string input are kept
// as written too, and counted as characters.
func TestPromptAsWritten(t *testing.T) {
	f := New(api.Limits{MaxContentChars: 20}, []string{"qwen"})
	for _, tc := range []struct {
		format api.Format
		name   string
	}{{api.FormatOpenAICompletions, "prompt"}, {api.FormatOpenAIEmbeddings, "input"}} {
		body := []byte(`{"model":"qwen","` + tc.name + `":"caf\u00e9 \"q\" 你好"}`)
		chat, aerr := f.parseOther(body, tc.format, tc.name)
		if aerr != nil {
			t.Fatal(aerr)
		}
		if m := chat.Messages[0]; len(chat.Messages) != 1 || m.Role != api.RoleUser || !within(m.Quoted, body) ||
			m.Written() != `caf\u00e9 \"q\" 你好` || m.Text() != `café "q" 你好` {
			t.Fatalf("%s: %+v", tc.name, chat.Messages)
		}
		if _, aerr := f.parseOther([]byte(`{"model":"qwen","`+tc.name+`":"`+strings.Repeat(`\u00e9`, 20)+`"}`), tc.format, tc.name); aerr != nil {
			t.Fatalf("%s: 20 escapes refused: %v", tc.name, aerr)
		}
		_, aerr = f.parseOther([]byte(`{"model":"qwen","`+tc.name+`":"`+strings.Repeat("é", 21)+`"}`), tc.format, tc.name)
		if aerr == nil || aerr.Code != codeStringTooLong || aerr.Param != tc.name || !strings.Contains(message(aerr), "length 21") {
			t.Fatalf("%s: 21 characters: %v", tc.name, aerr)
		}
	}
}
