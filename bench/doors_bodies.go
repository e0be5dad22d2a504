package bench

import (
	"fmt"
	"strconv"
	"strings"
)

// A door of llmedge, as the doors scenario sends to it: the path of the
// door on llmedge, and the path of the replica stock Caddy forwards the
// same conversation to.
type door struct {
	Name      string
	Path      string // on llmedge
	CaddyPath string // on stock Caddy, reverse_proxy to the replica
}

// doorList are the doors the scenario knows, in the report's order. The
// native door's counterpart is the same conversation as OpenAI's chat
// completions (what it becomes on the replica): a plain proxy has no
// native API to forward to.
var doorList = []door{
	{"native", "/tasks/assistant_inference", "/v1/chat/completions"},
	{"chat", "/v1/chat/completions", "/v1/chat/completions"},
	{"completions", "/v1/completions", "/v1/completions"},
	{"embeddings", "/v1/embeddings", "/v1/embeddings"},
	{"responses", "/v1/responses", "/v1/responses"},
	{"anthropic", "/v1/messages", "/v1/messages"},
}

// DoorNames are the names of the doors the scenario knows, in order.
func DoorNames() []string {
	names := make([]string, len(doorList))
	for i, d := range doorList {
		names[i] = d.Name
	}
	return names
}

// findDoor returns the door named name.
func findDoor(name string) (door, bool) {
	for _, d := range doorList {
		if d.Name == name {
			return d, true
		}
	}
	return door{}, false
}

// DoorSizes are the scenario's body sizes by default: a short question,
// a working conversation, an agent's context, a long one.
var DoorSizes = []int{1 << 10, 16 << 10, 100 << 10, 1 << 20}

// sizeName names a body size as the tables and benchmarks do: 1KB, 16KB,
// 100KB, 1MB (binary units).
func sizeName(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%dMB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%dKB", n>>10)
	}
	return fmt.Sprintf("%dB", n)
}

// conversationTurns is how many messages a conversation of size bytes has
// besides its system prompt: an odd number (user first and last), about
// one per 4 KB, at least five and at most 39, as an agent's context grows
// by turns rather than by one long message.
func conversationTurns(size int) int {
	n := min(max(size/4096, 5), 39)
	if n%2 == 0 {
		n++
	}
	return n
}

// doorBody is a request of exactly size bytes for door d with model as
// its model: a system prompt, then user and assistant turns, the text of
// words, punctuation, escapes and multi-byte characters (as largeBody's);
// non-streamed, with a reply cap above the benchmark's reply length. It
// fails when size is too small to hold the conversation's structure.
func doorBody(d, model string, size int) ([]byte, error) {
	turns := conversationTurns(size)
	lens := make([]int, turns+1) // [0] the system prompt
	overhead := len(conversationBody(d, model, lens))
	avail := size - overhead
	if avail < len(lens) {
		return nil, fmt.Errorf("%s body of %d bytes: its structure alone takes %d", d, size, overhead)
	}
	for i := range lens {
		lens[i] = avail / len(lens)
	}
	lens[len(lens)-1] += avail % len(lens)
	b := conversationBody(d, model, lens)
	if len(b) != size {
		return nil, fmt.Errorf("%s body: %d bytes, want %d", d, len(b), size)
	}
	return b, nil
}

