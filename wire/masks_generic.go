//go:build !amd64 || purego

package wire

import "encoding/binary"

// escapes64 returns the mask of the bytes of s[:64] that end a run of
// plain string bytes, bit k for s[k]: a quote, a backslash or a control
// character. It may also mark a byte above one of them (marks' borrow),
// which stringEnd takes for the plain byte it is. s must hold 64 bytes.
func escapes64(s []byte) uint64 {
	s = s[:64]
	var m uint64
	for k := 0; k < 64; k += 8 {
		// The high bit of each of the word's bytes, gathered into its low
		// eight bits: byte j's bit lands at 56+j, clear of the others.
		w := marks(binary.LittleEndian.Uint64(s[k:])) >> 7
		m |= w * 0x0102040810204080 >> 56 << k
	}
	return m
}

// marks sets the high bit of each byte of the word x that is a quote, a
// backslash or a control character. No such byte goes unmarked; a byte
// above one may be marked falsely (a borrow), so the caller looks at each
// marked byte before it acts on it. The bytes are compared by subtraction
// alone (a quote or backslash xor-ed to zero, a control character below
// 0x20 borrows); a byte from 0x80 up, which subtraction would mark too,
// is cleared by its own high bit.
func marks(x uint64) uint64 {
	quote, backslash := x^(ones*'"'), x^(ones*'\\')
	return ((quote - ones) | (backslash - ones) | (x - ones*0x20)) &^ x & highs
}

// specials64 is escapes64 that also marks every byte from 0x80, for the
// check that takes each character as it meets it (stringEndInline). It
// may also mark a byte above a special one (marks' borrow).
func specials64(s []byte) uint64 {
	s = s[:64]
	var m uint64
	for k := 0; k < 64; k += 8 {
		x := binary.LittleEndian.Uint64(s[k:])
		w := (marks(x) | x&highs) >> 7
		m |= w * 0x0102040810204080 >> 56 << k
	}
	return m
}
