package tinymodel

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// goldenSHA256 pins the bytes of the default test model (Seed 1,
// AnswerWords 12). A change here changes every engine test's model: update
// it only on purpose.
const goldenSHA256 = "2eed67e38c37606c6a3b7da1c812c2e0c949fd6b4ebe8463efcc2b3812526b41"

func write(t *testing.T, c Config) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := Write(&b, c); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func sum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func TestDeterministic(t *testing.T) {
	c := Config{Seed: 1, AnswerWords: 12}
	first := sum(write(t, c))
	for range 3 {
		if got := sum(write(t, c)); got != first {
			t.Fatalf("second run wrote different bytes: %s then %s", first, got)
		}
	}
	if first != goldenSHA256 {
		t.Errorf("sha256 %s, want %s (the generator's output changed)", first, goldenSHA256)
	}
	if sum(write(t, Config{Seed: 2, AnswerWords: 12})) == first {
		t.Error("another seed wrote the same model")
	}
	if sum(write(t, Config{Seed: 1})) == first {
		t.Error("an endless model is the same file as one whose answers end")
	}
}

func TestInvalidConfig(t *testing.T) {
	for _, c := range []Config{{AnswerWords: -1}, {AnswerWords: numWords + 1}, {ContextLength: -1}} {
		if err := Write(&bytes.Buffer{}, c); err == nil {
			t.Errorf("%+v: no error", c)
		}
	}
}

// ---- a GGUF reader, to check the file's structure ----

type parsed struct {
	version uint32
	kv      map[string]any
	tensors map[string]parsedTensor
}

type parsedTensor struct {
	dims []uint64
	data []float32
}

type reader struct {
	b   []byte
	off int
	err error
}

func (r *reader) take(n int) []byte {
	if r.err != nil || r.off+n > len(r.b) {
		r.err = fmt.Errorf("truncated at %d", r.off)
		return make([]byte, n)
	}
	s := r.b[r.off : r.off+n]
	r.off += n
	return s
}
func (r *reader) u32() uint32 { return binary.LittleEndian.Uint32(r.take(4)) }
func (r *reader) u64() uint64 { return binary.LittleEndian.Uint64(r.take(8)) }
func (r *reader) str() string { return string(r.take(int(r.u64()))) }

func (r *reader) value(typ uint32) any {
	switch typ {
	case typeUint32:
		return r.u32()
	case typeInt32:
		return int32(r.u32())
	case typeFloat32:
		return math.Float32frombits(r.u32())
	case typeBool:
		return r.take(1)[0] != 0
	case typeString:
		return r.str()
	case typeArray:
		et, n := r.u32(), r.u64()
		out := make([]any, n)
		for i := range out {
			out[i] = r.value(et)
		}
		return out
	}
	r.err = fmt.Errorf("unknown value type %d", typ)
	return nil
}

func parse(t *testing.T, b []byte) parsed {
	t.Helper()
	r := &reader{b: b}
	if magic := string(r.take(4)); magic != "GGUF" {
		t.Fatalf("magic %q", magic)
	}
	p := parsed{version: r.u32(), kv: map[string]any{}, tensors: map[string]parsedTensor{}}
	nt, nkv := r.u64(), r.u64()
	for range nkv {
		k := r.str()
		p.kv[k] = r.value(r.u32())
	}
	type info struct {
		name   string
		dims   []uint64
		offset uint64
	}
	var infos []info
	for range nt {
		in := info{name: r.str()}
		for range r.u32() {
			in.dims = append(in.dims, r.u64())
		}
		if typ := r.u32(); typ != tensorF32 {
			t.Fatalf("tensor %s: type %d, want F32", in.name, typ)
		}
		in.offset = r.u64()
		if in.offset%ggufAlignment != 0 {
			t.Errorf("tensor %s at offset %d: not aligned to %d", in.name, in.offset, ggufAlignment)
		}
		infos = append(infos, in)
	}
	if r.err != nil {
		t.Fatal(r.err)
	}
	data := int(alignUp(uint64(r.off)))
	for _, in := range infos {
		n := 1
		for _, d := range in.dims {
			n *= int(d)
		}
		start := data + int(in.offset)
		if start+4*n > len(b) {
			t.Fatalf("tensor %s runs past the end of the file", in.name)
		}
		f := make([]float32, n)
		for i := range f {
			f[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[start+4*i:]))
		}
		p.tensors[in.name] = parsedTensor{dims: in.dims, data: f}
	}
	return p
}