// conversationBody writes door d's request whose texts have lens[i]
// bytes as JSON spells them: lens[0] the system prompt's, then the turns'.
func conversationBody(d, model string, lens []int) []byte {
	var b strings.Builder
	text := func(i int) { fillText(&b, lens[i], i) }
	role := func(i int) string {
		if i%2 == 1 {
			return "user"
		}
		return "assistant"
	}
	switch d {
	case "native", "chat":
		if d == "native" {
			fmt.Fprintf(&b, `{"model_type":%q,"temperature":0.7,"messages":[`, model)
		} else {
			fmt.Fprintf(&b, `{"model":%q,"temperature":0.7,"max_tokens":64,"messages":[`, model)
		}
		b.WriteString(`{"role":"system","content":"`)
		text(0)
		b.WriteString(`"}`)
		for i := 1; i < len(lens); i++ {
			fmt.Fprintf(&b, `,{"role":%q,"content":"`, role(i))
			text(i)
			b.WriteString(`"}`)
		}
		b.WriteString(`]}`)
	case "completions":
		// The conversation as one prompt, the way a client that does its
		// own templating sends it.
		fmt.Fprintf(&b, `{"model":%q,"temperature":0.7,"max_tokens":64,"prompt":"System: `, model)
		text(0)
		for i := 1; i < len(lens); i++ {
			label := "User"
			if role(i) == "assistant" {
				label = "Assistant"
			}
			b.WriteString(`\n\n` + label + `: `)
			text(i)
		}
		b.WriteString(`\n\nAssistant:"}`)
	case "embeddings":
		// The conversation's texts as a batch of documents to embed, the
		// way a retrieval pipeline sends its chunks.
		fmt.Fprintf(&b, `{"model":%q,"encoding_format":"float","input":["`, model)
		text(0)
		for i := 1; i < len(lens); i++ {
			b.WriteString(`","`)
			text(i)
		}
		b.WriteString(`"]}`)
	case "responses":
		// Input items as the SDKs send a conversation: messages with text,
		// every other user turn as input_text parts.
		fmt.Fprintf(&b, `{"model":%q,"temperature":0.7,"max_output_tokens":64,"instructions":"`, model)
		text(0)
		b.WriteString(`","input":[`)
		for i := 1; i < len(lens); i++ {
			if i > 1 {
				b.WriteByte(',')
			}
			if i%4 == 3 {
				b.WriteString(`{"type":"message","role":"user","content":[{"type":"input_text","text":"`)
				text(i)
				b.WriteString(`"}]}`)
				continue
			}
			fmt.Fprintf(&b, `{"role":%q,"content":"`, role(i))
			text(i)
			b.WriteString(`"}`)
		}
		b.WriteString(`]}`)
	case "anthropic":
		// Anthropic's shape: the system prompt apart, every other user
		// turn as text blocks, as agents built on its SDK send them.
		fmt.Fprintf(&b, `{"model":%q,"max_tokens":64,"temperature":0.7,"system":"`, model)
		text(0)
		b.WriteString(`","messages":[`)
		for i := 1; i < len(lens); i++ {
			if i > 1 {
				b.WriteByte(',')
			}
			if i%4 == 3 {
				b.WriteString(`{"role":"user","content":[{"type":"text","text":"`)
				text(i)
				b.WriteString(`"}]}`)
				continue
			}
			fmt.Fprintf(&b, `{"role":%q,"content":"`, role(i))
			text(i)
			b.WriteString(`"}`)
		}
		b.WriteString(`]}`)
	default:
		panic("doorBody: unknown door " + d)
	}
	return []byte(b.String())
}

// textWords are the words of the bodies' texts as JSON spells them: plain
// words, punctuation, numbers, unicode escapes, raw multi-byte
// characters, escaped quotes, backslashes and line breaks.
var textWords = []string{"the", "agent", "reads", "a", "long", "file", "through", "to", "its", "replica,",
	"byte", "for", "byte;", `caf\u00e9`, "naïve", `\\path`, `\"quoted\"`, "42", "3.14", `end.\n`,
	"über", "日本語", "func", "main()", `{\"k\":1}`, "→", "tool_result:"}

// fillText writes exactly n bytes of JSON string content (no escape cut
// in two), starting at a word that depends on seed so that no two texts
// are alike.
func fillText(b *strings.Builder, n, seed int) {
	written := 0
	for i := seed * 11; ; i++ {
		w := textWords[(i*7+i/len(textWords))%len(textWords)]
		sep := 0
		if written > 0 {
			sep = 1
		}
		if written+sep+len(w) > n {
			break
		}
		if sep == 1 {
			b.WriteByte(' ')
		}
		b.WriteString(w)
		written += sep + len(w)
	}
	for ; written < n; written++ {
		b.WriteByte('.') // whole words only: pad to the size
	}
}

// ParseSize reads a body size as sizeName writes it (1KB, 16KB, 1MB:
// binary units) or in bytes.
func ParseSize(s string) (int, error) {
	num, mult := s, 1
	switch {
	case strings.HasSuffix(s, "MB"):
		num, mult = strings.TrimSuffix(s, "MB"), 1<<20
	case strings.HasSuffix(s, "KB"):
		num, mult = strings.TrimSuffix(s, "KB"), 1<<10
	case strings.HasSuffix(s, "B"):
		num = strings.TrimSuffix(s, "B")
	}
	n, err := strconv.Atoi(num)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("size %q: want a positive number of bytes, KB or MB (1KB, 16KB, 1MB)", s)
	}
	return n * mult, nil
}
