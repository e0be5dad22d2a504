package prefix

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/cespare/xxhash/v2"

	"github.com/llmedge/llmedge/api"
)

// render is the reference rendering: the whole prompt as one string, built
// the obvious way, to check the streaming hasher against.
func render(msgs []api.Message) string {
	esc := func(s string) string { return strings.ReplaceAll(s, "\xff", "\xff\x00") }
	var b strings.Builder
	for _, m := range msgs {
		b.WriteString(esc(m.Role) + "\xff\x01" + esc(m.Content) + "\xff\x02")
	}
	return b.String()
}

// refHashes hashes each prefix of render(msgs) that ends on a block
// boundary, the obvious way.
func refHashes(model string, blockSize, maxBlocks int, msgs []api.Message) []uint64 {
	s := render(msgs)
	var out []uint64
	for end := blockSize; end <= len(s) && len(out) < maxBlocks; end += blockSize {
		d := xxhash.NewWithSeed(xxhash.Sum64String(model))
		d.WriteString(s[:end])
		out = append(out, d.Sum64())
	}
	return out
}

// text returns n bytes of pseudo-random words, the same for the same seed.
func text(seed uint64, n int) string {
	words := []string{"the", "cache", "replica", "prompt", "token", "de", "l'été", "über", "日本語", "λόγος", "if", "{", "}", "\n", "return", "x := 1;"}
	r := rand.New(rand.NewPCG(seed, 7))
	var b strings.Builder
	for b.Len() < n {
		b.WriteString(words[r.IntN(len(words))])
		b.WriteByte(' ')
	}
	return b.String()[:n]
}

func msgs(pairs ...string) []api.Message {
	var m []api.Message
	for i := 0; i+1 < len(pairs); i += 2 {
		m = append(m, api.Message{Role: pairs[i], Content: pairs[i+1]})
	}
	return m
}

// conversation returns n messages (system first, then user and assistant
// alternating) of about size bytes each, seeded by seed.
func conversation(seed uint64, n, size int) []api.Message {
	m := []api.Message{{Role: api.RoleSystem, Content: text(seed, size)}}
	for i := 1; i < n; i++ {
		role := api.RoleUser
		if i%2 == 0 {
			role = api.RoleAssistant
		}
		m = append(m, api.Message{Role: role, Content: text(seed*1000+uint64(i), size)})
	}
	return m
}

