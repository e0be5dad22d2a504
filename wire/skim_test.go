package wire

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
)

// skimmingAll makes every string value worth cutting, whatever the body's
// size, until the test ends.
func skimmingAll(t testing.TB) {
	from, at := skimFrom, skimAt
	skimFrom, skimAt = 0, 1
	t.Cleanup(func() { skimFrom, skimAt = from, at })
}

// jsontextEnd is where jsontext, reading a request, finds the end of the
// string s starts with (the offset of its closing quote), or -1 when it
// refuses the string.
func jsontextEnd(s []byte) int {
	d := jsontext.NewDecoder(bytes.NewReader(s))
	v, err := d.ReadValue()
	if err != nil {
		return -1
	}
	return len(v) - 1
}

// stringEnds are stringEnd's two ways, each held to jsontext whichever
// this machine takes.
var stringEnds = []struct {
	name string
	end  func([]byte, int) int
}{{"split", stringEndSplit}, {"inline", stringEndInline}, {"stringEnd", stringEnd}}

func TestStringEnd(t *testing.T) {
	long := strings.Repeat("plain text ", 10)
	for _, tc := range []struct {
		name, s string
		ok      bool
	}{
		{"empty", `""`, true},
		{"plain", `"` + long + `"`, true},
		{"escapes", `"a\"b\\c\/d\be\ff\ng\rh\ti` + long + `"`, true},
		{"unicode escapes", `"\u00e9\u00E9\u0000\uffff` + long + `"`, true},
		{"a surrogate pair", `"` + long + `\ud83d\ude00"`, true},
		{"raw multi-byte", `"naïve café 日本 😀 ` + long + `"`, true},
		{"raw U+FFFD", "\"\xef\xbf\xbd" + long + "\"", true},
		{"DEL", "\"\x7f" + long + "\"", true},
		{"quote after seven plain bytes", `"1234567"`, true},
		{"unterminated", `"` + long, false},
		{"ends in a backslash", `"` + long + `\`, false},
		{"bad escape", `"` + long + `\x"`, false},
		{"short unicode escape", `"` + long + `\u00e"`, false},
		{"bad hex", `"` + long + `\u00eg"`, false},
		{"lone high surrogate", `"` + long + `\ud83d"`, false},
		{"lone high surrogate then text", `"` + long + `\ud83dabcdefgh"`, false},
		{"lone low surrogate", `"` + long + `\ude00"`, false},
		{"two high surrogates", `"` + long + `\ud83d\ud83d"`, false},
		{"control character", "\"" + long + "\n\"", false},
		{"NUL", "\"" + long + "\x00\"", false},
		{"invalid UTF-8", "\"" + long + "\xff\"", false},
		{"truncated UTF-8", "\"" + long + "\xe6\x97\"", false},
		{"UTF-8 surrogate", "\"" + long + "\xed\xa0\x80\"", false},
		{"overlong", "\"" + long + "\xc0\xaf\"", false},
		{"a run of characters", `"` + long + `Длинный长文档逐字节地 Ωμέγα"`, true},
		{"a run ending at the quote", `"` + long + `长文档"`, true},
		{"a bad byte inside a run", "\"" + long + "长文\xe6\x97档\"", false},
		{"a surrogate inside a run", "\"" + long + "Дл\xed\xa0\x80ин\"", false},
		{"a run cut by the body's end", "\"" + long + "长文档\xe6", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := []byte(tc.s)
			want := jsontextEnd(b)
			for _, way := range stringEnds {
				if got := way.end(b, 1); (got >= 0) != tc.ok || got != want {
					t.Fatalf("%s %d, jsontext %d, want ok=%v", way.name, got, want, tc.ok)
				}
			}
		})
	}
}

// FuzzStringEnd holds stringEnd to jsontext: the same strings accepted,
// ending at the same quote. A string stringEnd refuses is left to
// jsontext, so refusing more would only cost time; accepting more would
// let a string through that the rules refuse: never.
func FuzzStringEnd(f *testing.F) {
	for _, s := range []string{`"abc"`, `"a\nb"`, `"\ud83d\ude00"`, "\"caf\xc3\xa9\"", `"\u12"`, "\"\xff\"", `"12345678\"9"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, s []byte) {
		if len(s) == 0 || s[0] != '"' {
			s = append([]byte{'"'}, s...)
		}
		// As it is, and behind plain bytes that move it across the
		// 64-byte blocks a long string is checked in: each of its bytes
		// then meets the block check at another place, the end of a
		// block included.
		// And followed by more of the body, so that the string ends
		// inside a whole block rather than in the body's last bytes.
		for _, pad := range []int{0, 1, 57, 63, 64, 100} {
			for _, more := range []int{0, 70} {
				p := append(append([]byte{'"'}, bytes.Repeat([]byte{'a'}, pad)...), s[1:]...)
				p = append(p, bytes.Repeat([]byte{' '}, more)...)
				want := jsontextEnd(p)
				for _, way := range stringEnds {
					if got := way.end(p, 1); got != want {
						t.Fatalf("%q: %s %d, jsontext %d", p, way.name, got, want)
					}
				}
			}
		}
	})
}

