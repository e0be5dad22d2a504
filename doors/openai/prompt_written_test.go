package openai

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/routing/prefix"
	"github.com/llmedge/llmedge/wire"
)

// promptDoors are the two codecs that read a prompt member.
var promptDoors = []struct {
	format api.Format
	name   string
}{{api.FormatOpenAICompletions, "prompt"}, {api.FormatOpenAIEmbeddings, "input"}}

// A batch of prompts is kept as the client wrote it: each string as
// written (quoted, escapes and all), a run of token ids one part and an
// array of ids one, all of them the body's bytes; nothing decoded or
// joined.
func TestPromptBatchAsWritten(t *testing.T) {
	f := New(api.Limits{}, []string{"qwen"})
	for _, d := range promptDoors {
		for _, tc := range []struct {
			value          string
			parts          []string
			written, text  string
			quoted, copied bool
		}{
			{`["caf\u00e9 \"q\"" , "你好"]`, []string{`"caf\u00e9 \"q\""`, `"你好"`},
				`caf\u00e9 \"q\"` + "\n" + `你好`, "café \"q\"\n你好", true, false},
			{`[1, 22,333]`, []string{`1, 22,333`}, `1, 22,333`, `1, 22,333`, false, false},
			{`[[1,2],[3]]`, []string{`[1,2]`, `[3]`}, "[1,2]\n[3]", "[1,2]\n[3]", false, false},
			{`["a",7,8,"b"]`, []string{`"a"`, `7,8`, `"b"`}, "a\n7,8\nb", "a\n7,8\nb", false, false},
		} {
			body := []byte(`{"model":"qwen","` + d.name + `":` + tc.value + `,"max_tokens":4}`)
			chat, aerr := f.parseOther(body, d.format, d.name)
			if aerr != nil {
				t.Fatalf("%s %s: %v", d.name, tc.value, aerr)
			}
			m := chat.Messages[0]
			if len(chat.Messages) != 1 || m.Role != api.RoleUser || m.Content != "" || m.Quoted != nil {
				t.Fatalf("%s %s: %+v", d.name, tc.value, chat.Messages)
			}
			var got []string
			for _, p := range m.Parts {
				if !within(p, body) {
					t.Fatalf("%s %s: part %s is a copy, not the body's bytes", d.name, tc.value, p)
				}
				got = append(got, string(p))
			}
			if !slices.Equal(got, tc.parts) || m.Written() != tc.written || m.Text() != tc.text {
				t.Fatalf("%s %s: parts %q written %q text %q; want %q %q %q", d.name, tc.value, got, m.Written(), m.Text(), tc.parts, tc.written, tc.text)
			}
			if string(chat.Wire.Body) != string(body) || chat.Wire.Messages != nil {
				t.Fatalf("%s: the body carried is not the client's, or has messages: %+v", d.name, chat.Wire)
			}
			// The elements, for the count (boundary/reserve), not read again.
			elems := 0
			_ = chat.Wire.Object.Members(func(m wire.Member) bool {
				if m.Name == d.name {
					_ = m.Value.Elements(func(int, wire.Value) bool { elems++; return true })
				}
				return true
			})
			if len(chat.Wire.Prompts) != elems {
				t.Fatalf("%s %s: %d prompts carried, want %d", d.name, tc.value, len(chat.Wire.Prompts), elems)
			}
			for _, e := range chat.Wire.Prompts {
				if !within(e.Raw, body) || string(body[e.Start:e.End]) != string(e.Raw) {
					t.Fatalf("%s %s: element %q is not the body's at its span", d.name, tc.value, e.Raw)
				}
			}
		}
	}
}

