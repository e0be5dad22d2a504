//go:build !purego

package wire

import (
	"github.com/segmentio/asm/cpu"
	"github.com/segmentio/asm/cpu/x86"
)

// specials64 returns the mask of the bytes of s[:64] that end a run of
// plain bytes for the check that takes each character as it meets it
// (stringEndInline), bit k for s[k]: a quote, a backslash, a control
// character or a byte from 0x80, exactly. s must hold 64 bytes. SSE2,
// which every amd64 has: sixteen bytes compared at once, where the
// portable version takes eight (masks_generic.go).
//
//go:noescape
func specials64(s []byte) uint64

// stringMasks64 returns the masks of the quotes, the backslashes and the
// control characters of s, bit k for s[k], exactly. AVX2: only
// stringEndSplit calls it, which runs where AVX2 is.
//
//go:noescape
func stringMasks64(s *[64]byte) (quotes, backslashes, controls uint64)

// skipPlain returns how many bytes of s, in whole blocks of 64 from the
// start, are plain inside a string (no quote that is not escaped, no
// control character, and only escapes it vouches for: see plainEscapes),
// and the escape carry after them (see escaped), given the carry before.
// AVX2 (skipPlain256) or AVX-512 (skipPlain512, where skipPlainWide is
// set): only stringEndSplit calls it, which runs where AVX2 is.
func skipPlain(s []byte, carry uint64) (n int, next uint64) {
	if skipPlainWide {
		return skipPlain512(s, carry)
	}
	return skipPlain256(s, carry)
}

// skipPlainWide is set where skipPlain512 runs. It needs AVX-512 F and
// BW; VBMI, which it does not use, is asked for as well to leave out
// Skylake-SP and Cascade Lake, whose cores slow their clock for a while
// after 512-bit instructions, the rest of the process with them (Ice
// Lake and later, and AMD's Zen 4 and later, have VBMI and barely slow).
// A variable, so that a benchmark can take either way in the same run.
var skipPlainWide = cpu.X86.Has(wideFeatures)

// wideFeatures are the CPU features skipPlain512 runs with.
const wideFeatures = x86.AVX512F | x86.AVX512BW | x86.AVX512VBMI

//go:noescape
func skipPlain256(s []byte, carry uint64) (n int, next uint64)

//go:noescape
func skipPlain512(s []byte, carry uint64) (n int, next uint64)