func TestSkim(t *testing.T) {
	skimmingAll(t)
	for _, tc := range []struct {
		name, body, copy string
		cuts             []cut
	}{
		{"values", `{"model":"qwen","messages":[{"role":"user","content":"hello"}]}`,
			`{"model":"","messages":[{"role":"","content":""}]}`, []cut{{10, 4}, {33, 8}, {46, 13}}},
		{"names stay", `{"abc" : "de" , "f":1}`, `{"abc" : "" , "f":1}`, []cut{{10, 2}}},
		{"empty strings", `{"a":"","b":""}`, `{"a":"","b":""}`, nil},
		{"elements", `["abc", "def" ]`, `["", "" ]`, []cut{{2, 3}, {6, 6}}},
		{"elements of an array in an object", `{"input":["abc",[1],"de"]}`, `{"input":["",[1],""]}`, []cut{{11, 3}, {18, 5}}},
		{"a name after a comma stays", `{"":1,"abc","d":"e"}`, `{"":1,"abc","d":""}`, []cut{{17, 1}}},
		{"an object's name in an array stays", `[{"abc","d"}]`, `[{"abc","d"}]`, nil},
		{"after an object closes, elements again", `[{"a":1},"abc"]`, `[{"a":1},""]`, []cut{{10, 3}}},
		{"a bracket inside a string counts nothing", `{"a":"[","b":"c"}`, `{"a":"","b":""}`, []cut{{6, 1}, {13, 2}}},
		{"after a stray bracket, nothing is an element", `]["abc"]`, `]["abc"]`, nil},
		{"deeper than 64 levels, elements stay", strings.Repeat("[", 65) + `"abc"` + strings.Repeat("]", 65),
			strings.Repeat("[", 65) + `"abc"` + strings.Repeat("]", 65), nil},
		{"a string with escapes", `{"a":"a\"b\\"}`, `{"a":""}`, []cut{{6, 6}}},
		{"an invalid string stays, and what follows", "{\"a\":\"a\xff\",\"b\":\"b\"}", "{\"a\":\"a\xff\",\"b\":\"b\"}", nil},
		{"unterminated", `{"a":"abc`, `{"a":"abc`, nil},
		{"a name in the wrong place stays", `{"abc","d":"e"}`, `{"abc","d":""}`, []cut{{12, 1}}},
		{"top-level string stays", `"abc"`, `"abc"`, nil},
		{"a string before the end stays", `{"a":"abc"`, `{"a":"abc"`, nil},
		{"a string before a colon in an array stays", `["abc":1]`, `["abc":1]`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := []byte(tc.body)
			copied, cuts := skim(body, nil, nil)
			if string(copied) != tc.copy || !reflect.DeepEqual(nilIfEmpty(cuts), tc.cuts) {
				t.Fatalf("skim: %q %v, want %q %v", copied, cuts, tc.copy, tc.cuts)
			}
			dec := decoder{orig: body, body: copied, cuts: cuts}
			for off := 0; off <= len(copied); off++ {
				if got := dec.at(off); got < off || got > len(body) {
					t.Fatalf("at(%d) = %d", off, got)
				}
			}
		})
	}
}