func TestGGUFStructure(t *testing.T) {
	p := parse(t, write(t, Config{Seed: 1, AnswerWords: 12}))
	if p.version != 3 {
		t.Errorf("version %d", p.version)
	}
	tokens := p.kv["tokenizer.ggml.tokens"].([]any)
	types := p.kv["tokenizer.ggml.token_type"].([]any)
	scores := p.kv["tokenizer.ggml.scores"].([]any)
	if len(tokens) != len(types) || len(tokens) != len(scores) {
		t.Fatalf("%d tokens, %d types, %d scores", len(tokens), len(types), len(scores))
	}
	wantKV := map[string]any{
		"general.architecture":                   "llama",
		"llama.embedding_length":                 uint32(embd),
		"llama.block_count":                      uint32(layers),
		"llama.feed_forward_length":              uint32(ffn),
		"llama.attention.head_count":             uint32(heads),
		"llama.attention.head_count_kv":          uint32(heads),
		"llama.rope.dimension_count":             uint32(headDim),
		"llama.context_length":                   uint32(DefaultContextLength),
		"llama.vocab_size":                       uint32(len(tokens)),
		"llama.attention.layer_norm_rms_epsilon": float32(1e-5),
		"tokenizer.ggml.model":                   "llama",
		"tokenizer.ggml.bos_token_id":            uint32(tokBOS),
		"tokenizer.ggml.eos_token_id":            uint32(tokIMEnd),
		"tokenizer.chat_template":                ChatTemplate,
	}
	for k, want := range wantKV {
		if got := p.kv[k]; got != want {
			t.Errorf("%s = %v (%T), want %v (%T)", k, got, got, want, want)
		}
	}
	// Byte fallback: <0x00>..<0xFF> in order, typed as bytes; the ChatML
	// markers are control tokens.
	for b := range 256 {
		id := firstByteID + b
		if tokens[id] != fmt.Sprintf("<0x%02X>", b) || types[id] != typeByte {
			t.Fatalf("token %d = %v (type %v), want byte %#x", id, tokens[id], types[id], b)
		}
	}
	for _, id := range []int{tokBOS, tokEOS, tokIMStart, tokIMEnd} {
		if types[id] != typeControl {
			t.Errorf("token %v: type %v, want control", tokens[id], types[id])
		}
	}
	seen := map[any]bool{}
	for _, tok := range tokens {
		if seen[tok] {
			t.Errorf("token %q twice", tok)
		}
		seen[tok] = true
	}
	n := uint64(len(tokens))
	want := map[string][]uint64{"token_embd.weight": {embd, n}, "output.weight": {embd, n}, "output_norm.weight": {embd}}
	for l := range layers {
		for name, dims := range map[string][]uint64{
			"attn_norm": {embd}, "attn_q": {embd, embd}, "attn_k": {embd, embd}, "attn_v": {embd, embd},
			"attn_output": {embd, embd}, "ffn_norm": {embd}, "ffn_gate": {embd, ffn}, "ffn_up": {embd, ffn}, "ffn_down": {ffn, embd},
		} {
			want[fmt.Sprintf("blk.%d.%s.weight", l, name)] = dims
		}
	}
	for name, dims := range want {
		if got, ok := p.tensors[name]; !ok || !slices.Equal(got.dims, dims) {
			t.Errorf("tensor %s: dims %v, want %v", name, got.dims, dims)
		}
	}
	if len(p.tensors) != len(want) {
		t.Errorf("%d tensors, want %d", len(p.tensors), len(want))
	}
}

// ---- a reference forward pass: what an engine computes ----

// model is the parsed model, ready to run.
type model struct {
	tokens []string
	t      map[string]parsedTensor
}

func (m *model) w(name string) []float32 { return m.t[name].data }

