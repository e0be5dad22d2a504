//go:build !purego

package wire

// escapes64 returns the mask of the bytes of s[:64] that end a run of
// plain string bytes, bit k for s[k]: a quote, a backslash or a control
// character, exactly. s must hold 64 bytes. SSE2, which every amd64 has:
// sixteen bytes compared at once, where the portable version takes eight
// (escapes_generic.go).
//
//go:noescape
func escapes64(s []byte) uint64

// specials64 is escapes64 that also marks every byte from 0x80 (its own
// high bit), for the check that takes each character as it meets it
// (stringEndInline).
//
//go:noescape
func specials64(s []byte) uint64
