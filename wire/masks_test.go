package wire

import (
	"math/bits"
	"math/rand/v2"
	"testing"
	"unicode/utf8"
)

// masksInput fills s with bytes drawn from those that matter to the
// masks (every other round), or with any bytes at all.
func masksInput(rng *rand.Rand, round int, s *[64]byte) {
	alphabet := []byte{'a', ' ', '"', '\\', 0x00, 0x1f, 0x20, 0x21, 0x23, 0x5b, 0x5c, 0x5d, 0x7f, 0x80, 0xa0, 0xbf, 0xc3, 0xe0, 0xe6, 0xff}
	for k := range s {
		if round%2 == 0 {
			s[k] = alphabet[rng.IntN(len(alphabet))]
		} else {
			s[k] = byte(rng.Uint32())
		}
	}
}

// TestSpecials64 holds specials64 (SSE2 on amd64, words of eight bytes
// elsewhere or with -tags purego) to a byte-by-byte reading: every quote,
// backslash, control character and byte from 0x80 marked, and a byte
// marked falsely only if it is above one of them, which stringEndInline
// allows for.
func TestSpecials64(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var s [64]byte
	for round := range 20000 {
		masksInput(rng, round, &s)
		got := specials64(s[:])
		lowest := -1
		for k, c := range s {
			special := c == '"' || c == '\\' || c < 0x20 || c >= 0x80
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
}

// TestStringMasks64 holds stringMasks64 (AVX2 on amd64) and the portable
// stringMasksWords to a byte-by-byte reading, exactly.
func TestStringMasks64(t *testing.T) {
	ways := []struct {
		name string
		f    func(*[64]byte) (uint64, uint64, uint64)
	}{{"words", stringMasksWords}}
	if splitUTF8 {
		ways = append(ways, struct {
			name string
			f    func(*[64]byte) (uint64, uint64, uint64)
		}{"stringMasks64", stringMasks64})
	}
	rng := rand.New(rand.NewPCG(3, 4))
	var s [64]byte
	for round := range 20000 {
		masksInput(rng, round, &s)
		var quotes, backslashes, controls uint64
		for k, c := range s {
			quotes |= b2m(c == '"') << k
			backslashes |= b2m(c == '\\') << k
			controls |= b2m(c < 0x20) << k
		}
		for _, way := range ways {
			q, b, c := way.f(&s)
			if q != quotes || b != backslashes || c != controls {
				t.Fatalf("%s(%q):\nquotes %064b want %064b\nbackslashes %064b want %064b\ncontrols %064b want %064b",
					way.name, s, q, quotes, b, backslashes, c, controls)
			}
		}
	}
}

// TestEscaped holds escaped to a byte-by-byte reading of runs of
// backslashes over consecutive blocks: a byte is escaped when an odd
// number of backslashes runs right before it, across block ends.
func TestEscaped(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for round := range 5000 {
		// Three blocks; dense and sparse backslashes, long runs across ends.
		density := []uint64{2, 4, 16}[round%3]
		var masks [3]uint64
		for b := range masks {
			for k := range 64 {
				if rng.Uint64N(density) != 0 || (round%5 == 0 && k > 50) {
					masks[b] |= 1 << k
				}
			}
			if round%7 == 0 {
				masks[b] = ^uint64(0)
			}
		}
		run := 0 // backslashes right before the byte
		var carry uint64
		for b, m := range masks {
			var esc uint64
			esc, carry = escaped(m, carry)
			var want uint64
			for k := range 64 {
				if run%2 == 1 {
					want |= 1 << k
				}
				switch {
				case m>>k&1 == 1 && run%2 == 0:
					run++ // a backslash that escapes the next byte
				case m>>k&1 == 1:
					run = 0 // an escaped backslash
				default:
					run = 0
				}
			}
			if esc != want {
				t.Fatalf("round %d block %d: backslashes %064b\nescaped %064b\nwant    %064b (%d differ)",
					round, b, bits.Reverse64(m), bits.Reverse64(esc), bits.Reverse64(want), bits.OnesCount64(esc^want))
			}
		}
	}
}

// TestSkipPlain holds skipPlain (AVX2 and AVX-512 on amd64, where the CPU
// has them) to skipPlainWords, and
// skipPlainWords to the rules it is named for: blocks of the kinds of
// bytes that decide (quotes, backslashes, escapes' letters, hexadecimal
// digits, d's, control characters), with and without a carry.
func TestSkipPlain(t *testing.T) {
	alphabet := []byte(`aaaa  \\\\"/bfnrtuuu0123456789abcdefABCDEFdDgxz` + "\x00\x1f\xc3\xa9\x80")
	rng := rand.New(rand.NewPCG(7, 8))
	s := make([]byte, 64*4+13)
	ways := skipPlainWays()
	for round := range 200000 {
		for k := range s {
			s[k] = 'a'
			if rng.IntN(4) == 0 || round%3 == 0 {
				s[k] = alphabet[rng.IntN(len(alphabet))]
			}
		}
		if round%2 == 0 { // escapes that are plain, and long runs of them
			for k := 0; k+6 < len(s); k += 1 + rng.IntN(12) {
				switch rng.IntN(3) {
				case 0:
					copy(s[k:], `\n`)
				case 1:
					copy(s[k:], `\u00e9`)
				default:
					copy(s[k:], `\\`)
				}
			}
		}
		carry := uint64(rng.IntN(2))
		wn, wc := skipPlainWords(s, carry)
		for name, skip := range ways {
			if n, c := skip(s, carry); n != wn || (n > 0 && c != wc) || (n == 0 && c != carry) {
				t.Fatalf("%q carry %d: skipPlain (%s) %d, %d; words %d, %d", s, carry, name, n, c, wn, wc)
			}
		}
		// Every block vouched for is plain: the split check, given the
		// string from there on, finds no fault and no end in it.
		if wn > 0 {
			body := append([]byte(nil), s[:wn]...)
			if carry == 1 {
				body = append([]byte{'\\'}, body...)
			}
			if wc == 1 {
				body = append(body, 'n') // what the last backslash escapes
			}
			body = append(body, '"')
			if end := stringEndSplit(body, 0); end != len(body)-1 && utf8.Valid(body) { // UTF-8 is checked apart
				t.Fatalf("%q carry %d: %d plain bytes, but the check ends at %d of %d", s, carry, wn, end, len(body))
			}
		}
	}
}

// BenchmarkSkipPlain runs each way of skipPlain this CPU has over 1 MB of
// the benchmarks' pasted document, from one block it stops at to the
// next, as stringEndSplit calls it. callgrind cannot tell the ways apart
// (valgrind runs no AVX-512, and offers none), hence wall time.
func BenchmarkSkipPlain(b *testing.B) {
	s := document(make([]byte, 0, 1<<20), 0, 1<<20-16)
	for name, skip := range skipPlainWays() {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(s)))
			for b.Loop() {
				i, carry := 0, uint64(0)
				for len(s)-i >= 64 {
					k, next := skip(s[i:], carry)
					i, carry = i+k+64, next // the block it stopped at, as if taken
				}
			}
		})
	}
}
