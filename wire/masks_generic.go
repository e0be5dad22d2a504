//go:build !amd64 || purego

package wire

import "encoding/binary"

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

// specials64 marks the quotes, backslashes, control characters and every
// byte from 0x80 of s[:64], for the check that takes each character as it
// meets it (stringEndInline). It may also mark a byte above a special one
// (marks' borrow).
func specials64(s []byte) uint64 {
	s = s[:64]
	var m uint64
	for k := 0; k < 64; k += 8 {
		x := binary.LittleEndian.Uint64(s[k:])
		m |= gather((marks(x)|x&highs)>>7) << k
	}
	return m
}

// stringMasks64 returns the masks of the quotes, the backslashes and the
// control characters of s, bit k for s[k], exactly: stringMasksWords.
func stringMasks64(s *[64]byte) (quotes, backslashes, controls uint64) {
	return stringMasksWords(s)
}

// skipPlain is skipPlainWords where there is no assembly.
func skipPlain(s []byte, carry uint64) (int, uint64) { return skipPlainWords(s, carry) }