// Routing sees one prompt alike whichever door it came through: a batch
// of strings as a chat message of text parts, a string prompt as a chat
// message's string, escapes and non-ASCII text included.
func TestPromptRoutingKey(t *testing.T) {
	h, err := prefix.NewHasher("qwen", 16, prefix.DefaultMaxBlocks)
	if err != nil {
		t.Fatal(err)
	}
	f := New(api.Limits{}, []string{"qwen"})
	key := func(c api.Chat, aerr *api.Error) []uint64 {
		t.Helper()
		if aerr != nil {
			t.Fatal(aerr)
		}
		return h.Append(nil, c.Messages)
	}
	for _, tc := range []struct{ name, a, b string }{
		{"plain", `"Summarise a.go, the whole file."`, `"And b.go."`},
		{"escapes and non-ASCII", `"caf\u00e9 \"q\"\n\\path 日本語"`, `"\ud83d\ude80 größer"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			chatParts := key(f.parse([]byte(`{"model":"qwen","messages":[{"role":"user","content":[` +
				`{"type":"text","text":` + tc.a + `},{"type":"text","text":` + tc.b + `}]}]}`)))
			chatString := key(f.parse([]byte(`{"model":"qwen","messages":[{"role":"user","content":` + tc.a + `}]}`)))
			for _, d := range promptDoors {
				batch := key(f.parseOther([]byte(`{"model":"qwen","`+d.name+`":[`+tc.a+`,`+tc.b+`]}`), d.format, d.name))
				one := key(f.parseOther([]byte(`{"model":"qwen","max_tokens":3,"`+d.name+`":`+tc.a+`}`), d.format, d.name))
				if len(batch) == 0 || !slices.Equal(batch, chatParts) || !slices.Equal(one, chatString) {
					t.Fatalf("%s: batch %v, chat's parts %v; one %v, chat's string %v", d.name, batch, chatParts, one, chatString)
				}
			}
		})
	}
}

// max_content_chars counts a batch as it counted the strings joined: each
// string's characters (an escape one), a newline between prompts, and a
// token id's bytes as written.
func TestPromptBatchChars(t *testing.T) {
	f := New(api.Limits{MaxContentChars: 20}, []string{"qwen"})
	for _, tc := range []struct {
		name, value string
		refused     int // the length reported; 0: accepted
	}{
		{"two strings and their newline", `["` + strings.Repeat(`\u00e9`, 10) + `","` + strings.Repeat("é", 9) + `"]`, 0},
		{"one more character", `["` + strings.Repeat(`\u00e9`, 10) + `","` + strings.Repeat("é", 10) + `"]`, 21},
		{"twenty one-digit ids", `[` + strings.TrimSuffix(strings.Repeat("7,", 20), ",") + `]`, 0},
		{"ten two-digit ids and a one-digit one", `[` + strings.Repeat("42,", 10) + `7]`, 21},
		{"arrays of ids count as written", `[[1,2,3,4,5,6],[1,2,3,4,5,6,7]]`, 1 + 13 + 15},
		{"ids and text", `[1234567890,"` + strings.Repeat("x", 10) + `"]`, 21},
		{"ids alone beyond the limit, text besides", `[` + strings.Repeat("9", 25) + `,"ab"]`, 25 + 1 + 2},
	} {
		for _, d := range promptDoors {
			_, aerr := f.parseOther([]byte(`{"model":"qwen","`+d.name+`":`+tc.value+`}`), d.format, d.name)
			switch {
			case tc.refused == 0 && aerr != nil:
				t.Fatalf("%s, %s: refused: %v", tc.name, d.name, aerr)
			case tc.refused != 0 && (aerr == nil || aerr.Code != codeStringTooLong || aerr.Param != d.name ||
				!strings.Contains(message(aerr), fmt.Sprintf("got a string with length %d instead", tc.refused))):
				t.Fatalf("%s, %s: %v, want %s of length %d", tc.name, d.name, aerr, codeStringTooLong, tc.refused)
			}
		}
	}
}

// What is wrong with a prompt is named, in OpenAI's error shape.
func TestPromptRefused(t *testing.T) {
	f := New(api.Limits{}, []string{"qwen"})
	for _, d := range promptDoors {
		n := d.name
		for _, tc := range []struct{ body, code, param, says string }{
			{`{"model":"qwen"}`, codeMissing, n, "Missing required parameter: '" + n + "'"},
			{`{"model":"qwen","` + n + `":null}`, codeMissing, n, "Missing required parameter"},
			{`{"model":"qwen","` + n + `":7}`, codeInvalidType, n, "expected a string or an array, but got an integer"},
			{`{"model":"qwen","` + n + `":{"text":"a"}}`, codeInvalidType, n, "but got an object"},
			{`{"model":"qwen","` + n + `":[]}`, codeEmptyArray, n, "empty array"},
			{`{"model":"qwen","` + n + `":[ ]}`, codeEmptyArray, n, "empty array"},
			{`{"model":"qwen","` + n + `":["a",true]}`, codeInvalidType, n + "[1]", "a string, a token or an array of tokens, but got a boolean"},
			{`{"model":"qwen","` + n + `":["a",{"role":"user"}]}`, codeInvalidType, n + "[1]", "but got an object"},
			{`{"model":"qwen","` + n + `":[null]}`, codeInvalidType, n + "[0]", "but got null"},
			{`{"model":"qwen","` + n + `":["a"],"` + n + `":["b"]}`, codeDuplicate, n, "'" + n + "' is given more than once"},
			{`{"model":"qwen","` + n + `":["a" "b"]}`, codeInvalidJSON, "", "not valid JSON"},
			{`{"model":"qwen","` + n + `":["a",]}`, codeInvalidJSON, "", "not valid JSON"},
			{`{"model":"qwen","` + n + `":["\ud800"]}`, codeInvalidJSON, "", "not valid JSON"},
			{`{"` + n + `":"a"}`, codeMissing, "model", "You must provide a model parameter"},
			{`{"model":"qwen","` + n + `":"a","max_tokens":0}`, codeInvalidValue, "max_tokens", "must be at least 1"},
			{`{"model":"qwen","` + n + `":"a","n":"2"}`, codeInvalidType, "n", "expected an integer"},
			{`{"model":"qwen","` + n + `":"a","stream":"yes"}`, codeInvalidType, "stream", "expected a boolean"},
		} {
			_, aerr := f.parseOther([]byte(tc.body), d.format, n)
			if aerr == nil {
				t.Errorf("%s: accepted, want %s %q saying %q", tc.body, tc.code, tc.param, tc.says)
			} else if aerr.Status != http.StatusBadRequest || aerr.Code != tc.code || aerr.Param != tc.param || !strings.Contains(message(aerr), tc.says) {
				t.Errorf("%s: %+v (%q), want %d %s %q saying %q", tc.body, aerr, message(aerr), http.StatusBadRequest, tc.code, tc.param, tc.says)
			}
		}
	}
}

// The members the door reads are read from the one pass: the stream
// (completions only), include_usage, the reply cap; every member is
// carried with its span.
func TestPromptMembers(t *testing.T) {
	f := New(api.Limits{}, []string{"qwen"})
	body := []byte(`{"model":"qwen","prompt":["a","b"],"stream":true,"stream_options":{"include_usage":true},"max_tokens":9,"n":2,"echo":true}`)
	chat, aerr := f.parseOther(body, api.FormatOpenAICompletions, "prompt")
	if aerr != nil {
		t.Fatal(aerr)
	}
	if chat.Model != "qwen" || !chat.Stream || !chat.IncludeUsage || chat.Sampling.MaxTokens != 9 {
		t.Fatalf("%+v", chat)
	}
	var names []string
	for _, m := range chat.Wire.Members {
		names = append(names, m.Name)
		if string(body[m.Start:m.End]) != `"`+m.Name+`":`+string(m.Value.Raw) {
			t.Fatalf("member %s: span %q", m.Name, body[m.Start:m.End])
		}
	}
	if !slices.Equal(names, []string{"model", "prompt", "stream", "stream_options", "max_tokens", "n", "echo"}) {
		t.Fatalf("members %v", names)
	}
	emb, aerr := f.parseOther([]byte(`{"model":"qwen","input":"a","stream":true}`), api.FormatOpenAIEmbeddings, "input")
	if aerr != nil || emb.Stream {
		t.Fatalf("embeddings are not streamed: %+v %v", emb, aerr)
	}
}

// promptBody is a completions or embeddings body of about size bytes: a
// templated conversation as one string prompt, or its turns as a batch of
// strings, with escapes and non-ASCII text.
func promptBody(name string, size int, batch bool) []byte {
	line := strings.Repeat("The quick brown fox jumps over the lazy dog. ", 2)[:70] + `caf\u00e9 日本\n`
	text := strings.Repeat(line, max(size/len(line), 1))
	var b bytes.Buffer
	b.WriteString(`{"model":"qwen","max_tokens":64,"` + name + `":`)
	if !batch {
		b.WriteString(`"` + text + `"}`)
		return b.Bytes()
	}
	doc := strings.Repeat(line, max(size/len(line)/10, 1)) // whole lines: no escape cut
	b.WriteByte('[')
	for i := range 10 {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`"` + doc + `"`)
	}
	b.WriteString(`]}`)
	return b.Bytes()
}

// Reading a 100 KB or 1 MB prompt, a string or a batch, allocates a
// bounded number of small objects (12 and about 1.6 KB), not a copy of
// its text. (Before, a batch was read again, decoded and joined: 34
// allocations and 490 KB per 100 KB request, 38 and 5.3 MB at 1 MB.)
func TestPromptDecodeAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector changes what is allocated")
	}
	f := New(api.Limits{}, []string{"qwen"})
	for _, d := range promptDoors {
		decoder := gatewayDecoder(f, d.format)
		for _, batch := range []bool{false, true} {
			for _, size := range []int{100 << 10, 1 << 20} {
				body := promptBody(d.name, size, batch)
				decode := func() {
					r := &http.Request{Header: http.Header{"Content-Type": {"application/json"}},
						Body: io.NopCloser(bytes.NewReader(body)), ContentLength: int64(len(body))}
					chat, _, aerr := decoder(r)
					if aerr != nil {
						t.Fatal(aerr)
					}
					chat.Wire.Lease.Release()
				}
				if n := testing.AllocsPerRun(20, decode); n > 20 {
					t.Errorf("%s, batch %v, %d bytes: %v allocations per request, want at most 20", d.name, batch, len(body), n)
				}
				const runs = 20
				var before, after runtime.MemStats
				runtime.ReadMemStats(&before)
				for range runs {
					decode()
				}
				runtime.ReadMemStats(&after)
				per := (after.TotalAlloc - before.TotalAlloc) / runs
				// An eighth of the body: room for the pooled body buffer
				// allocated again after a collection emptied the pool,
				// none for a copy of the text.
				if per > uint64(len(body)/8) {
					t.Errorf("%s, batch %v, %d bytes: %d bytes allocated per request, want at most %d", d.name, batch, len(body), per, len(body)/8)
				}
			}
		}
	}
}

// gatewayDecoder is the Decode of the door's codec of format.
func gatewayDecoder(f *Door, format api.Format) func(*http.Request) (api.Chat, []byte, *api.Error) {
	if format == api.FormatOpenAIEmbeddings {
		return Embeddings{f}.Decode
	}
	return Completions{f}.Decode
}
