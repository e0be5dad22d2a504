package wire

import (
	"bytes"
	"encoding/binary"
	"math/bits"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"

	"github.com/go-json-experiment/json/jsontext"
)

// Kind is the type of a JSON value, named by its first byte; every number
// is Number.
type Kind byte

// The kinds of values.
const (
	Absent Kind = 0
	Null   Kind = 'n'
	False  Kind = 'f'
	True   Kind = 't'
	String Kind = '"'
	Number Kind = '0'
	Object Kind = '{'
	Array  Kind = '['
)

// Value is one JSON value of a body, as the client wrote it.
type Value struct {
	// Raw is the value's exact bytes, without surrounding space: a
	// sub-slice of the body, not a copy. It is nil when the member is
	// absent.
	Raw []byte
	// Start and End are Raw's offsets in the body: body[Start:End] is
	// Raw.
	Start, End int
}

// Member is one member of an object: its name, decoded, its value, and
// the span of the whole member in the body, from the name's opening quote
// to the value's last byte (the comma that separates it from the next
// member is in neither).
type Member struct {
	Name       string
	Start, End int
	Value      Value
	// Known is true for a member the reader reads (its value is also in
	// one of the result's fields), false for one it only recorded.
	Known bool
}

// Kind is the value's kind; Absent when there is none.
func (v Value) Kind() Kind {
	if len(v.Raw) == 0 {
		return Absent
	}
	switch c := v.Raw[0]; c {
	case '"', '{', '[', 't', 'f', 'n':
		return Kind(c)
	}
	return Number
}

// IsAbsent reports a member that was not sent.
func (v Value) IsAbsent() bool { return v.Raw == nil }

// IsNull reports the JSON null.
func (v Value) IsNull() bool { return string(v.Raw) == "null" }

// Given reports a member sent with a value other than null: the APIs the
// gateway speaks read null as "not given" for their optional members.
func (v Value) Given() bool { return v.Raw != nil && !v.IsNull() }

// Text is the decoded value of a string; "" for any other kind. Invalid
// UTF-8 (only a lenient reader lets it through) becomes U+FFFD, as
// encoding/json decodes it.
func (v Value) Text() string {
	if v.Kind() != String {
		return ""
	}
	return unquote(v.Raw)
}

// Bool is the value as a boolean: JSON's true and false only (an API
// does not read "yes" or 1 as one); ok is false for any other value.
func (v Value) Bool() (b, ok bool) {
	switch v.Kind() {
	case True:
		return true, true
	case False:
		return false, true
	}
	return false, false
}

// Clip is the value as written, cut to n bytes and marked "..." when
// longer: a short rendering for an error message.
func (v Value) Clip(n int) string {
	if len(v.Raw) > n {
		return string(v.Raw[:n]) + "..."
	}
	return string(v.Raw)
}

// Str is Text, and whether the value is a string.
func (v Value) Str() (string, bool) {
	if v.Kind() != String {
		return "", false
	}
	return unquote(v.Raw), true
}

// Is reports whether v is the string s written without escapes: a cheap
// test for the usual spellings of fixed values ("user", "text"). A value
// that spells s with escapes is not s for Is (Text tells).
func (v Value) Is(s string) bool {
	if len(v.Raw) != len(s)+2 || v.Raw[0] != '"' {
		return false
	}
	inner := v.Raw[1 : len(v.Raw)-1]
	return string(inner) == s && !hasEscape(inner) // the text a\n is not what "a\n" means
}

// StrOf is Str for a value that is usually one of known, spelled without
// escapes (a role, a block's type): that one is returned, the caller's
// own string, without a copy; any other string is decoded.
func (v Value) StrOf(known ...string) (string, bool) {
	for _, k := range known {
		if v.Is(k) {
			return k, true
		}
	}
	return v.Str()
}

