package wire

import "encoding/binary"

// gather moves bit 8j of w, for each of its eight bytes j, to bit j: byte
// j's bit lands at 56+j of the product, clear of the others.
func gather(w uint64) uint64 { return w * 0x0102040810204080 >> 56 }

// stringMasksWords returns the masks of the quotes, the backslashes and
// the control characters of s, bit k for s[k], exactly (stringEndSplit's
// escapes are found from them, so no borrow may mark a byte falsely),
// eight bytes at a time: stringMasks64 where there is no assembly.
func stringMasksWords(s *[64]byte) (quotes, backslashes, controls uint64) {
	for k := 0; k < 64; k += 8 {
		x := binary.LittleEndian.Uint64(s[k:])
		quotes |= gather(zeros(x^(ones*'"'))) << k
		backslashes |= gather(zeros(x^(ones*'\\'))) << k
		// A control character is a byte whose three high bits are clear.
		controls |= gather(zeros(x&(ones*0xe0))) << k
	}
	return quotes, backslashes, controls
}

// zeros sets bit 0 of each byte of x that is zero, exactly: the low seven
// bits of a byte plus 0x7f carry into its high bit unless they are all
// clear, and no byte's sum carries into the next.
func zeros(x uint64) uint64 {
	y := (x&^highs + ones*0x7f) | x
	return ^y & highs >> 7
}
