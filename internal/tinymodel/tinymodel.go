// Package tinymodel writes a tiny llama model as a GGUF v3 file, for
// running a real inference engine (Ollama, llama.cpp) in tests without
// downloading anything: 2 layers, hidden size 64, 4 heads, about 700
// tokens, about 800 KB of F32 weights.
//
// The weights are random but shaped so that the model behaves predictably:
// every token's embedding has a constant first component that no layer
// writes to, so after the final norm that component is always positive,
// and the output matrix uses it to push byte-fallback and control tokens
// far down (their text could otherwise be invalid UTF-8). The rest of each
// embedding is a random direction, and each word token's output row points
// at the embedding of the token it should follow, so greedy decoding (and
// sampling at any temperature a client may send, up to 2) walks a fixed
// chain of made-up words. Attention and the feed-forward layers are small
// random perturbations: the engine really computes them, and the prompt is
// really processed, but they do not change which word comes next. With
// Config.AnswerWords set, the last word of the chain is followed by
// <|im_end|> (end of generation), so answers finish on their own; without
// it the chain loops and only the token limit ends an answer.
//
// Output is deterministic: the same Config gives the same bytes on every
// run and platform (a private PRNG, and float arithmetic kept in an order
// the compiler may not fuse).
package tinymodel

import (
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
)

// Architecture of the model; small enough to load in a fraction of a second
// and answer at about 1,000 tokens/s on one CPU core.
const (
	embd     = 64
	layers   = 2
	heads    = 4
	headDim  = embd / heads
	ffn      = 128
	numWords = 256
)

// DefaultContextLength is llama.context_length when Config leaves it 0.
const DefaultContextLength = 4096

// Token ids of the control tokens.
const (
	tokUnk      = 0
	tokBOS      = 1
	tokEOS      = 2 // </s>
	tokIMStart  = 3
	tokIMEnd    = 4 // end of generation for ChatML
	firstByteID = 5 // <0x00> .. <0xFF> follow
)

// Token types of llama.cpp's vocabulary.
const (
	typeNormal  int32 = 1
	typeUnknown int32 = 2
	typeControl int32 = 3
	typeByte    int32 = 6
)

// spmSpace is SentencePiece's marker for a preceding space.
const spmSpace = "\u2581"

// ChatTemplate is the ChatML template stored in tokenizer.chat_template
// (Jinja, as Hugging Face tokenizers write it).
const ChatTemplate = "{% for message in messages %}" +
	"{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}" +
	"{% endfor %}" +
	"{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"

// OllamaTemplate is the same ChatML template in Ollama's Go template syntax,
// for a Modelfile's TEMPLATE, written as the templates of Ollama's library
// (qwen2.5's, for one) are: a conversation that ends with the assistant's
// message leaves that turn open, without <|im_end|> or a generation
// prompt, so that the model continues the message (a gateway's
// continuation of a broken stream); any other renders as the Jinja one.
const OllamaTemplate = `{{- range $i, $_ := .Messages }}
{{- $last := eq (len (slice $.Messages $i)) 1 -}}
<|im_start|>{{ .Role }}
{{ .Content }}
{{- if or (ne .Role "assistant") (not $last) }}<|im_end|>
{{ end }}
{{- if and (ne .Role "assistant") $last }}<|im_start|>assistant
{{ end }}
{{- end }}`

// OllamaToolsTemplate is OllamaTemplate with the tools a request offers
// rendered first, as a system turn. Ollama takes a model whose template
// uses .Tools as one that supports tools and refuses a request with tools
// for any other ("does not support tools"); coding agents send tools on
// every request. The tiny model never calls one: it answers its words.
const OllamaToolsTemplate = `{{- if .Tools }}<|im_start|>system
{{- range .Tools }}
{{ . }}
{{- end }}<|im_end|>
{{ end }}` + OllamaTemplate

