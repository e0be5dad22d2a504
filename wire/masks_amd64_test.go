//go:build !purego

package wire

import (
	"github.com/segmentio/asm/cpu"
	"github.com/segmentio/asm/cpu/x86"
)

// skipPlainWays are the ways of skipPlain this CPU runs, each held to
// skipPlainWords by TestSkipPlain: whichever skipPlain takes, the other
// is tested too where the CPU has it.
func skipPlainWays() map[string]func([]byte, uint64) (int, uint64) {
	ways := map[string]func([]byte, uint64) (int, uint64){}
	if cpu.X86.Has(x86.AVX2) {
		ways["avx2"] = skipPlain256
	}
	if cpu.X86.Has(wideFeatures) {
		ways["avx512"] = skipPlain512
	}
	return ways
}