func rmsNorm(x []float32, weight []float32) []float32 {
	var ss float64
	for _, v := range x {
		ss += float64(v) * float64(v)
	}
	scale := 1 / math.Sqrt(ss/float64(len(x))+1e-5)
	out := make([]float32, len(x))
	for i, v := range x {
		out[i] = float32(float64(v) * scale * float64(weight[i]))
	}
	return out
}

// matVec multiplies a ggml matrix of dims {in, out} (rows of length in)
// by x.
func matVec(w []float32, x []float32) []float32 {
	in := len(x)
	out := make([]float32, len(w)/in)
	for j := range out {
		var s float64
		for i, v := range x {
			s += float64(w[j*in+i]) * float64(v)
		}
		out[j] = float32(s)
	}
	return out
}

// rope rotates consecutive pairs of each head's components by position
// (llama's "normal" RoPE).
func rope(v []float32, pos int) {
	for h := 0; h < heads; h++ {
		for i := 0; i < headDim; i += 2 {
			theta := float64(pos) * math.Pow(10000, -float64(i)/headDim)
			c, s := math.Cos(theta), math.Sin(theta)
			a, b := float64(v[h*headDim+i]), float64(v[h*headDim+i+1])
			v[h*headDim+i], v[h*headDim+i+1] = float32(a*c-b*s), float32(a*s+b*c)
		}
	}
}

// logits runs the whole sequence and returns the last position's logits.
func (m *model) logits(seq []int) []float32 {
	emb := m.w("token_embd.weight")
	xs := make([][]float32, len(seq))
	for p, tok := range seq {
		xs[p] = slices.Clone(emb[tok*embd : (tok+1)*embd])
	}
	for l := range layers {
		pre := fmt.Sprintf("blk.%d.", l)
		qs, ks, vs := make([][]float32, len(seq)), make([][]float32, len(seq)), make([][]float32, len(seq))
		for p, x := range xs {
			h := rmsNorm(x, m.w(pre+"attn_norm.weight"))
			qs[p], ks[p], vs[p] = matVec(m.w(pre+"attn_q.weight"), h), matVec(m.w(pre+"attn_k.weight"), h), matVec(m.w(pre+"attn_v.weight"), h)
			rope(qs[p], p)
			rope(ks[p], p)
		}
		for p := range xs {
			att := make([]float32, embd)
			for h := 0; h < heads; h++ {
				sl := func(v []float32) []float32 { return v[h*headDim : (h+1)*headDim] }
				scores := make([]float64, p+1)
				maxS := math.Inf(-1)
				for j := 0; j <= p; j++ {
					var s float64
					for i, q := range sl(qs[p]) {
						s += float64(q) * float64(sl(ks[j])[i])
					}
					scores[j] = s / math.Sqrt(headDim)
					maxS = math.Max(maxS, scores[j])
				}
				var z float64
				for j := range scores {
					scores[j] = math.Exp(scores[j] - maxS)
					z += scores[j]
				}
				for j := range scores {
					for i, v := range sl(vs[j]) {
						att[h*headDim+i] += float32(scores[j] / z * float64(v))
					}
				}
			}
			o := matVec(m.w(pre+"attn_output.weight"), att)
			for i := range xs[p] {
				xs[p][i] += o[i]
			}
			h := rmsNorm(xs[p], m.w(pre+"ffn_norm.weight"))
			g, u := matVec(m.w(pre+"ffn_gate.weight"), h), matVec(m.w(pre+"ffn_up.weight"), h)
			for i := range g {
				silu := float64(g[i]) / (1 + math.Exp(-float64(g[i])))
				g[i] = float32(silu * float64(u[i]))
			}
			d := matVec(m.w(pre+"ffn_down.weight"), g)
			for i := range xs[p] {
				xs[p][i] += d[i]
			}
		}
	}
	h := rmsNorm(xs[len(xs)-1], m.w("output_norm.weight"))
	return matVec(m.w("output.weight"), h)
}

