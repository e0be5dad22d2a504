package wire

import (
	"math/bits"
	"unicode/utf8"
)

// stringEndInline is stringEnd where UTF-8 is not checked with AVX2: it
// checks the string whose inside starts at body[i] and returns the offset
// of its closing quote, or -1 when the string breaks one of the
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
func stringEndInline(body []byte, i int) int {
	n := len(body)
	if i < 0 {
		return -1
	}
	var tail [64]byte
	for i < n {
		m := specials64(block(body, i, &tail)[:])
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

// What a marked byte starts, for stringEndInline: the usual sequences it takes
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