func mustHasher(t testing.TB, model string, blockSize, maxBlocks int) Hasher {
	t.Helper()
	h, err := NewHasher(model, blockSize, maxBlocks)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func TestAppendMatchesReference(t *testing.T) {
	prompts := map[string][]api.Message{
		"empty":         nil,
		"one short":     msgs("user", "hi"),
		"empty fields":  msgs("", "", "", ""),
		"conversation":  conversation(1, 9, 300),
		"long":          conversation(2, 21, 800),
		"0xFF bytes":    msgs("sys\xfftem", "a\xff\xff\x01b\xff", "user", "\xff\x02"),
		"invalid utf-8": msgs("user", "\xc3\x28\xa0\xa1\xfe\xff"),
	}
	for name, m := range prompts {
		for _, bs := range []int{1, 3, 7, 16, 64, 100, MaxBlockSize} {
			for _, maxBlocks := range []int{1, 5, DefaultMaxBlocks, MaxMaxBlocks} {
				t.Run(fmt.Sprintf("%s/bs=%d/max=%d", name, bs, maxBlocks), func(t *testing.T) {
					h := mustHasher(t, "m", bs, maxBlocks)
					got := h.Append(nil, m)
					want := refHashes("m", bs, maxBlocks, m)
					if !slices.Equal(got, want) {
						t.Fatalf("got %d hashes, want %d (first difference at %d)", len(got), len(want), firstDiff(got, want))
					}
					if len(got) > maxBlocks {
						t.Fatalf("%d hashes over the cap %d", len(got), maxBlocks)
					}
				})
			}
		}
	}
}

func firstDiff(a, b []uint64) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

func TestAppendKeepsDst(t *testing.T) {
	h := mustHasher(t, "m", 8, 0)
	m := conversation(3, 3, 50)
	got := h.Append([]uint64{1, 2}, m)
	if want := append([]uint64{1, 2}, h.Append(nil, m)...); !slices.Equal(got, want) {
		t.Fatalf("Append lost or changed dst's elements")
	}
	var zero Hasher
	if got := zero.Append(nil, m); len(got) != 0 {
		t.Fatalf("zero Hasher produced %d hashes", len(got))
	}
}

// TestRenderingUnambiguous checks that moving bytes between fields, or
// between a field and a separator, changes the chain from the block where
// the renderings first differ, and not before.
func TestRenderingUnambiguous(t *testing.T) {
	cases := []struct{ a, b []api.Message }{
		{msgs("user", "ab", "user", "c"), msgs("user", "a", "user", "bc")},
		{msgs("user", "ab"), msgs("use", "rab")},
		{msgs("user", "a", "user", ""), msgs("user", "a")},
		{msgs("user", "a\xff\x02user\xff\x01b"), msgs("user", "a", "user", "b")},
		{msgs("user", "x\xff"), msgs("user", "x\xff\x00")},
		{msgs("", ""), nil},
		{msgs("system", "S", "user", "U"), msgs("user", "S", "system", "U")},
	}
	for i, c := range cases {
		ra, rb := render(c.a), render(c.b)
		if ra == rb {
			t.Fatalf("case %d: renderings are equal", i)
		}
		diff := 0
		for diff < min(len(ra), len(rb)) && ra[diff] == rb[diff] {
			diff++
		}
		for _, bs := range []int{1, 2, 4} {
			h := mustHasher(t, "m", bs, 0)
			ha, hb := h.Append(nil, c.a), h.Append(nil, c.b)
			same := diff / bs // blocks entirely before the first difference
			for j := range min(len(ha), len(hb)) {
				if (ha[j] == hb[j]) != (j < same) {
					t.Errorf("case %d bs %d: block %d equal=%v, want %v", i, bs, j, ha[j] == hb[j], j < same)
				}
			}
		}
	}
}

func TestModelsDoNotCollide(t *testing.T) {
	m := conversation(4, 11, 500)
	a := mustHasher(t, "llama-3.1-8b", 0, 0).Append(nil, m)
	b := mustHasher(t, "llama-3.1-70b", 0, 0).Append(nil, m)
	if len(a) == 0 || len(a) != len(b) {
		t.Fatalf("lengths %d and %d", len(a), len(b))
	}
	seen := make(map[uint64]bool, len(a))
	for _, h := range a {
		seen[h] = true
	}
	for j, h := range b {
		if seen[h] {
			t.Fatalf("block %d of the second model collides with the first's", j)
		}
	}
}

func TestNewHasherValidates(t *testing.T) {
	for _, c := range []struct{ bs, max int }{{-1, 0}, {MaxBlockSize + 1, 0}, {0, -1}, {0, MaxMaxBlocks + 1}} {
		if _, err := NewHasher("m", c.bs, c.max); err == nil || !strings.Contains(err.Error(), `model "m"`) {
			t.Errorf("NewHasher(%d, %d): err %v, want one naming the model", c.bs, c.max, err)
		}
	}
	h := mustHasher(t, "m", 0, 0)
	if h.BlockSize() != DefaultBlockSize || h.MaxBlocks() != DefaultMaxBlocks {
		t.Fatalf("defaults: %d, %d", h.BlockSize(), h.MaxBlocks())
	}
}

func TestAppendAllocs(t *testing.T) {
	h := mustHasher(t, "m", 0, 0)
	m := conversation(5, 20, 820)
	buf := make([]uint64, 0, h.MaxBlocks())
	if n := testing.AllocsPerRun(100, func() { buf = h.Append(buf[:0], m) }); n != 0 {
		t.Fatalf("Append allocates %v times per call", n)
	}
}

// A partition seeds the chain: no block of one partition's prompt is a
// block of another's, and partition 0 is Append's chain.
func TestAppendInPartitions(t *testing.T) {
	h, err := NewHasher("m", 16, 0)
	if err != nil {
		t.Fatal(err)
	}
	msgs := []api.Message{{Role: "user", Content: strings.Repeat("the same prompt, ", 20)}}
	plain := h.Append(nil, msgs)
	if got := h.AppendIn(nil, 0, msgs); !slices.Equal(got, plain) {
		t.Error("partition 0 is not Append's chain")
	}
	a, b := h.AppendIn(nil, 1, msgs), h.AppendIn(nil, 2, msgs)
	if !slices.Equal(a, h.AppendIn(nil, 1, msgs)) {
		t.Error("one partition hashes one prompt two ways")
	}
	seen := map[uint64]bool{}
	for _, x := range slices.Concat(plain, a, b) {
		if seen[x] {
			t.Fatalf("a block shared across partitions")
		}
		seen[x] = true
	}
	if n := testing.AllocsPerRun(50, func() { a = h.AppendIn(a[:0], 7, msgs) }); n != 0 {
		t.Errorf("%v allocations", n)
	}
}
