package simulator

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/llmedge/llmedge/api"
)

// POST /v1/embeddings, as vLLM serves it for an embedding model: each input
// (a string, a list of strings, a list of token ids or a list of lists)
// gets a deterministic unit vector of Config.EmbeddingDim floats, or of
// the request's "dimensions" (the first components, normalised again, as a
// Matryoshka model's are), depending on the seed and the input only. Usage
// counts one token per word (or token id). It takes TTFT, no prefill or
// cache; the API key, Loading, MaxConcurrent, ErrorRate, Hang and
// MaxModelLen apply.

type embeddingRequest struct {
	Model          string          `json:"model"`
	Input          json.RawMessage `json:"input"`
	EncodingFormat *string         `json:"encoding_format"`
	Dimensions     *int            `json:"dimensions"`
	User           *string         `json:"user"`
}

// embeddingList is the answer, laid out as vLLM writes it.
type embeddingList struct {
	ID      string          `json:"id"`
	Object  string          `json:"object"`
	Created int64           `json:"created"`
	Model   string          `json:"model"`
	Data    []embeddingItem `json:"data"`
	Usage   *fullUsage      `json:"usage,omitempty"`
}

type embeddingItem struct {
	Index  int    `json:"index"`
	Object string `json:"object"`
	// Embedding is a list of floats, or base64 of their float32
	// little-endian bytes.
	Embedding any `json:"embedding"`
}

// handleEmbeddings answers POST /v1/embeddings.
func (s *Server) handleEmbeddings(w http.ResponseWriter, r *http.Request, d *dialect) {
	path := r.URL.Path
	cfg, n, inFlight := s.begin(path)
	o := outcomeRejected
	defer func() { s.end(path, o) }()
	if !authorized(cfg.APIKey, r) {
		writeUnauthorized(w)
		return
	}
	var req embeddingRequest
	if err := readBody(r, w, &req); err != nil {
		badRequest(err.Error()).writeAs(w, d)
		return
	}
	inputs, e := parsePrompts(req.Input, "input")
	format := "float"
	if req.EncodingFormat != nil {
		format = *req.EncodingFormat
	}
	dim := cfg.embeddingDim()
	switch {
	case e != nil:
	case format != "float" && format != "base64":
		e = badRequest(fmt.Sprintf("encoding_format: Input should be 'float' or 'base64', got %q", format))
	case req.Dimensions != nil && *req.Dimensions < 1:
		e = badRequest(fmt.Sprintf("dimensions must be at least 1, got %d.", *req.Dimensions))
	case req.Dimensions != nil && *req.Dimensions > dim:
		e = badRequest(fmt.Sprintf("dimensions must be at most %d (the model's embedding size), got %d.", dim, *req.Dimensions))
	}
	if e != nil {
		e.writeAs(w, d)
		return
	}
	size := dim
	if req.Dimensions != nil {
		size = *req.Dimensions
	}
	tokens := 0
	for _, in := range inputs {
		t := promptTokens([]api.Message{{Content: in}})
		if ml := cfg.MaxModelLen; ml > 0 && t > ml {
			badRequest(fmt.Sprintf("This model's maximum context length is %d tokens. However, you requested %d tokens in the input for embedding generation. Please reduce the length of the input.", ml, t)).writeAs(w, d)
			return
		}
		tokens += t
	}
	ctx := r.Context()
	switch {
	case cfg.MaxConcurrent > 0 && inFlight > int64(cfg.MaxConcurrent):
		(&apiError{Status: d.overloadStatus, Message: d.overloadMessage}).writeAs(w, d)
		return
	case injectError(cfg.Seed, n, cfg.ErrorRate):
		o = outcomeError
		msg := "Simulated replica failure (error_rate)."
		if cfg.ErrorStatus == d.overloadStatus {
			msg = d.overloadMessage
		}
		(&apiError{Status: cfg.ErrorStatus, Message: msg}).writeAs(w, d)
		return
	case cfg.Hang:
		<-ctx.Done()
		o = outcomeCancelled
		return
	}
	if !sleep(ctx, cfg.TTFT.D()) {
		o = outcomeCancelled
		return
	}
	data := make([]embeddingItem, len(inputs))
	for i, in := range inputs {
		v := embedding(cfg.Seed, in, dim, size)
		var emb any = v
		if format == "base64" {
			b := make([]byte, 4*len(v))
			for j, f := range v {
				binary.LittleEndian.PutUint32(b[4*j:], math.Float32bits(float32(f)))
			}
			emb = base64.StdEncoding.EncodeToString(b)
		}
		data[i] = embeddingItem{Index: i, Object: "embedding", Embedding: emb}
	}
	resp := embeddingList{ID: "embd-" + randomHex(), Object: "list", Created: time.Now().Unix(), Model: cfg.Model, Data: data}
	if !cfg.NoUsage {
		resp.Usage = &fullUsage{usage: newUsage(tokens, 0), PromptTokensDetails: jsonNull}
	}
	writeJSON(w, http.StatusOK, resp)
	o = outcomeCompleted
}

// embedding is the unit vector of input under seed: dim normally
// distributed components, of which the first size are kept and normalised
// again; each is a float32 value, so that float and base64 agree.
func embedding(seed int64, input string, dim, size int) []float64 {
	rng := rand.New(rand.NewPCG(uint64(seed), hashString(seedWord, input)))
	v := make([]float64, dim)
	for i := range v {
		v[i] = rng.NormFloat64()
	}
	v = v[:size]
	norm := 0.0
	for _, x := range v {
		norm += x * x
	}
	norm = math.Sqrt(norm)
	if norm == 0 {
		norm, v[0] = 1, 1
	}
	for i := range v {
		v[i] = float64(float32(v[i] / norm))
	}
	return v
}
