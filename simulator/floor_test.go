package simulator

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/llmedge/llmedge/api"
)

func TestFloor(t *testing.T) {
	const ttft, per = 20 * time.Millisecond, time.Millisecond
	system := api.Message{Role: "system", Content: wordsText(0, 40)} // 44 tokens
	turn1 := []api.Message{system, {Role: "user", Content: wordsText(100, 11)}}
	turn2 := append(append([]api.Message{}, turn1...),
		api.Message{Role: "assistant", Content: wordsText(200, 8)},
		api.Message{Role: "user", Content: wordsText(300, 6)})
	other := []api.Message{{Role: "system", Content: wordsText(1, 40)}, {Role: "user", Content: wordsText(100, 11)}}
	tests := []struct {
		name string
		msgs []api.Message
		want time.Duration // prefilled tokens, in per
	}{
		{"a first prompt: all of it", turn1, 59},
		{"the same again: all but the block of its last token", turn1, 59 - 56},
		{"the next turn: from the first turn's last whole block", turn2, 81 - 56},
		{"another tenant's prompt: nothing in common from the first block", other, 59},
		{"a second conversation of the first tenant: its system prompt's whole blocks", []api.Message{system, {Role: "user", Content: wordsText(400, 11)}}, 59 - 40},
	}
	f := NewFloor(8, ttft, per)
	for _, tc := range tests {
		if got, want := f.Send(tc.msgs), ttft+tc.want*per; got != want {
			t.Errorf("%s: floor %v, want %v", tc.name, got, want)
		}
	}
}

// TestFloorIsAnUnboundedEngine holds Floor to the engine's own cache: for
// prompts sent one after another to one replica whose cache never evicts,
// the floor's prefill is exactly the tokens the cache did not hold.
func TestFloorIsAnUnboundedEngine(t *testing.T) {
	const bs = 4
	rng := rand.New(rand.NewPCG(1, 2))
	f := NewFloor(bs, 0, time.Nanosecond)
	c := newPrefixCache(bs, 1<<20)
	convs := make([][]api.Message, 5)
	for i := range 300 {
		k := rng.IntN(len(convs))
		if convs[k] == nil || rng.IntN(4) == 0 { // a new conversation of tenant k
			convs[k] = []api.Message{{Role: "system", Content: wordsText(k, 10+k)}}
		}
		convs[k] = append(convs[k], api.Message{Role: "user", Content: wordsText(rng.IntN(50), 1+rng.IntN(9))})
		blocks, tokens := promptBlocks(nil, convs[k], bs)
		cached := c.lookup(blocks, bs, tokens)
		c.insert(blocks, bs)
		if got, want := f.Send(convs[k]), time.Duration(tokens-cached); got != want {
			t.Fatalf("prompt %d: floor prefills %d tokens, the engine %d", i, got, want)
		}
		convs[k] = append(convs[k], api.Message{Role: "assistant", Content: wordsText(rng.IntN(50), 1+rng.IntN(9))})
	}
}