// TestSkimmedReads reads bodies with long strings skimmed and not, and
// requires the same results: values, spans and errors.
func TestSkimmedReads(t *testing.T) {
	long := strings.Repeat(`The gateway carries a long document to its replica: \"quoted\", naïve, \u00e9, end.\n `, 80)
	bodies := append([]string{
		`{"model":"qwen","messages":[{"role":"system","content":"` + long + `"},{"role":"user","content":[{"type":"text","text":"` + long + `"}]}],"stop":["` + long + `"],"stream_options":{"include_usage":true}}`,
		`{"model":"qwen","messages":[{"role":"user","content":"` + long + `"}],"tools":[{"type":"function","function":{"name":"f","description":"` + long + `"}}]}`,
		`{"model":"qwen","messages":[{"role":"user","content":"` + long + `"}],"model":"gemma"}`,
		`{"model":"qwen","messages":[{"role":"user","content":"` + long + `"}],"x":"` + long + `\ud800"}`,
		"{\"model\":\"qwen\",\"messages\":[{\"role\":\"user\",\"content\":\"" + long + "\"}],\"x\":\"\xff\"}",
		`{"model":"qwen","messages":[{"role":"user","content":"` + long + `"}],}`,
		`{"model":"qwen","messages":[{"role":"user","content":"` + long + `"}]} {}`,
		`{"model":"qwen","messages":[{"role":"user","content":"` + long + `"` + long + `"}]}`,
		`{"model":"qwen","messages":[{"role":"user","content":"` + long + `"}]`,
	}, chatBodies...)
	for i, body := range bodies {
		plain, skimmed, perr, serr := readBothWays([]byte(body), ReadChat)
		if !sameErr(perr, serr) || !reflect.DeepEqual(plain, skimmed) {
			t.Fatalf("body %d: skimmed %v %+v\nplain %v %+v", i, serr, skimmed, perr, plain)
		}
		if i == 0 && (perr != nil || len(skimmed.Items) != 2) {
			t.Fatalf("body 0: %v, %d messages", perr, len(skimmed.Items))
		}
	}
}

// readBothWays reads body with read as it is, then with every string
// value skimmed.
func readBothWays[T any](body []byte, read func([]byte, *T) error) (plain, skimmed T, perr, serr error) {
	// Through jsontext both times: the lexer reads strings in place.
	lexRequests = false
	defer func() { lexRequests = true }()
	from, at := skimFrom, skimAt
	skimFrom = len(body) + 1
	perr = read(body, &plain)
	skimFrom, skimAt = 0, 1
	serr = read(body, &skimmed)
	skimFrom, skimAt = from, at
	return plain, skimmed, perr, serr
}

// checkSkimmed requires the same reading of body with its strings skimmed
// as without.
func checkSkimmed[T any](t *testing.T, body []byte, read func([]byte, *T) error) {
	t.Helper()
	plain, skimmed, perr, serr := readBothWays(body, read)
	if !sameErr(perr, serr) || (perr == nil && !reflect.DeepEqual(plain, skimmed)) {
		t.Fatalf("%q\nskimmed: %v %+v\nplain: %v %+v", body, serr, skimmed, perr, plain)
	}
}