// Config chooses the model.
type Config struct {
	// Seed picks the words, their order and the weights.
	Seed uint64
	// AnswerWords is how many words every answer has before <|im_end|>
	// (1 to 256). 0 makes answers endless: only the token limit (or the
	// context filling up) ends them.
	AnswerWords int
	// ContextLength is the trained context length the file declares
	// (llama.context_length); 0 means DefaultContextLength.
	ContextLength int
}

func (c Config) validate() error {
	if c.AnswerWords < 0 || c.AnswerWords > numWords {
		return fmt.Errorf("tinymodel: AnswerWords %d is not within 0..%d", c.AnswerWords, numWords)
	}
	if c.ContextLength < 0 {
		return errors.New("tinymodel: negative ContextLength")
	}
	return nil
}

// Write writes the model as GGUF v3 to w.
func Write(w io.Writer, c Config) error {
	if err := c.validate(); err != nil {
		return err
	}
	ctxLen := c.ContextLength
	if ctxLen == 0 {
		ctxLen = DefaultContextLength
	}
	v := newVocab(c.Seed)
	r := newRNG(c.Seed ^ 0x6c6c6d65646765) // weights draw from their own stream
	n := len(v.tokens)

	// Embeddings: a constant first component, then a random unit direction.
	const constant = 1.0
	dirs := make([][]float32, n)
	tokEmbd := make([]float32, 0, n*embd)
	for t := range n {
		dirs[t] = r.direction(embd - 1)
		tokEmbd = append(tokEmbd, constant)
		tokEmbd = append(tokEmbd, dirs[t]...)
	}

	// Output rows. After the final RMS norm the hidden state is about
	// (5.7, 5.7·û) for the current token's direction û, so a row
	// (0, alpha·û_prev) gives its token a logit of about 28 when the
	// current token is prev, and about N(0, 3.6) otherwise; rows with a
	// negative first component are pushed down by that much times 5.7.
	const (
		alpha       = 5.0 // weight on the predecessor's direction
		pushControl = 5.0 // byte and control tokens: about -28, never sampled
		pushPiece   = 3.0 // letters and syllables (prompt pieces): about -17
	)
	out := make([]float32, n*embd)
	row := func(t int) []float32 { return out[t*embd : (t+1)*embd] }
	follow := func(t, prev int) { // make t the likely successor of prev
		dst := row(t)[1:]
		for i, x := range dirs[prev] {
			dst[i] = float32(float64(dst[i]) + float64(float32(alpha*float64(x))))
		}
	}
	for t := range n {
		switch {
		case v.types[t] == typeNormal && v.isWord[t]:
			// set below
		case v.types[t] == typeNormal:
			row(t)[0] = -pushPiece
		default:
			row(t)[0] = -pushControl
		}
	}
	newline := firstByteID + int('\n') // the last prompt token: "<|im_start|>assistant\n"
	chain := v.words
	follow(chain[0], newline)
	if c.AnswerWords == 0 {
		for i := 1; i < len(chain); i++ {
			follow(chain[i], chain[i-1])
		}
		follow(chain[0], chain[len(chain)-1])
	} else {
		for i := 1; i < c.AnswerWords; i++ {
			follow(chain[i], chain[i-1])
		}
		row(tokIMEnd)[0] = 0
		follow(tokIMEnd, chain[c.AnswerWords-1])
	}

	ones := make([]float32, embd)
	for i := range ones {
		ones[i] = 1
	}
	tensors := []tensor{{name: "token_embd.weight", dims: []uint64{embd, uint64(n)}, data: tokEmbd}}
	for l := range layers {
		p := fmt.Sprintf("blk.%d.", l)
		// Rows are output components; row 0 of attn_output and ffn_down
		// stays zero so that no layer changes the constant component.
		attnOut := r.matrix(embd, embd, 0.03)
		clear(attnOut[:embd])
		ffnDown := r.matrix(embd, ffn, 0.02)
		clear(ffnDown[:ffn])
		tensors = append(tensors,
			tensor{name: p + "attn_norm.weight", dims: []uint64{embd}, data: ones},
			tensor{name: p + "attn_q.weight", dims: []uint64{embd, embd}, data: r.matrix(embd, embd, 0.17)},
			tensor{name: p + "attn_k.weight", dims: []uint64{embd, embd}, data: r.matrix(embd, embd, 0.17)},
			tensor{name: p + "attn_v.weight", dims: []uint64{embd, embd}, data: r.matrix(embd, embd, 0.03)},
			tensor{name: p + "attn_output.weight", dims: []uint64{embd, embd}, data: attnOut},
			tensor{name: p + "ffn_norm.weight", dims: []uint64{embd}, data: ones},
			tensor{name: p + "ffn_gate.weight", dims: []uint64{embd, ffn}, data: r.matrix(ffn, embd, 0.108)},
			tensor{name: p + "ffn_up.weight", dims: []uint64{embd, ffn}, data: r.matrix(ffn, embd, 0.108)},
			tensor{name: p + "ffn_down.weight", dims: []uint64{ffn, embd}, data: ffnDown},
		)
	}
	tensors = append(tensors,
		tensor{name: "output_norm.weight", dims: []uint64{embd}, data: ones},
		tensor{name: "output.weight", dims: []uint64{embd, uint64(n)}, data: out},
	)

	kvs := []kv{
		{"general.architecture", "llama"},
		{"general.name", "llmedge-tiny"},
		{"general.file_type", uint32(0)}, // all F32
		{"llama.vocab_size", uint32(n)},
		{"llama.context_length", uint32(ctxLen)},
		{"llama.embedding_length", uint32(embd)},
		{"llama.block_count", uint32(layers)},
		{"llama.feed_forward_length", uint32(ffn)},
		{"llama.rope.dimension_count", uint32(headDim)},
		{"llama.rope.freq_base", float32(10000)},
		{"llama.attention.head_count", uint32(heads)},
		{"llama.attention.head_count_kv", uint32(heads)},
		{"llama.attention.layer_norm_rms_epsilon", float32(1e-5)},
		{"tokenizer.ggml.model", "llama"},
		{"tokenizer.ggml.tokens", v.tokens},
		{"tokenizer.ggml.scores", v.scores},
		{"tokenizer.ggml.token_type", v.types},
		{"tokenizer.ggml.bos_token_id", uint32(tokBOS)},
		{"tokenizer.ggml.eos_token_id", uint32(tokIMEnd)},
		{"tokenizer.ggml.unknown_token_id", uint32(tokUnk)},
		{"tokenizer.ggml.add_bos_token", true},
		{"tokenizer.ggml.add_eos_token", false},
		{"tokenizer.chat_template", ChatTemplate},
	}
	return writeGGUF(w, kvs, tensors)
}