// unquote decodes the JSON string raw, which a decoder has read. The
// usual string, plain ASCII, costs one copy; a valid one with escapes or
// multi-byte characters is decoded in one pass that copies eight plain
// bytes at a time; anything else (invalid UTF-8, a lone surrogate) as
// jsontext decodes it.
func unquote(raw []byte) string {
	inner := raw[1 : len(raw)-1]
	i := plainPrefix(inner)
	if i == len(inner) {
		return string(inner)
	}
	out := make([]byte, len(inner)) // escapes only shorten the text
	j := copy(out, inner[:i])
	for i < len(inner) {
		// Eight plain bytes at a time; j <= i, so out has room for them.
		for i+8 <= len(inner) {
			x := binary.LittleEndian.Uint64(inner[i:])
			binary.LittleEndian.PutUint64(out[j:], x)
			if m := notPlain(x); m != 0 {
				k := bits.TrailingZeros64(m) >> 3
				i, j = i+k, j+k
				break
			}
			i, j = i+8, j+8
		}
		if i >= len(inner) {
			break
		}
		c := inner[i]
		switch {
		case c < utf8.RuneSelf && c != '\\':
			out[j] = c
			i, j = i+1, j+1
			continue
		case c >= utf8.RuneSelf:
			r, n := utf8.DecodeRune(inner[i:])
			if r == utf8.RuneError && n == 1 {
				return unquoteExact(raw)
			}
			j += copy(out[j:], inner[i:i+n])
			i += n
			continue
		}
		if i+1 >= len(inner) {
			return unquoteExact(raw)
		}
		if c := unescapes[inner[i+1]]; c != 0 {
			out[j] = c
			j++
			i += 2
			continue
		}
		if inner[i+1] != 'u' {
			return unquoteExact(raw)
		}
		r, ok := hex4(inner[i+2:])
		n := 6
		if ok && utf16.IsSurrogate(r) {
			// Only a high surrogate followed by a low one is a character.
			r2, ok2 := rune(0), false
			if i+12 <= len(inner) && inner[i+6] == '\\' && inner[i+7] == 'u' {
				r2, ok2 = hex4(inner[i+8:])
			}
			r, ok, n = utf16.DecodeRune(r, r2), ok2, 12
			ok = ok && r != utf8.RuneError
		}
		if !ok {
			return unquoteExact(raw)
		}
		j += utf8.EncodeRune(out[j:], r)
		i += n
	}
	out = out[:j]
	return unsafe.String(unsafe.SliceData(out), len(out)) // out is not kept
}

// plainPrefix is the length of the run of plain bytes (ASCII but the
// backslash) that s starts with.
func plainPrefix(s []byte) int {
	i := 0
	for i+8 <= len(s) {
		if m := notPlain(binary.LittleEndian.Uint64(s[i:])); m != 0 {
			return i + bits.TrailingZeros64(m)>>3
		}
		i += 8
	}
	for i < len(s) && s[i] < utf8.RuneSelf && s[i] != '\\' {
		i++
	}
	return i
}

// notPlain marks, with its high bit, each byte of the word x that is a
// backslash or part of a multi-byte character; the lowest mark is exact
// (see special).
func notPlain(x uint64) uint64 {
	backslash := x ^ (ones * '\\')
	return (x | (backslash-ones)&^backslash) & highs
}

