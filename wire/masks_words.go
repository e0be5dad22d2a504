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

// skipPlainWords is skipPlain eight bytes at a time: where there is no
// assembly, and the reading the assembly is held to.
func skipPlainWords(s []byte, carry uint64) (int, uint64) {
	n := 0
	for len(s)-n >= 64 {
		b := (*[64]byte)(s[n : n+64])
		quotes, backslashes, controls := stringMasksWords(b)
		esc, next := escaped(backslashes, carry)
		if quotes&^esc != 0 || controls != 0 {
			break
		}
		if esc != 0 {
			var simple, us, hex, ds uint64
			for k, c := range b {
				simple |= b2m(unescapes[c] != 0) << k
				us |= b2m(c == 'u') << k
				hex |= b2m(hexDigits[c] <= 0xF) << k
				ds |= b2m(c|0x20 == 'd') << k
			}
			if !plainEscapes(esc, simple, us, hex, ds) {
				break
			}
		}
		n, carry = n+64, next
	}
	return n, carry
}

// plainEscapes reports whether the escapes of a block are ones skipPlain
// vouches for: each escaped byte a one-byte escape's or a u, each u
// followed by four hexadecimal digits inside the block, none of them a
// surrogate's (a \ud... is left to the check that pairs them).
func plainEscapes(esc, simple, us, hex, ds uint64) bool {
	if esc&^(simple|us) != 0 {
		return false
	}
	u := esc & us
	return u>>60 == 0 && (u<<1|u<<2|u<<3|u<<4)&^hex == 0 && u<<1&ds == 0
}

// b2m is a mask's bit for b: 1 when b holds.
func b2m(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}