// prompt is a ChatML prompt as an engine tokenizes it, roughly: the
// control tokens, the text as letters and byte tokens, ending with the
// newline after "assistant".
func (m *model) prompt(user string) []int {
	id := func(s string) int { return slices.Index(m.tokens, s) }
	text := func(s string) []int {
		var out []int
		for _, c := range []byte(s) {
			if c == ' ' {
				out = append(out, id(spmSpace))
			} else if i := id(string(c)); i >= 0 {
				out = append(out, i)
			} else {
				out = append(out, firstByteID+int(c))
			}
		}
		return out
	}
	seq := []int{tokBOS, tokIMStart}
	seq = append(seq, text("user\n"+user)...)
	seq = append(seq, tokIMEnd)
	seq = append(seq, text("\n")...)
	seq = append(seq, tokIMStart)
	return append(seq, text("assistant\n")...)
}

// TestGreedyAnswer runs the model as an engine would and checks that it
// answers Answer's words, that its text is valid UTF-8, that answers end
// with <|im_end|> when they should, and that the chosen token wins by a
// margin that sampling at temperature 2 will not overturn.
func TestGreedyAnswer(t *testing.T) {
	for _, tc := range []struct {
		name    string
		cfg     Config
		prompt  string
		tokens  int
		wantEnd bool
	}{
		{"ends", Config{Seed: 1, AnswerWords: 12}, "Hello! How are you?", 14, true},
		{"ends, another prompt", Config{Seed: 1, AnswerWords: 12}, "Write a poem about the sea, 3 lines.", 14, true},
		{"endless", Config{Seed: 1}, "Hello!", 20, false},
		{"other seed", Config{Seed: 7, AnswerWords: 5}, "zzz \u00e9t\u00e9 \U0001F600", 7, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := parse(t, write(t, tc.cfg))
			m := &model{t: p.tensors}
			for _, tok := range p.kv["tokenizer.ggml.tokens"].([]any) {
				m.tokens = append(m.tokens, tok.(string))
			}
			seq := m.prompt(tc.prompt)
			var text strings.Builder
			var words []string
			ended := false
			minMargin := math.Inf(1)
			for range tc.tokens {
				lg := m.logits(seq)
				best, second := 0, -1
				for i := range lg {
					if lg[i] > lg[best] {
						best = i
					}
				}
				for i := range lg {
					if i != best && (second < 0 || lg[i] > lg[second]) {
						second = i
					}
				}
				minMargin = math.Min(minMargin, float64(lg[best]-lg[second]))
				if best == tokIMEnd {
					ended = true
					break
				}
				piece := m.tokens[best]
				if best < firstByteID+256 {
					t.Fatalf("generated control or byte token %q", piece)
				}
				text.WriteString(strings.ReplaceAll(piece, spmSpace, " "))
				words = append(words, strings.TrimPrefix(piece, spmSpace))
				seq = append(seq, best)
			}
			if ended != tc.wantEnd {
				t.Errorf("ended with <|im_end|>: %v, want %v (after %d words)", ended, tc.wantEnd, len(words))
			}
			if want := Answer(tc.cfg, tc.tokens); !slices.Equal(words, want) {
				t.Errorf("answer %q\nwant   %q", words, want)
			}
			if !utf8.ValidString(text.String()) {
				t.Errorf("answer is not UTF-8: %q", text.String())
			}
			// At temperature 2 the margin halves; e^-5 against ~40 top-k
			// candidates still leaves the chosen token above top_p 0.9.
			if minMargin < 10 {
				t.Errorf("smallest margin between the best and second token %.1f, want >= 10", minMargin)
			}
			t.Logf("%q, smallest margin %.1f", text.String(), minMargin)
		})
	}
}

func TestModelfile(t *testing.T) {
	mf := Modelfile("/models/tiny.gguf", 512)
	for _, want := range []string{"FROM /models/tiny.gguf\n", `PARAMETER stop "<|im_end|>"`, "PARAMETER num_ctx 512\n", "PARAMETER num_thread 1\n", `TEMPLATE """{{- range $i, $_ := .Messages }}`} {
		if !strings.Contains(mf, want) {
			t.Errorf("Modelfile lacks %q:\n%s", want, mf)
		}
	}
}
