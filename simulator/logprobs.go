package simulator

import (
	"bytes"
	"encoding/json"
	"math"
)

// Log probabilities of the sampled tokens, deterministic: a token's
// logprob depends on the seed, its position and its text, between -2.5 and
// -0.001; its alternatives (top_logprobs) are itself first, then words of
// the vocabulary, each less likely than the one before.

// chatLogprobs is a chat choice's logprobs: one entry per token.
type chatLogprobs struct {
	Content []logprobEntry `json:"content"`
}

// logprobEntry is vLLM's ChatCompletionLogProbsContent.
type logprobEntry struct {
	Token       string       `json:"token"`
	Logprob     float64      `json:"logprob"`
	Bytes       []int        `json:"bytes"`
	TopLogprobs []topLogprob `json:"top_logprobs"`
}

type topLogprob struct {
	Token   string  `json:"token"`
	Logprob float64 `json:"logprob"`
	Bytes   []int   `json:"bytes"`
}

// tokenBytes is a token's UTF-8 bytes as JSON numbers (a []byte would
// encode as base64).
func tokenBytes(tok string) []int {
	b := make([]int, len(tok))
	for i := range len(tok) {
		b[i] = int(tok[i])
	}
	return b
}

// alternatives are the k most likely tokens at position pos of a choice
// whose sampled token is tok (k ≤ 0: only tok).
func alternatives(seed int64, pos int, tok string, k int) []topLogprob {
	h := splitmix64(hashString(uint64(seed)^seedWord, tok) ^ uint64(pos)*0x9e3779b97f4a7c15)
	lp := -float64(h%2500+1) / 1000
	alts := []topLogprob{{Token: tok, Logprob: lp, Bytes: tokenBytes(tok)}}
	space := len(tok) > 0 && tok[0] == ' '
	for j := 1; len(alts) < k && j <= 2*len(words); j++ {
		w := words[(int(h>>32)+j*7)%len(words)]
		if space {
			w = " " + w
		}
		if w == tok || containsToken(alts, w) {
			continue
		}
		alp := math.Round((lp-0.5*float64(len(alts))-float64(h>>40%250)/1000)*1000) / 1000
		alts = append(alts, topLogprob{Token: w, Logprob: alp, Bytes: tokenBytes(w)})
	}
	return alts
}

func containsToken(alts []topLogprob, w string) bool {
	for _, a := range alts {
		if a.Token == w {
			return true
		}
	}
	return false
}

// logprobEntryAt is the chat logprobs entry of the token at pos.
func logprobEntryAt(seed int64, pos int, tok string, k int) logprobEntry {
	alts := alternatives(seed, pos, tok, k)
	e := logprobEntry{Token: tok, Logprob: alts[0].Logprob, Bytes: alts[0].Bytes, TopLogprobs: []topLogprob{}}
	if k > 0 {
		e.TopLogprobs = alts
	}
	return e
}

// chatLogprobsOf is the logprobs of choice j's pieces from first on.
func chatLogprobsOf(seed int64, j int, pieces []string, first, k int) chatLogprobs {
	lp := chatLogprobs{Content: make([]logprobEntry, 0, len(pieces))}
	for i, tok := range pieces {
		lp.Content = append(lp.Content, logprobEntryAt(choiceSeed(seed, j), first+i, tok, k))
	}
	return lp
}

// completionLogprobs is a /v1/completions choice's logprobs.
type completionLogprobs struct {
	TextOffset    []int          `json:"text_offset"`
	TokenLogprobs []float64      `json:"token_logprobs"`
	Tokens        []string       `json:"tokens"`
	TopLogprobs   []orderedProbs `json:"top_logprobs"`
}

// orderedProbs is a {token: logprob} object in rank order (a Go map would
// sort its keys).
type orderedProbs []topLogprob

func (o orderedProbs) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, t := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(encodeJSON(t.Token))
		b.WriteByte(':')
		b.Write(encodeJSON(t.Logprob))
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

func (o *orderedProbs) UnmarshalJSON(b []byte) error {
	var m map[string]float64
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	for t, lp := range m {
		*o = append(*o, topLogprob{Token: t, Logprob: lp})
	}
	return nil
}

// completionLogprobsOf is the logprobs of choice j's pieces from first on,
// their text starting at offset.
func completionLogprobsOf(seed int64, j int, pieces []string, first, offset, k int) *completionLogprobs {
	lp := &completionLogprobs{TextOffset: []int{}, TokenLogprobs: []float64{}, Tokens: []string{}, TopLogprobs: []orderedProbs{}}
	for i, tok := range pieces {
		alts := alternatives(choiceSeed(seed, j), first+i, tok, k)
		lp.TextOffset = append(lp.TextOffset, offset)
		lp.TokenLogprobs = append(lp.TokenLogprobs, alts[0].Logprob)
		lp.Tokens = append(lp.Tokens, tok)
		lp.TopLogprobs = append(lp.TopLogprobs, orderedProbs(alts))
		offset += len(tok)
	}
	return lp
}
