package wire

import (
	"math/rand/v2"
	"testing"
)

// TestMasks holds escapes64 and specials64 (SSE2 on amd64, words of
// eight bytes elsewhere or with -tags purego) to a byte-by-byte reading of
// 64 bytes drawn from the bytes that matter: every byte of their kind
// marked (quotes, backslashes and control characters; and for specials64
// every byte from 0x80), and a byte marked falsely only if it is above
// one of them, which the string checks allow for.
func TestMasks(t *testing.T) {
	for _, tc := range []struct {
		name string
		mask func([]byte) uint64
		high bool
	}{{"escapes64", escapes64, false}, {"specials64", specials64, true}} {
		t.Run(tc.name, func(t *testing.T) {
			alphabet := []byte{'a', ' ', '"', '\\', 0x00, 0x1f, 0x20, 0x21, 0x23, 0x5b, 0x5d, 0x7f, 0x80, 0xa0, 0xbf, 0xc3, 0xe6, 0xff}
			rng := rand.New(rand.NewPCG(1, 2))
			var s [64]byte
			for round := range 20000 {
				for k := range s {
					if round%2 == 0 {
						s[k] = alphabet[rng.IntN(len(alphabet))]
					} else {
						s[k] = byte(rng.Uint32()) // any byte at all
					}
				}
				got := tc.mask(s[:])
				lowest := -1
				for k, c := range s {
					special := c == '"' || c == '\\' || c < 0x20 || (tc.high && c >= 0x80)
					marked := got>>k&1 == 1
					switch {
					case special && !marked:
						t.Fatalf("%q: byte %d (%#x) not marked (mask %064b)", s, k, c, got)
					case !special && marked && lowest < 0:
						t.Fatalf("%q: byte %d (%#x) marked below any special byte (mask %064b)", s, k, c, got)
					}
					if special && lowest < 0 {
						lowest = k
					}
				}
			}
		})
	}
}