// Answer returns the first n words the model answers with c (at most
// AnswerWords when answers end; the chain repeats when they do not).
func Answer(c Config, n int) []string {
	v := newVocab(c.Seed)
	if c.AnswerWords > 0 {
		n = min(n, c.AnswerWords)
	}
	words := make([]string, 0, n)
	for i := range n {
		words = append(words, strings.TrimPrefix(v.tokens[v.words[i%len(v.words)]], spmSpace))
	}
	return words
}

// Modelfile is an Ollama Modelfile for the GGUF file at path: the ChatML
// template, <|im_end|> as the stop sequence, and a context of numCtx
// tokens.
//
// It also sets one compute thread. The model is too small to gain from
// more, and llama.cpp's threads wait for each other by spinning at every
// step of every token: on a machine whose cores are busy with other work
// (CI, a test suite running in parallel), a descheduled thread makes the
// others spin for a whole time slice, and decoding fell from about 1,000
// to 5 tokens/s when we left it at the default (one thread per core).
func Modelfile(path string, numCtx int) string {
	return modelfile(path, OllamaTemplate, numCtx)
}

// ToolsModelfile is Modelfile with OllamaToolsTemplate: a model Ollama
// lets take tools.
func ToolsModelfile(path string, numCtx int) string {
	return modelfile(path, OllamaToolsTemplate, numCtx)
}

