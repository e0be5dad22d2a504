package wire

import (
	"bytes"
	"math/bits"
	"unicode/utf16"
	"unicode/utf8"
)

// A long prompt is almost all one string, and jsontext checks a string a
// byte at a time, about twelve instructions a byte once the string holds
// an escape or a multi-byte character (a pasted document always does).
// skim takes the long strings out of jsontext's way: before a request is
// read, it finds each long string that is a member's value or an array's
// element (skim_arrays.go), checks it 64 bytes at a time
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

// Words of eight bytes, for the checks that look at eight at a time
// (value.go's, and specials64 where it has no SSE2).
const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// stringEnd checks the string whose inside starts at body[i] and returns
// the offset of its closing quote, or -1 when the string breaks one of the
// rules jsontext applies to a request or does not end.
//
// A pasted document has an escape or a multi-byte character every ten
// bytes or so, so what a special byte costs matters as much as what a
// plain byte costs: the string is taken 64 bytes at a time, their special
// bytes marked at once (specials64), each of them taken in turn from the
// mask, and the next 64 bytes loaded where the last sequence ended. The
// usual sequences (a two-byte escape, a character of two or three bytes)
// are checked in the loop; the rest (a \u escape, a character of four
// bytes, a fault) in a call, which the loop's registers are saved for
// only when it is made.
func stringEnd(body []byte, i int) int {
	n := len(body)
	if i < 0 {
		return -1
	}
	for i < n {
		var m uint64
		if i+64 <= n {
			m = specials64(body[i : i+64])
		} else {
			// The last bytes, padded with NULs: control characters, so a
			// string that does not end before them is refused there.
			var tail [64]byte
			copy(tail[:], body[i:])
			m = specials64(tail[:])
		}
		if m == 0 {
			i += 64
			continue
		}
		next := i + 64 // where the following block starts, unless a sequence runs past it
		for m != 0 {
			j := i + bits.TrailingZeros64(m)
			k := j + 1 // after the sequence at j; j+1 for a byte marked by a borrow
			c, c1 := byte(0xFF), byte(0)
			if j+2 < n {
				c, c1 = body[j], body[j+1]
			} // else the body's last two bytes, or the padding: 0xFF is rareEnd's
			switch cls := classes[c]; cls {
			case plainByte: // marked by a borrow
			case quoteByte:
				return j
			case backslashByte:
				if unescapes[c1] != 0 {
					k++
				} else if k = rareEnd(body, j); k < 0 {
					return -1
				}
			case lead2, lead3:
				for {
					if c1&0xC0 != 0x80 {
						return -1
					}
					k++
					if cls == lead3 {
						if body[k]&0xC0 != 0x80 {
							return -1
						}
						k++
					}
					// A run of such characters (a word of Greek, a line of
					// Chinese) is taken here, not with a stop each.
					if uint(k) >= uint(n-2) {
						break
					}
					if cls = classes[body[k]]; cls != lead2 && cls != lead3 {
						break
					}
					c1 = body[k+1]
					k++
				}
			default:
				if k = rareEnd(body, j); k <= j {
					return k
				}
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

// What a marked byte starts, for stringEnd: the usual sequences it takes
// in line, and the rest (a control character, a lead byte whose second
// byte's range is narrower, E0 and ED, one of four bytes, a byte no
// character starts with) for rareEnd.
const (
	rareByte = iota
	plainByte
	quoteByte
	backslashByte
	lead2 // C2..DF, then one continuation byte
	lead3 // E1..EC, EE, EF, then two
)

var classes = func() (t [256]byte) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = plainByte
	}
	t['"'], t['\\'] = quoteByte, backslashByte
	for c := 0xC2; c < 0xE0; c++ {
		t[c] = lead2
	}
	for c := 0xE1; c < 0xF0; c++ {
		t[c] = lead3
	}
	t[0xED] = rareByte
	return t
}()

// rareEnd checks the sequence at the marked byte body[j] that stringEnd
// does not take in line, and returns the offset after it; j itself when
// it is the closing quote, -1 when it breaks the rules.
func rareEnd(body []byte, j int) int {
	if j >= len(body) {
		return -1 // the padding
	}
	switch c := body[j]; {
	case c == '"':
		return j
	case c == '\\':
		if e := escapeLen(body[j:]); e > 0 {
			return j + e
		}
		return -1
	case c < 0x20:
		return -1
	case c < utf8.RuneSelf:
		return j + 1 // marked by a borrow
	}
	r, size := utf8.DecodeRune(body[j:])
	if r == utf8.RuneError && size == 1 {
		return -1
	}
	return j + size
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
