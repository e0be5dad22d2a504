//go:build !purego

package wire

import (
	"testing"

	"github.com/segmentio/asm/cpu"
	"github.com/segmentio/asm/cpu/x86"
)

// skipPlainWays are the ways of skipPlain this CPU runs, each held to
// skipPlainWords by TestSkipPlain: whichever skipPlain takes, the other
// is tested too where the CPU has it.
func skipPlainWays() map[string]func([]byte, uint64) (int, uint64) {
	ways := map[string]func([]byte, uint64) (int, uint64){}
	for name, wide := range wideWays() {
		ways[name] = skipPlain256
		if wide {
			ways[name] = skipPlain512
		}
	}
	return ways
}

// wideWays maps each way of skipPlain this CPU runs to the value of
// skipPlainWide that takes it.
func wideWays() map[string]bool {
	ways := map[string]bool{}
	if cpu.X86.Has(x86.AVX2) {
		ways["avx2"] = false
	}
	if cpu.X86.Has(wideFeatures) {
		ways["avx512"] = true
	}
	return ways
}

// BenchmarkStringEndWays checks 1 MB of the pasted document with each way
// of skipPlain this CPU has, the rest of the check alike: what the AVX-512
// way saves on the whole check, UTF-8 pass included.
func BenchmarkStringEndWays(b *testing.B) {
	s := append(document([]byte{'"'}, 0, 1<<20-16), '"')
	for name, wide := range wideWays() {
		b.Run(name, func(b *testing.B) {
			defer func(old bool) { skipPlainWide = old }(skipPlainWide)
			skipPlainWide = wide
			b.SetBytes(int64(len(s)))
			for b.Loop() {
				if stringEnd(s, 1) != len(s)-1 {
					b.Fatal("refused")
				}
			}
		})
	}
}