func modelfile(path, template string, numCtx int) string {
	return fmt.Sprintf("FROM %s\nTEMPLATE \"\"\"%s\"\"\"\nPARAMETER stop \"<|im_end|>\"\nPARAMETER num_ctx %d\nPARAMETER num_thread 1\n",
		path, template, numCtx)
}

// vocab is a SentencePiece-style vocabulary: control tokens, 256
// byte-fallback tokens, printable ASCII characters, syllables with and
// without a leading space, and 256 two-syllable words (with a leading
// space). Scores favour longer pieces, so a word in a prompt tokenizes as
// one token and other text falls back to syllables, letters and bytes.
type vocab struct {
	tokens []string
	scores []float32
	types  []int32
	isWord []bool
	// words are the word tokens' ids in chain order.
	words []int
}

func (v *vocab) add(text string, score float32, typ int32) int {
	v.tokens = append(v.tokens, text)
	v.scores = append(v.scores, score)
	v.types = append(v.types, typ)
	v.isWord = append(v.isWord, false)
	return len(v.tokens) - 1
}

func newVocab(seed uint64) *vocab {
	v := &vocab{}
	v.add("<unk>", 0, typeUnknown)
	v.add("<s>", 0, typeControl)
	v.add("</s>", 0, typeControl)
	v.add("<|im_start|>", 0, typeControl)
	v.add("<|im_end|>", 0, typeControl)
	for b := range 256 {
		v.add(fmt.Sprintf("<0x%02X>", b), 0, typeByte)
	}
	v.add(spmSpace, -1000, typeNormal)
	for c := byte('!'); c <= '~'; c++ {
		v.add(string(c), -1000, typeNormal)
	}
	var syllables []string
	for _, c := range "kmnprstv" {
		for _, vow := range "aeiou" {
			syllables = append(syllables, string(c)+string(vow))
		}
	}
	for _, s := range syllables {
		v.add(s, -300, typeNormal)
		v.add(spmSpace+s, -200, typeNormal)
	}
	// 256 distinct pairs of syllables, in an order drawn from the seed.
	r := newRNG(seed)
	pairs := make([]int, len(syllables)*len(syllables))
	for i := range pairs {
		pairs[i] = i
	}
	for i := len(pairs) - 1; i > 0; i-- {
		j := int(r.next() % uint64(i+1))
		pairs[i], pairs[j] = pairs[j], pairs[i]
	}
	for _, p := range pairs[:numWords] {
		id := v.add(spmSpace+syllables[p/len(syllables)]+syllables[p%len(syllables)], -100, typeNormal)
		v.isWord[id] = true
		v.words = append(v.words, id)
	}
	return v
}

// rng is SplitMix64: tiny, and fixed forever, unlike math/rand's
// generators whose derived methods may change between Go releases.
type rng struct{ s uint64 }

func newRNG(seed uint64) *rng { return &rng{s: seed} }

func (r *rng) next() uint64 {
	r.s += 0x9e3779b97f4a7c15
	z := r.s
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// uniform is a float32 uniform in [-a, a).
func (r *rng) uniform(a float64) float32 {
	u := float64(r.next()>>11) / (1 << 53) // exact: 53 bits
	return float32(float64(2*u-1) * a)
}

// matrix is rows×cols values uniform in [-a, a), row-major.
func (r *rng) matrix(rows, cols int, a float64) []float32 {
	m := make([]float32, rows*cols)
	for i := range m {
		m[i] = r.uniform(a)
	}
	return m
}

// direction is a random unit vector of n components. The explicit
// conversions round each product before the sum: Go may otherwise fuse a
// multiply and an add, which changes the result on some CPUs.
func (r *rng) direction(n int) []float32 {
	v := make([]float32, n)
	var sum float64
	for i := range v {
		v[i] = r.uniform(1)
		sum += float64(float64(v[i]) * float64(v[i]))
	}
	norm := math.Sqrt(sum)
	for i := range v {
		v[i] = float32(float64(v[i]) / norm)
	}
	return v
}
