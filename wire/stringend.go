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
	// A short plain string (a name, a role, a model's) ends before a
	// block of 64 would pay for itself: its bytes taken one by one, as
	// long as they are printable ASCII other than a backslash.
	if i >= 0 {
	short:
		for j := i; j < len(body) && j < i+shortString; j++ {
			switch c := body[j]; {
			case c == '"':
				return j
			case c < 0x20 || c == '\\' || c >= 0x80:
				break short // to the blocks
			}
		}
	}
	if splitUTF8 {
		return stringEndSplit(body, i)
	}
	return stringEndInline(body, i)
}

// shortString is how many bytes of a string stringEnd takes one by one
// before it takes the rest in blocks.
const shortString = 16

// splitUTF8 is set where segmentio/asm checks UTF-8 with AVX2. A variable
// so that the tests can take either way.
var splitUTF8 = cpu.X86.Has(x86.AVX2)

// Words of eight bytes, for the checks that look at eight at a time
// (value.go's, and the portable masks).
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
// A pasted document has an escape every twenty bytes or so (a line break,
// a quote), so what one costs matters as much as what a plain byte costs.
// The string is taken 64 bytes at a time: its quotes, backslashes and
// control characters are marked at once (stringMasks64), and the bytes
// that follow an odd run of backslashes (the escaped ones) found from
// the marks with a few operations on the whole word (escaped), however
// many there are. The first quote not escaped ends the string; a control
// character before it refuses it; only the escaped bytes are looked at
// one by one, and only a \u escape takes a call. Most blocks need none
// of that: skipPlain runs over the blocks whose escapes are all valid
// (escaped bytes classified 32 at a time, or 64 with AVX-512, a \u's four
// digits too) in one call, and only the block it stops at is taken here.
func stringEndSplit(body []byte, i int) int {
	n := len(body)
	if i < 0 {
		return -1
	}
	start := i
	var tail [64]byte
	var carry uint64 // 1 when the block's first byte is escaped by the last one's backslashes
	checked := 0     // a \u escape's bytes up to here were checked with it (a surrogate pair)
	for ; i < n; i += 64 {
		// The plain blocks from here, in one call; the first that is not
		// (the end, a fault, an escape skipPlain leaves to this loop, the
		// last bytes) is taken below.
		k, next := skipPlain(body[i:], carry)
		if i, carry = i+k, next; i >= n {
			break
		}
		quotes, backslashes, controls := stringMasks64(block(body, i, &tail))
		var esc uint64
		esc, carry = escaped(backslashes, carry)
		before := ^uint64(0) // the bytes before the end, if it is in this block
		if quotes &^= esc; quotes != 0 {
			before = quotes&-quotes - 1
		}
		if controls&before != 0 {
			return -1 // a control character, or the padding: the string does not end
		}
		for m := esc & before; m != 0; m &= m - 1 {
			j := i + bits.TrailingZeros64(m)
			c := body[j]
			if unescapes[c] != 0 || j < checked {
				continue
			}
			if c != 'u' {
				return -1
			}
			e := escapeLen(body[j-1:])
			if e == 0 {
				return -1
			}
			checked = j - 1 + e
		}
		if quotes != 0 {
			end := i + bits.TrailingZeros64(quotes)
			if !validUTF8(body[start:end]) {
				return -1
			}
			return end
		}
	}
	return -1
}

// escaped returns the mask of the bytes that follow an odd run of
// backslashes, given the mask of the backslashes and carry, 1 when the
// block's first byte follows such a run that ended the block before, and
// the carry for the next block. The escaped bytes are the backslashes'
// targets: the n of \n, the second backslash of \\, the quote of \".
//
// Every backslash starts an escape unless it is escaped itself, so the
// runs are what matters: a run that starts on an even bit and is of odd
// length escapes the byte after it, and so does one that starts on an odd
// bit. Subtracting the backslashes that may start an escape from the odd
// bits turns each run that starts on an even bit into its complement
// (the borrow runs through it), after which one xor with the odd bits
// leaves exactly the escaped bytes (and the escaping backslashes, which
// the backslashes' own mask clears). The same arithmetic as simdjson's
// escape scanner, written from its description.
func escaped(backslashes, carry uint64) (esc, next uint64) {
	const odd = 0xAAAAAAAAAAAAAAAA
	potential := backslashes &^ carry // an escaped backslash starts nothing
	codes := ((potential<<1 | odd) - potential) ^ odd
	esc = codes ^ (backslashes | carry)
	next = codes & backslashes >> 63
	return esc, next
}

// block is the 64 bytes of body from i for a mask; the last ones padded
// with NULs in tail: control characters, so that a string that does not
// end before them is refused there.
func block(body []byte, i int, tail *[64]byte) *[64]byte {
	if i+64 <= len(body) {
		return (*[64]byte)(body[i : i+64])
	}
	*tail = [64]byte{}
	copy(tail[:], body[i:])
	return tail
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
