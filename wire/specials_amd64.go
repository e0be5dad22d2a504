//go:build !purego

package wire

// specials64 returns the mask of the special bytes of s[:64], bit k for
// s[k]: a quote, a backslash, a control character or a byte from 0x80,
// exactly. s must hold 64 bytes. SSE2, which every amd64 has: sixteen
// bytes compared at once, where the portable version takes eight
// (specials_generic.go).
//
//go:noescape
func specials64(s []byte) uint64
