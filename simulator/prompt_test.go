package simulator

import (
	"slices"
	"strings"
	"testing"

	"github.com/llmedge/llmedge/api"
)

// wordsText returns n words of the reply vocabulary, space-separated,
// starting at word offset off: distinct offsets give distinct texts.
func wordsText(off, n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(words[(off+i*7+i/len(words))%len(words)])
	}
	return b.String()
}

// fieldsTokens is the tokenizer's rule written the obvious way.
func fieldsTokens(msgs []api.Message) int {
	n := 0
	for _, m := range msgs {
		if m.Role != "" { // a completions prompt: text without a template
			n += templateTokens
		}
		n += len(strings.Fields(m.Content))
	}
	return n
}

func TestPromptBlocksCountAgrees(t *testing.T) {
	tests := []struct {
		name string
		msgs []api.Message
	}{
		{"none", nil},
		{"empty content", []api.Message{{Role: "user"}}},
		{"hello", []api.Message{{Role: "user", Content: "hello there"}}},
		{"spacing", []api.Message{{Role: "system", Content: "  be \t brief\n"}, {Role: "user", Content: "one\r\ntwo  three "}}},
		{"unicode spaces", []api.Message{{Role: "user", Content: "a\u00a0b\u2003c\u3000d\u0085e"}}},
		{"non-ASCII words", []api.Message{{Role: "user", Content: "ça déjà 東京 naïve"}}},
		{"invalid UTF-8", []api.Message{{Role: "user", Content: "a\xff b \xc3"}}},
		{"long", []api.Message{{Role: "system", Content: wordsText(0, 500)}, {Role: "user", Content: wordsText(3, 77)}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := fieldsTokens(tt.msgs)
			if got := promptTokens(tt.msgs); got != want {
				t.Errorf("promptTokens = %d, want %d", got, want)
			}
			for _, bs := range []int{1, 3, 16} {
				blocks, n := promptBlocks(nil, tt.msgs, bs)
				if n != want || len(blocks) != want/bs {
					t.Errorf("block size %d: %d tokens in %d blocks, want %d in %d", bs, n, len(blocks), want, want/bs)
				}
			}
		})
	}
}

func FuzzPromptTokens(f *testing.F) {
	for _, s := range []string{"", "hello there", " a  b\t", "東京\u3000x", "\xff\xfe", "a\u0085b"} {
		f.Add("user", s)
	}
	f.Fuzz(func(t *testing.T, role, content string) {
		msgs := []api.Message{{Role: role, Content: content}, {Role: "user", Content: content + " tail"}}
		want := fieldsTokens(msgs)
		if got := promptTokens(msgs); got != want {
			t.Fatalf("promptTokens(%q) = %d, want %d", content, got, want)
		}
		if _, n := promptBlocks(nil, msgs, 4); n != want {
			t.Fatalf("promptBlocks(%q) counted %d tokens, want %d", content, n, want)
		}
	})
}

func TestPromptBlocksChained(t *testing.T) {
	hashes := func(content string) []uint64 {
		b, _ := promptBlocks(nil, []api.Message{{Role: "user", Content: content}}, 4)
		return b
	}
	// Blocks of 4: [<|im_start|> user \n w1] [w2 w3 w4 w5] [w6 w7 w8 <|im_end|>].
	a := hashes("a1 a2 a3 a4 a5 s6 s7 s8")
	b := hashes("b1 b2 b3 b4 b5 s6 s7 s8")
	if len(a) != 3 || len(b) != 3 {
		t.Fatalf("%d and %d blocks, want 3", len(a), len(b))
	}
	if a[2] == b[2] {
		t.Errorf("the same last block after a different prefix has the same hash")
	}
	if again := hashes("a1 a2 a3 a4 a5 s6 s7 s8"); !slices.Equal(a, again) {
		t.Errorf("hashing is not deterministic: %x then %x", a, again)
	}
	if spaced := hashes(" a1  a2\ta3 a4\na5 s6 s7 s8 "); !slices.Equal(a, spaced) {
		t.Errorf("white space changed the hashes")
	}
	c := hashes("a1 a2 a3 a4 a5 s6 s7 CHANGED")
	if a[0] != c[0] || a[1] != c[1] || a[2] == c[2] {
		t.Errorf("a change in block 3 must keep blocks 1-2 and change block 3: %x vs %x", a, c)
	}
	// A role is not a word: "user" as content differs from the role.
	r1, _ := promptBlocks(nil, []api.Message{{Role: "user", Content: "x"}}, 4)
	r2, _ := promptBlocks(nil, []api.Message{{Role: "x", Content: "user"}}, 4)
	if r1[0] == r2[0] {
		t.Errorf("role and content are interchangeable in the hash")
	}
}

// TestPromptBlocksConversation checks that a conversation's next turn
// starts with the blocks of the turn before: the template has no
// generation prompt, so turn 1's prompt is a prefix of turn 2's.
func TestPromptBlocksConversation(t *testing.T) {
	turn1 := []api.Message{{Role: "system", Content: wordsText(0, 40)}, {Role: "user", Content: wordsText(1, 25)}}
	turn2 := append(slices.Clone(turn1), api.Message{Role: "assistant", Content: wordsText(2, 30)}, api.Message{Role: "user", Content: "and then?"})
	b1, n1 := promptBlocks(nil, turn1, 16)
	b2, _ := promptBlocks(nil, turn2, 16)
	if len(b1) != n1/16 || len(b1) == 0 {
		t.Fatalf("turn 1: %d blocks of %d tokens", len(b1), n1)
	}
	if !slices.Equal(b2[:len(b1)], b1) {
		t.Errorf("turn 2 does not start with turn 1's blocks")
	}
}

// prompt16K is a system prompt and a question of 16 KiB in all.
func prompt16K() []api.Message {
	sys := wordsText(0, 2800)
	for len(sys) < 16<<10-100 {
		sys += " " + wordsText(len(sys), 50)
	}
	sys = sys[:16<<10-100]
	return []api.Message{{Role: "system", Content: sys}, {Role: "user", Content: wordsText(5, 40)[:100]}}
}

// BenchmarkPrefixLookup16KiB hashes a 16 KiB prompt into blocks and looks
// it up in a warm cache, as every chat request does.
func BenchmarkPrefixLookup16KiB(b *testing.B) {
	msgs := prompt16K()
	c := newPrefixCache(DefaultBlockSize, DefaultKVCacheBlocks)
	for i := range 64 { // other conversations around it
		blocks, _ := promptBlocks(nil, []api.Message{{Role: "user", Content: wordsText(i+10, 1000)}}, DefaultBlockSize)
		c.insert(blocks, DefaultBlockSize)
	}
	blocks, n := promptBlocks(nil, msgs, DefaultBlockSize)
	c.insert(blocks, DefaultBlockSize)
	buf := make([]uint64, 0, len(blocks))
	b.SetBytes(16 << 10)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		buf, n = promptBlocks(buf[:0], msgs, DefaultBlockSize)
		if c.lookup(buf, DefaultBlockSize, n) == 0 {
			b.Fatal("no hit")
		}
	}
	b.ReportMetric(float64(n), "tokens/op")
}