// sameErr reports whether two reads failed alike: both or neither, at the
// same offset and path.
func sameErr(a, b error) bool {
	if (a == nil) != (b == nil) {
		return false
	}
	var ea, eb *Error
	if errors.As(a, &ea) != errors.As(b, &eb) {
		return false
	}
	return ea == nil || (ea.Offset == eb.Offset && ea.Duplicate == eb.Duplicate && reflect.DeepEqual(ea.Path, eb.Path))
}

// documentWords are the words of the benchmarks' pasted document, as
// JSON spells them: escapes every few words, multi-byte characters.
var documentWords = []string{"the", "gateway", "carries", "a", "long", "document", "through", "to", "its", "replica,",
	"byte", "for", "byte;", `caf\u00e9`, "naïve", `\\path`, `\"quoted\"`, "42", "3.14", `end.\n`}

// document appends to s the words of the pasted document, from word k
// on, each followed by a space, until s holds at least n bytes.
func document(s []byte, k, n int) []byte {
	for i := k; len(s) < n; i++ {
		s = append(append(s, documentWords[(i*7+i/len(documentWords))%len(documentWords)]...), ' ')
	}
	return s
}

// BenchmarkStringEnd checks a 100 KB string of the mix a pasted document
// has: words, escapes every few words, multi-byte characters.
func BenchmarkStringEnd(b *testing.B) {
	benchStringEnds(b, append(document([]byte{'"'}, 0, 100_000), '"'))
}

// BenchmarkValidUTF8 is the UTF-8 pass alone over 1 MB of the same text:
// from cache (one body) and from memory (48 bodies in turn, more than the
// caches hold), to tell what folding it into another pass could save.
func BenchmarkValidUTF8(b *testing.B) {
	for _, n := range []int{1, 48} {
		bodies := make([][]byte, n)
		for k := range bodies {
			bodies[k] = document(make([]byte, 0, 1<<20), k, 1<<20-16)
		}
		b.Run(fmt.Sprintf("bodies=%d", n), func(b *testing.B) {
			b.SetBytes(int64(len(bodies[0])))
			i := 0
			for b.Loop() {
				if !validUTF8(bodies[i%n]) {
					b.Fatal("refused")
				}
				i++
			}
		})
	}
}

// benchStringEnds checks the string s both ways.
func benchStringEnds(b *testing.B, s []byte) {
	for _, way := range stringEnds {
		b.Run(way.name, func(b *testing.B) {
			b.SetBytes(int64(len(s)))
			for b.Loop() {
				if way.end(s, 1) != len(s)-1 {
					b.Fatal("refused")
				}
			}
		})
	}
}

// TestHex4 holds hex4 to strconv's reading of every 4-byte string over
// the bytes around the digits' ranges.
func TestHex4(t *testing.T) {
	edge := []byte("/09:@AFG`afg\\u\x00\xff")
	for _, a := range edge {
		for _, b := range edge {
			for _, c := range edge {
				s := []byte{a, '0', b, c}
				want, err := strconv.ParseUint(string(s), 16, 32)
				got, ok := hex4(s)
				if ok != (err == nil) || ok && uint64(got) != want {
					t.Fatalf("hex4(%q) = %x, %v; want %x, %v", s, got, ok, want, err == nil)
				}
			}
		}
	}
	if _, ok := hex4([]byte("abc")); ok {
		t.Fatal("hex4 read three digits")
	}
}

// BenchmarkStringEndScripts checks 100 KB strings of text in other
// scripts: Russian (words of two-byte characters between spaces) and
// Chinese (a line of three-byte characters, then punctuation).
func BenchmarkStringEndScripts(b *testing.B) {
	for _, tc := range []struct{ name, line string }{
		{"russian", `Длинный документ проходит через шлюз к реплике, байт за байтом.\n`},
		{"chinese", `长文档逐字节地通过网关传到副本，再由引擎读取。\n`},
	} {
		b.Run(tc.name, func(b *testing.B) {
			s := []byte{'"'}
			for len(s) < 100_000 {
				s = append(s, tc.line...)
			}
			benchStringEnds(b, append(s, '"'))
		})
	}
}
