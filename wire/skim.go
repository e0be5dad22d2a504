package wire

import (
	"bytes"
	"encoding/binary"
	"math/bits"
	"unicode/utf16"
	"unicode/utf8"
)

// A long prompt is almost all one string, and jsontext checks a string a
// byte at a time, about twelve instructions a byte once the string holds
// an escape or a multi-byte character (a pasted document always does).
// skim takes the long strings out of jsontext's way: before a request is
// read, it finds each long string that is a member's value or an array's
// element (skim_arrays.go), checks it eight bytes at a time
// against the rules jsontext applies to a request (no control character,
// valid escapes, surrogates in pairs, valid UTF-8), and gives jsontext a
// copy of the body with that string's inside left out (""), a few hundred
// bytes instead of a hundred thousand. The decoder maps every offset that
// jsontext reports back to the body (cut.at), so the values it returns
// are the body's bytes at the body's offsets, exactly as without skim
// (FuzzChat and FuzzNative read every body both ways and compare).
//
// A string skim cannot vouch for (invalid, unterminated, or not a
// member's value) stays in the copy: jsontext
// reads it and reports what is wrong with it, as it would have anyway.
// Cutting one valid string for another ("") changes no other part of the
// grammar, so the copy is valid JSON exactly when the body is.

// The sizes from which skim pays: bodies smaller than skimFrom are read
// as they are (the usual small request pays nothing), and only strings
// whose inside is at least skimAt bytes long are cut. Variables so that
// the tests can cut every string.
var (
	skimFrom = 4 << 10
	skimAt   = 512
)

// cut is one string's inside left out of the copy, at the copy's offset
// at: from there on, the body is skipped bytes ahead of the copy (this
// string's and those cut before it).
type cut struct{ at, skipped int }

// skim returns the copy of body that jsontext is to read, built in dst,
// and the cuts that map its offsets back to body's; body itself and no
// cuts when no string is worth cutting.
func skim(body, dst []byte, cuts []cut) ([]byte, []cut) {
	dst, cuts = dst[:0], cuts[:0]
	from, skipped := 0, 0 // the first byte of body not yet in dst; bytes cut
	var nest nesting      // skim_arrays.go
	for i := 0; i < len(body); {
		q := bytes.IndexByte(body[i:], '"')
		if q < 0 {
			break
		}
		open := i + q
		nest.scan(body[i:open])
		end := stringEnd(body, open+1)
		if end < 0 {
			break // jsontext tells what is wrong there
		}
		i = end + 1
		if end-open-1 < skimAt {
			continue
		}
		if !isMemberValue(body[:open], body[i:]) && !(nest.inArray() && isElement(body[:open], body[i:])) {
			continue
		}
		dst = append(dst, body[from:open+1]...)
		skipped += end - open - 1
		cuts = append(cuts, cut{at: len(dst), skipped: skipped})
		from = end
	}
	if len(cuts) == 0 {
		return body, cuts
	}
	return append(dst, body[from:]...), cuts
}

// isMemberValue reports whether a string between before and after is a
// member's value: a ':' before it and a ',' or '}' after it, space
// aside. Anything else stays for jsontext to read: a name, whose
// uniqueness it checks; an array's element (isElement judges it); and a string
// where the body breaks, so that jsontext's report of the break names
// the string as it would without skim.
func isMemberValue(before, after []byte) bool {
	i := len(before) - 1
	for i >= 0 && isSpace(before[i]) {
		i--
	}
	if i < 0 || before[i] != ':' {
		return false
	}
	for _, c := range after {
		if !isSpace(c) {
			return c == ',' || c == '}'
		}
	}
	return false
}

// isSpace reports the space JSON allows between tokens.
func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

// Words of eight bytes, for the checks that look at eight at a time.
const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// special marks, with its byte's high bit, each byte of the word x that
// ends a run of plain string bytes: a quote, a backslash, a control
// character or the start of a multi-byte character. The lowest mark is
// exact; marks above it may be false (a borrow), which only stops a run
// early.
func special(x uint64) uint64 {
	quote, backslash := x^(ones*'"'), x^(ones*'\\')
	return (x | (quote-ones)&^quote | (backslash-ones)&^backslash | (x-ones*0x20)&^x) & highs
}

// plainRun is the length of the run of plain string bytes that s starts
// with, or at least of all its words of eight such bytes; the caller
// takes the next byte from there.
func plainRun(s []byte) int {
	n := 0
	for len(s) >= 8 {
		if m := special(binary.LittleEndian.Uint64(s)); m != 0 {
			return n + bits.TrailingZeros64(m)>>3
		}
		s, n = s[8:], n+8
	}
	return n
}

// stringEnd checks the string whose inside starts at body[i] and returns
// the offset of its closing quote, or -1 when the string breaks one of the
// rules jsontext applies to a request or does not end. A pasted document
// has an escape or a multi-byte character every few words: their usual
// forms (a two-byte escape, a two-byte character) are taken in line.
func stringEnd(body []byte, i int) int {
	for {
		i += plainRun(body[i:])
		if i >= len(body) {
			return -1
		}
		c := body[i]
		switch {
		case c == '"':
			return i
		case c == '\\':
			if i+1 < len(body) && unescapes[body[i+1]] != 0 {
				i += 2
				continue
			}
			n := escapeLen(body[i:])
			if n == 0 {
				return -1
			}
			i += n
		case c < 0x20:
			return -1
		case c < utf8.RuneSelf:
			i++ // a plain byte in the last seven
		case 0xC2 <= c && c < 0xE0 && i+1 < len(body) && body[i+1]&0xC0 == 0x80:
			i += 2
		default:
			r, n := utf8.DecodeRune(body[i:])
			if r == utf8.RuneError && n == 1 {
				return -1
			}
			i += n
		}
	}
}

// escapeLen is the length of the valid escape s starts with, 0 when it is
// not one: a surrogate must be a high one escaped right before a low one.
func escapeLen(s []byte) int {
	if len(s) < 2 {
		return 0
	}
	if s[1] != 'u' {
		if unescapes[s[1]] == 0 {
			return 0
		}
		return 2
	}
	r, ok := hex4(s[2:])
	switch {
	case !ok:
		return 0
	case !utf16.IsSurrogate(r):
		return 6
	case len(s) < 12 || s[6] != '\\' || s[7] != 'u':
		return 0
	}
	r2, ok := hex4(s[8:])
	if !ok || utf16.DecodeRune(r, r2) == utf8.RuneError {
		return 0
	}
	return 12
}
