package simulator

import (
	"hash/fnv"
	"math/rand/v2"

	"github.com/llmedge/llmedge/api"
)

// words is the vocabulary of simulated replies.
var words = [...]string{
	"the", "model", "replica", "answer", "token", "stream", "edge", "gateway",
	"quick", "brown", "fox", "jumps", "over", "lazy", "dog", "and",
	"simulated", "response", "is", "a", "of", "to", "in", "for",
	"data", "request", "latency", "cache", "value", "system", "run", "test",
	"light", "river", "stone", "cloud", "signal", "path", "green", "blue",
	"small", "large", "fast", "slow", "bright", "quiet", "open", "clear",
	"north", "south", "east", "west", "morning", "evening", "paper", "glass",
	"engine", "orbit", "field", "garden", "window", "bridge", "harbor", "market",
}

// messagesHash is a stable hash of the roles and contents of msgs.
func messagesHash(msgs []api.Message) uint64 {
	h := fnv.New64a()
	for _, m := range msgs {
		h.Write([]byte(m.Role))
		h.Write([]byte{0})
		h.Write([]byte(m.Content))
		h.Write([]byte{0})
	}
	return h.Sum64()
}

// replyTokens returns the first n tokens of the reply to msgs under seed.
// Each token is one word; all but the first carry a leading space, so the
// reply text is their concatenation. A shorter reply is always a prefix of
// a longer one.
func replyTokens(seed int64, msgs []api.Message, n int) []string {
	rng := rand.New(rand.NewPCG(uint64(seed), messagesHash(msgs)))
	toks := make([]string, 0, max(n, 0))
	for i := range n {
		w := words[rng.IntN(len(words))]
		if i > 0 {
			w = " " + w
		}
		toks = append(toks, w)
	}
	return toks
}
