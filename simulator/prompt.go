package simulator

import (
	"unicode"
	"unicode/utf8"

	"github.com/llmedge/llmedge/api"
)

// The prompt as the simulated engine sees it.
//
// Chat template: the messages are rendered in order as ChatML, without a
// generation prompt, so that one turn's prompt followed by the assistant's
// answer is exactly the start of the next turn's prompt:
//
//	<|im_start|>{role}\n{content}<|im_end|>\n   (once per message)
//
// Tokenizer: deliberately simple and documented, not a real vocabulary. Each
// message is 4 template tokens — "<|im_start|>", the role (one token
// whatever it is), the "\n" after it, and "<|im_end|>\n" — plus one token per
// whitespace-separated word of its content, split exactly as strings.Fields
// splits (Unicode white space). Spacing therefore carries no token: two
// contents that differ only in white space tokenize, and cache, alike. The
// token count is the prompt_tokens every answer reports. A message without
// a role is raw text, a /v1/completions or /v1/embeddings prompt: its words
// only, no template tokens.
//
// Blocks: the token sequence is cut into blocks of Config.BlockSize tokens
// (vLLM's --block-size); only full blocks are cached, as in vLLM. A block's
// hash is a 64-bit chain: it starts from the previous block's hash (a fixed
// root for the first block) and folds in each token's hash, so a block
// matches only when its tokens and everything before it match. Hashing is
// deterministic across processes (no random seed), so runs are reproducible.

// Token hashes of the template's fixed pieces, and the seeds that keep a role
// apart from a content word of the same spelling.
const (
	tokenIMStart = 0x1b873593cc9e2d51
	tokenNewline = 0x85ebca6b27d4eb2f
	tokenIMEnd   = 0xc2b2ae3d165667b1
	seedRole     = 0x27d4eb2f165667c5
	seedWord     = 0x9e3779b97f4a7c15
	chainRoot    = 0x6c6c6d6564676521 // the parent of a prompt's first block
)

// templateTokens is the chat template's cost per message.
const templateTokens = 4

// promptTokens is the simulated prompt length of msgs (see above): the
// words of every content plus 4 per message for the chat template.
func promptTokens(msgs []api.Message) int {
	n := 0
	for _, m := range msgs {
		if m.Role != "" {
			n += templateTokens
		}
		for i := 0; ; {
			start, end := nextWord(m.Content, i)
			if start == end {
				break
			}
			n++
			i = end
		}
	}
	return n
}

// promptCut is a run of prompt tokens an engine left out to fit its
// context: n tokens from token from on (Ollama keeps the first num_keep
// tokens and the end). The zero promptCut leaves out nothing.
type promptCut struct{ from, n int }

// promptBlocks appends to dst the chained hashes of the full blocks of
// blockSize tokens of msgs' prompt (see above) and returns them with the
// prompt's token count, which always equals promptTokens(msgs). It
// allocates only when dst must grow.
func promptBlocks(dst []uint64, msgs []api.Message, blockSize int) ([]uint64, int) {
	return promptBlocksCut(dst, msgs, blockSize, promptCut{})
}

// promptBlocksCut is promptBlocks of the prompt without the tokens cut
// leaves out, which is what a truncating engine prefills and caches; the
// count is promptTokens(msgs) - cut.n.
func promptBlocksCut(dst []uint64, msgs []api.Message, blockSize int, cut promptCut) ([]uint64, int) {
	c := blockChain{dst: dst, size: max(blockSize, 1), state: chainRoot, cut: cut}
	for _, m := range msgs {
		if m.Role != "" {
			c.add(tokenIMStart)
			c.add(hashString(seedRole, m.Role))
			c.add(tokenNewline)
		}
		for i := 0; ; {
			start, end := nextWord(m.Content, i)
			if start == end {
				break
			}
			c.add(hashString(seedWord, m.Content[start:end]))
			i = end
		}
		if m.Role != "" {
			c.add(tokenIMEnd)
		}
	}
	return c.dst, c.tokens
}

// blockChain folds token hashes into chained block hashes.
type blockChain struct {
	dst    []uint64
	size   int    // tokens per block
	inBlk  int    // tokens folded into the current block so far
	tokens int    // tokens folded in in all
	state  uint64 // the current block's running hash, seeded by its parent's
	cut    promptCut
	seen   int // tokens offered, those cut included
}

// add folds one token in, unless the cut leaves it out; a block's final
// state is its hash and the seed of the next block, which is what makes the
// hashes a chain.
func (c *blockChain) add(tok uint64) {
	i := c.seen
	c.seen++
	if i >= c.cut.from && i < c.cut.from+c.cut.n {
		return
	}
	c.state = splitmix64(c.state ^ tok)
	c.tokens++
	if c.inBlk++; c.inBlk == c.size {
		c.dst = append(c.dst, c.state)
		c.inBlk = 0
	}
}

// hashString hashes s eight bytes at a time with the SplitMix64 finaliser;
// a word hashed here costs a few nanoseconds, which keeps a 16 KiB prompt in
// the tens of microseconds.
func hashString(seed uint64, s string) uint64 {
	h := seed ^ uint64(len(s))
	for ; len(s) >= 8; s = s[8:] {
		v := uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
			uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
		h = splitmix64(h ^ v)
	}
	var v uint64
	for i := 0; i < len(s); i++ {
		v |= uint64(s[i]) << (8 * i)
	}
	return splitmix64(h ^ v)
}

// asciiSpace marks the ASCII bytes unicode.IsSpace accepts.
var asciiSpace = [utf8.RuneSelf]bool{'\t': true, '\n': true, '\v': true, '\f': true, '\r': true, ' ': true}

// nextWord returns the bounds of the first word of s at or after byte i, as
// strings.Fields delimits words (runs of non-space runes; invalid UTF-8 is
// not space); start == end when there is none. It allocates nothing.
func nextWord(s string, i int) (start, end int) {
	// The ASCII paths are written out, not shared in a helper: this loop
	// runs once per prompt byte, twice per request.
	for i < len(s) {
		if b := s[i]; b < utf8.RuneSelf {
			if !asciiSpace[b] {
				break
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if !unicode.IsSpace(r) {
			break
		}
		i += size
	}
	start = i
	for i < len(s) {
		if b := s[i]; b < utf8.RuneSelf {
			if asciiSpace[b] {
				break
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if unicode.IsSpace(r) {
			break
		}
		i += size
	}
	return start, i
}
