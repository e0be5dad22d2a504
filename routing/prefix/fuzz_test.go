package prefix

import (
	"bytes"
	"encoding/binary"
	"slices"
	"strings"
	"testing"

	"github.com/cespare/xxhash/v2"

	"github.com/llmedge/llmedge/api"
)

// parseFuzz turns fuzz bytes into messages: 0x1E separates messages, the
// first 0x1F of a message its role from its content.
func parseFuzz(raw []byte) []api.Message {
	var m []api.Message
	for _, part := range bytes.Split(raw, []byte{0x1E}) {
		role, content, ok := bytes.Cut(part, []byte{0x1F})
		if !ok {
			role, content = []byte("user"), part
		}
		m = append(m, api.Message{Role: string(role), Content: string(content)})
	}
	return m
}

// FuzzHasher checks the streaming hasher against the reference rendering,
// its determinism, and that moving one byte across a message boundary
// changes the chain exactly from the block where the renderings diverge.
func FuzzHasher(f *testing.F) {
	f.Add("m", []byte("system\x1fYou are helpful.\x1euser\x1fab\x1eassistant\x1fc"), uint16(1), uint16(0))
	f.Fuzz(func(t *testing.T, model string, raw []byte, blockSize, shift uint16) {
		bs := 1 + int(blockSize)%MaxBlockSize
		h, err := NewHasher(model, bs, 0)
		if err != nil {
			t.Fatal(err)
		}
		m := parseFuzz(raw)
		got := h.Append(nil, m)
		if want := refHashes(model, bs, h.MaxBlocks(), m); !slices.Equal(got, want) {
			t.Fatalf("streaming and reference hashes differ from block %d", firstDiff(got, want))
		}
		// Equal inputs in other memory give equal hashes.
		clone := make([]api.Message, len(m))
		for i := range m {
			clone[i] = api.Message{Role: strings.Clone(m[i].Role), Content: strings.Clone(m[i].Content)}
		}
		if again := h.Append(make([]uint64, 0, 1), clone); !slices.Equal(got, again) {
			t.Fatal("equal inputs hashed differently")
		}
		if len(m) < 2 {
			return
		}
		// Move one byte across the boundary between messages k and k+1.
		k := int(shift) % (len(m) - 1)
		moved := slices.Clone(m)
		a, b := moved[k].Content, moved[k+1].Content
		switch {
		case a != "":
			moved[k].Content, moved[k+1].Content = a[:len(a)-1], a[len(a)-1:]+b
		case b != "":
			moved[k].Content, moved[k+1].Content = b[:1], b[1:]
		default:
			return
		}
		ra, rb := render(m), render(moved)
		if ra == rb {
			t.Fatalf("moving a byte between messages %d and %d left the rendering unchanged", k, k+1)
		}
		d := 0
		for d < min(len(ra), len(rb)) && ra[d] == rb[d] {
			d++
		}
		other := h.Append(nil, moved)
		for j := range min(len(got), len(other)) {
			if (got[j] == other[j]) != (j < d/bs) {
				t.Fatalf("block %d: equal=%v, but the renderings diverge at byte %d (block %d)", j, got[j] == other[j], d, d/bs)
			}
		}
	})
}

// FuzzIndex runs a sequence of operations decoded from the input on three
// indexes: one too large to evict, compared with a plain set per replica;
// one small enough to evict all the time, whose bound and structure are
// checked; and one fed raw hashes that do not chain (duplicates, repeats),
// which must keep its structure and never panic.
func FuzzIndex(f *testing.F) {
	f.Add([]byte{0, 1, 5, 0, 1, 2, 3, 4, 1, 0, 2, 9, 0, 1, 2, 3, 3, 1, 2, 4})
	f.Fuzz(func(t *testing.T, ops []byte) {
		const replicas = 5
		names := []string{"r0", "r1", "r2", "r3", "r4"}
		big := mustIndex(t, "m", Config{MaxBlocks: 24, Capacity: 1 << 16})
		small := mustIndex(t, "m", Config{MaxBlocks: 24, Capacity: 10})
		raw := mustIndex(t, "m", Config{MaxBlocks: 24, Capacity: 10})
		held := make([]map[uint64]bool, replicas)
		for i := range held {
			held[i] = make(map[uint64]bool)
		}
		ref := func(r int, h []uint64) int {
			n := 0
			for n < len(h) && held[r][h[n]] {
				n++
			}
			return n
		}
		next := func() int {
			if len(ops) == 0 {
				return 0
			}
			b := ops[0]
			ops = ops[1:]
			return int(b)
		}
		// chain reads a length and that many block values from a small
		// alphabet, so that prompts share prefixes often.
		chain := func() []uint64 {
			n := next() % 30
			h := make([]uint64, n)
			var buf [16]byte
			binary.LittleEndian.PutUint64(buf[:], 1)
			for i := range h {
				buf[8] = byte(next() % 3)
				h[i] = xxhash.Sum64(buf[:])
				binary.LittleEndian.PutUint64(buf[:], h[i])
			}
			return h
		}
		for len(ops) > 0 {
			switch op := next(); op % 4 {
			case 0:
				r, h := next()%replicas, chain()
				hit := mustInsert(t, big, names[r], h)
				if want := ref(r, h[:min(len(h), 24)]); hit != want {
					t.Fatalf("Insert hit %d, the set says %d", hit, want)
				}
				for _, b := range h[:min(len(h), 24)] {
					held[r][b] = true
				}
				mustInsert(t, small, names[r], h)
				if got := match(small, h, names[r])[0]; len(h) <= 10 && got != len(h) {
					t.Fatalf("the last prompt inserted (%d blocks) matches %d", len(h), got)
				}
			case 1:
				h := chain()
				got := big.Match(nil, h, names)
				for r := range replicas {
					if want := ref(r, h); got[r] != want {
						t.Fatalf("replica %d matches %d, the set says %d", r, got[r], want)
					}
				}
				for _, n := range small.Match(nil, h, names) {
					if n > min(len(h), 10) {
						t.Fatalf("matched %d blocks of %d beyond the capacity", n, len(h))
					}
				}
			case 2:
				r := next() % replicas
				big.Remove(names[r])
				small.Remove(names[r])
				raw.Remove(names[r])
				clear(held[r])
			case 3:
				r, n := next()%replicas, next()%30
				h := make([]uint64, n)
				for i := range h {
					h[i] = uint64(next() % 4)
				}
				mustInsert(t, raw, names[r], h)
				for _, m := range raw.Match(nil, h, names) {
					if m > len(h) {
						t.Fatalf("matched %d of %d raw hashes", m, len(h))
					}
				}
			}
		}
		check(t, big)
		check(t, small)
		checkIndex(t, raw, false)
	})
}
