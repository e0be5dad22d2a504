package simulator

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"

	"github.com/llmedge/llmedge/api"
)

// POST /tokenize, vLLM's: a chat completions request's messages (and
// tools) with the chat template applied, or a completions prompt, counted
// by the engine's tokenizer: {"count", "max_model_len", "tokens"}. The
// simulator counts with its own tokenizer (promptTokens) the prompt a
// request of the same body is charged for in usage.prompt_tokens, so that
// a count agrees with what the engine charges. Only the vLLM dialect
// serves it; the others answer 404, as an engine without it.

// tokenizeRequest is what /tokenize reads beyond a chat request: a
// completions prompt.
type tokenizeRequest struct {
	Prompt *string `json:"prompt"`
}

type tokenizeResponse struct {
	Count       int   `json:"count"`
	MaxModelLen int   `json:"max_model_len"`
	Tokens      []int `json:"tokens"`
}

func (s *Server) handleTokenize(w http.ResponseWriter, r *http.Request, d *dialect) {
	path := r.URL.Path
	cfg, _, _ := s.begin(path)
	o := outcomeRejected
	defer func() { s.end(path, o) }()
	if !authorized(cfg.APIKey, r) {
		writeUnauthorized(w)
		return
	}
	// The body is read twice: once for a prompt, once as a chat.
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	if err != nil {
		badRequest("reading the request body: "+err.Error()).writeAs(w, d)
		return
	}
	var n int
	var tr tokenizeRequest
	if err := json.Unmarshal(body, &tr); err != nil {
		badRequest("invalid JSON body: "+err.Error()).writeAs(w, d)
		return
	}
	if tr.Prompt != nil {
		n = promptTokens([]api.Message{{Content: *tr.Prompt}}) // a prompt: no template
	} else {
		r.Body = io.NopCloser(bytes.NewReader(body))
		c, err := decodeChat(r, w)
		if err != nil {
			badRequest(err.Error()).writeAs(w, d)
			return
		}
		if e := c.validate(); e != nil {
			e.writeAs(w, d)
			return
		}
		n = promptTokens(c.enginePrompt())
	}
	tokens := make([]int, n)
	for i := range tokens {
		tokens[i] = i % 32000
	}
	writeJSON(w, http.StatusOK, tokenizeResponse{Count: n, MaxModelLen: cfg.MaxModelLen, Tokens: tokens})
	o = outcomeCompleted
}
