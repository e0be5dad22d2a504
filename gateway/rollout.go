package gateway

import (
	"hash/fnv"
	"io"
	"math/rand/v2"

	"github.com/llmedge/llmedge/api"
)

// Share is one part of a model served by another model: a weighted
// rollout sends Weight parts of the model's conversations to Model.
type Share struct {
	Model  string
	Weight int
}

// rolloutTarget is the model that serves chat among m's Rollout shares.
// A conversation keeps its share while the weights stay as they are: the
// point that chooses it is a hash of the conversation's opening (its
// system message and first user message), which every later turn
// resends, so a conversation is never split between two models (and the
// prefix cache of the one serving it keeps working). Changing the weights
// moves only the conversations between the old and the new boundaries. A
// request with no messages (an embedding) takes a random point.
func (g *Gateway) rolloutTarget(m *Model, chat *api.Chat) *Model {
	total := 0
	for _, s := range m.Rollout {
		total += s.Weight
	}
	if total <= 0 {
		return nil
	}
	point := rand.Float64()
	if h, ok := conversationKey(chat); ok {
		point = float64(mix(h)>>11) / (1 << 53) // [0, 1)
	}
	x := point * float64(total)
	var last *Model
	for _, s := range m.Rollout {
		last = g.Models[s.Model]
		if x < float64(s.Weight) {
			return last
		}
		x -= float64(s.Weight)
	}
	return last // rounding at the very top
}

// conversationKey hashes what every turn of a conversation starts with:
// the system message (the request's, or its leading one) and the
// messages up to the first user message. False when there is none.
func conversationKey(chat *api.Chat) (uint64, bool) {
	h := fnv.New64a()
	n := 0
	msgs := chat.Messages
	if chat.SystemMessage != nil {
		_, _ = h.Write([]byte("system\x00"))
		_, _ = h.Write([]byte(*chat.SystemMessage))
		_, _ = h.Write([]byte{0})
		n++
		if len(msgs) > 0 && msgs[0].Role == api.RoleSystem {
			msgs = msgs[1:] // replaced by the request's system_message
		}
	}
	for _, msg := range msgs {
		_, _ = h.Write([]byte(msg.Role))
		_, _ = h.Write([]byte{0})
		for s := range msg.Pieces {
			_, _ = io.WriteString(h, s)
		}
		_, _ = h.Write([]byte{0})
		n++
		if msg.Role == api.RoleUser {
			break
		}
	}
	return h.Sum64(), n > 0
}

// mix spreads h's bits over all 64 (splitmix64's finalizer): FNV's high
// bits, which choose the point, barely differ between openings that
// differ only in their last bytes ("conversation 1", "conversation 2").
func mix(h uint64) uint64 {
	h ^= h >> 30
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 27
	h *= 0x94d049bb133111eb
	h ^= h >> 31
	return h
}