// unescapes maps the character after a backslash to the one it stands
// for, for the one-character escapes.
var unescapes = [256]byte{'"': '"', '\\': '\\', '/': '/', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t'}

// hex4 reads the 4 hexadecimal digits s starts with. A pasted document's
// \u escapes are read by a table, not a switch per digit: a third of
// what stringEnd spent on each.
func hex4(s []byte) (rune, bool) {
	if len(s) < 4 {
		return 0, false
	}
	a, b, c, d := hexDigits[s[0]], hexDigits[s[1]], hexDigits[s[2]], hexDigits[s[3]]
	if a|b|c|d > 0xF {
		return 0, false
	}
	return rune(a)<<12 | rune(b)<<8 | rune(c)<<4 | rune(d), true
}

// hexDigits maps a hexadecimal digit to its value, and any other byte to
// 0xFF.
var hexDigits = func() (t [256]byte) {
	for i := range t {
		t[i] = 0xFF
	}
	for c := '0'; c <= '9'; c++ {
		t[c] = byte(c - '0')
	}
	for c := 'a'; c <= 'f'; c++ {
		t[c], t[c-'a'+'A'] = byte(c-'a'+10), byte(c-'a'+10)
	}
	return t
}()

// unquoteExact decodes raw as jsontext does, replacing what is invalid.
func unquoteExact(raw []byte) string {
	// AppendUnquote grows dst by len(raw) first: with that room it
	// allocates nothing more.
	b, _ := jsontext.AppendUnquote(make([]byte, 0, len(raw)), raw)
	return unsafe.String(unsafe.SliceData(b), len(b)) // b is not kept
}

// key is a member name as a key to switch on: the raw name's inner bytes
// when it has no escapes (no copy), else its decoded value.
func key(raw []byte) []byte {
	inner := raw[1 : len(raw)-1]
	if d, ok := unescaped(inner); ok {
		return d
	}
	return inner
}

// unescaped is a name's inner bytes decoded, and true, when they hold
// escapes; readers look a name up as written first, and decode it only
// when it matches none of theirs ("mod\u0065l" is "model"), which spares
// the usual name a second look.
func unescaped(inner []byte) ([]byte, bool) {
	if !hasEscape(inner) {
		return inner, false
	}
	quoted := append(append(make([]byte, 0, len(inner)+2), '"'), inner...)
	quoted = append(quoted, '"')
	b, _ := jsontext.AppendUnquote(make([]byte, 0, len(quoted)), quoted)
	return b, true
}

// hasEscape reports a backslash in b; names are short, and a loop costs
// less than bytes.IndexByte's call for them.
func hasEscape(b []byte) bool {
	if len(b) > 32 {
		return bytes.IndexByte(b, '\\') >= 0
	}
	for _, c := range b {
		if c == '\\' {
			return true
		}
	}
	return false
}

// Members calls fn with each member of the object v, in order, until fn
// returns false. It reads v again: it is for the small values a reader
// hands on whole (a client's metadata, a response_format), not for the
// members a reader reads itself. A value that is not an object has no
// members.
func (v Value) Members(fn func(m Member) bool) error {
	if v.Kind() != Object {
		return nil
	}
	dec := newDecoder(v.Raw, false)
	defer dec.free()
	if _, err := dec.open(); err != nil {
		return err
	}
	for {
		n, more, err := dec.name()
		if err != nil || !more {
			return err
		}
		val, err := dec.value()
		if err != nil {
			return err
		}
		m := Member{Name: string(key(n.Raw)), Start: v.Start + n.Start, End: v.Start + val.End,
			Value: Value{Raw: val.Raw, Start: v.Start + val.Start, End: v.Start + val.End}}
		if !fn(m) {
			return nil
		}
	}
}

// Elements calls fn with each element of the array v, in order, until fn
// returns false. Like Members, it reads v again.
func (v Value) Elements(fn func(i int, e Value) bool) error {
	if v.Kind() != Array {
		return nil
	}
	dec := newDecoder(v.Raw, false)
	defer dec.free()
	if _, err := dec.open(); err != nil {
		return err
	}
	for i := 0; ; i++ {
		if end, err := dec.close(); end || err != nil {
			return err
		}
		e, err := dec.value()
		if err != nil {
			return err
		}
		if !fn(i, Value{Raw: e.Raw, Start: v.Start + e.Start, End: v.Start + e.End}) {
			return nil
		}
	}
}

// Any decodes v into the values encoding/json decodes into an interface
// (map[string]any, []any, float64, string, bool, nil), for echoing a
// value in an error. It fails, as encoding/json does, on a number beyond
// float64.
func (v Value) Any() (any, error) {
	if v.Raw == nil {
		return nil, nil
	}
	dec := newDecoder(v.Raw, false)
	defer dec.free()
	x, err := dec.any()
	if err != nil {
		return nil, err
	}
	return x, dec.end()
}

func (dec *decoder) any() (any, error) {
	switch dec.peek() {
	case '{':
		if _, err := dec.open(); err != nil {
			return nil, err
		}
		m := map[string]any{}
		for {
			n, more, err := dec.name()
			if err != nil {
				return nil, err
			}
			if !more {
				return m, nil
			}
			x, err := dec.any()
			if err != nil {
				return nil, err
			}
			m[unquote(n.Raw)] = x
		}
	case '[':
		if _, err := dec.open(); err != nil {
			return nil, err
		}
		a := []any{}
		for {
			if end, err := dec.close(); end || err != nil {
				return a, err
			}
			x, err := dec.any()
			if err != nil {
				return nil, err
			}
			a = append(a, x)
		}
	}
	v, err := dec.value()
	if err != nil {
		return nil, err
	}
	switch v.Kind() {
	case String:
		return unquote(v.Raw), nil
	case Null:
		return nil, nil
	case True:
		return true, nil
	case False:
		return false, nil
	}
	f, err := strconv.ParseFloat(string(v.Raw), 64)
	if err != nil {
		return nil, &Error{Offset: v.Start, Err: err}
	}
	return f, nil
}
