package wire

import (
	"math/bits"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/segmentio/asm/cpu"
	"github.com/segmentio/asm/cpu/x86"
	asmutf8 "github.com/segmentio/asm/utf8"
)

// stringEnd checks the string whose inside starts at body[i] and returns
// the offset of its closing quote, or -1 when the string breaks one of the
// rules jsontext applies to a request (no control character, valid
// escapes, surrogates in pairs, valid UTF-8) or does not end. Two ways,
// which accept the same strings (FuzzStringEnd holds both to jsontext):
// with AVX2, the escapes are found first and the UTF-8 checked after in a
// pass of its own, 32 bytes at a time (stringEndSplit); without it, where
// such a pass would cost more than it saves, each character is checked
// as it is met (stringEndInline).
func stringEnd(body []byte, i int) int {
	if splitUTF8 {
		return stringEndSplit(body, i)
	}
	return stringEndInline(body, i)
}

// splitUTF8 is set where segmentio/asm checks UTF-8 with AVX2. A variable
// so that the tests can take either way.
var splitUTF8 = cpu.X86.Has(x86.AVX2)

// Words of eight bytes, for the checks that look at eight at a time
// (value.go's, and escapes64 where it has no SSE2).
const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// stringEndSplit checks the string whose inside starts at body[i] and
// returns the offset of its closing quote, or -1 when the string breaks one of the
// rules jsontext applies to a request (no control character, valid
// escapes, surrogates in pairs, valid UTF-8) or does not end. Its UTF-8
// is checked once the end is found, in one pass of its own (validUTF8),
// 32 bytes at a time, rather than a character at a time.
//
// A pasted document has an escape every few dozen bytes (a line break, a
// quote), so what one costs matters as much as what a plain byte costs:
// the string is taken 64 bytes at a time, its quotes, backslashes and
// control characters marked at once (escapes64), each of them taken in
// turn from the mask, and the next 64 bytes loaded where the last
// sequence ended. A two-byte escape is checked in the loop, a \u escape
// in a call.
func stringEndSplit(body []byte, i int) int {
	n := len(body)
	if i < 0 {
		return -1
	}
	start := i
	var tail [64]byte
	for i < n {
		m := escapes64(block(body, i, &tail))
		if m == 0 {
			i += 64
			continue
		}
		next := i + 64 // where the following block starts, unless an escape runs past it
		for m != 0 {
			j := i + bits.TrailingZeros64(m)
			if j >= n {
				return -1 // the padding: the string does not end
			}
			k := j + 1 // after the sequence at j; j+1 for a byte marked by a borrow
			switch c := body[j]; {
			case c == '"':
				if !validUTF8(body[start:j]) {
					return -1
				}
				return j
			case c == '\\':
				if j+1 < n && unescapes[body[j+1]] != 0 {
					k++
				} else if e := escapeLen(body[j:]); e > 0 {
					k = j + e
				} else {
					return -1
				}
			case c < 0x20:
				return -1
			}
			if d := k - i; d < 64 {
				m &= ^uint64(0) << (uint(d) & 63) // the marks of the bytes consumed go
			} else {
				m, next = 0, k
			}
		}
		i = next
	}
	return -1
}

// block is the 64 bytes of body from i for a mask; the last ones padded
// with NULs in tail: control characters, so that a string that does not
// end before them is refused there.
func block(body []byte, i int, tail *[64]byte) []byte {
	if i+64 <= len(body) {
		return body[i : i+64]
	}
	*tail = [64]byte{}
	copy(tail[:], body[i:])
	return tail[:]
}

// validUTF8 reports whether s is valid UTF-8, as jsontext requires of a
// request's strings: segmentio/asm's AVX2 check, 32 bytes at a time
// whatever their mix of characters, where a check a character at a time
// costs about as much again as the scan for escapes (the standard
// library's, without AVX2 or with -tags purego).
func validUTF8(s []byte) bool { return asmutf8.Valid(s) }

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
