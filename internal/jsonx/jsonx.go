// Package jsonx appends JSON values to byte slices without reflection, for
// the few fixed shapes the hot path writes per request and per token (the
// answer, each stream delta, the replica request). Its output is byte for
// byte what encoding/json's Marshal writes for the same values (HTML-safe
// escaping included), which the package's fuzz tests hold it to.
package jsonx

import (
	"math"
	"strconv"
	"unicode/utf8"
)

const hex = "0123456789abcdef"

// safe reports the ASCII bytes encoding/json writes as they are inside a
// string: printable, not '"', '\\', or the HTML-sensitive '<', '>', '&'.
var safe = func() (t [utf8.RuneSelf]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
	}
	return t
}()

// String appends s as a JSON string, escaped as encoding/json escapes it:
// control characters, '"', '\\', '<', '>', '&', U+2028 and U+2029, and
// invalid UTF-8 as U+FFFD.
func String(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if safe[c] {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// Float appends f as encoding/json writes a float64: the shortest
// representation, in exponent form only for very small or large values.
// NaN and infinities, which JSON cannot carry, are written as 0.
func Float(b []byte, f float64) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return append(b, '0')
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// clean up e-09 to e-9, as encoding/json does
		n := len(b)
		if n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

// Int appends n.
func Int(b []byte, n int64) []byte { return strconv.AppendInt(b, n, 10) }

// Bool appends v.
func Bool(b []byte, v bool) []byte { return strconv.AppendBool(b, v) }
