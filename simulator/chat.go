package simulator

import (
	"context"
	"net/http"
	"strings"
	"time"
)

// handleChat answers POST /v1/chat/completions. Checks come in vLLM's
// order (API key, body, context length); then, in order, an injected
// error, a hang, or the answer (streamed or not), possibly dropped.
func (s *Server) handleChat(w http.ResponseWriter, r *http.Request) {
	cfg, n := s.begin()
	o := outcomeRejected
	defer func() { s.end(o) }() // also runs when abortConnection panics

	if !authorized(cfg.APIKey, r) {
		writeUnauthorized(w)
		return
	}
	c, err := decodeChat(r, w)
	if err != nil {
		badRequest(err.Error()).write(w)
		return
	}
	s.recordRequest(lastRequest(c, len(r.Header.Values("Authorization")) > 0))
	if e := c.validate(); e != nil {
		e.write(w)
		return
	}
	p, e := planReply(cfg, c)
	if e != nil {
		e.write(w)
		return
	}
	ctx := r.Context()
	switch {
	case injectError(cfg.Seed, n, cfg.ErrorRate):
		o = outcomeError
		(&apiError{Status: cfg.ErrorStatus, Message: "Simulated replica failure (error_rate)."}).write(w)
	case cfg.Hang:
		<-ctx.Done()
		o = outcomeCancelled
	case c.Stream:
		o = streamReply(ctx, w, cfg, p, c.IncludeUsage)
	default:
		o = completeReply(ctx, w, cfg, p)
	}
	if o == outcomeDropped {
		abortConnection()
	}
}

// begin counts a new chat request and returns the Config it will use and
// its sequence number.
func (s *Server) begin() (Config, uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stats.Requests++
	s.stats.InFlight++
	s.seq++
	return s.cfg, s.seq
}

// end counts how a chat request ended.
func (s *Server) end(o outcome) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stats.finish(o)
}

// recordRequest remembers lr as the last chat request.
func (s *Server) recordRequest(lr *LastRequest) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stats.LastRequest = lr
}

// generationTime is how long producing the first k tokens takes.
func generationTime(cfg Config, k int) time.Duration {
	return cfg.TTFT.D() + time.Duration(max(k-1, 0))*cfg.ITL.D()
}

// completeReply sends the non-streamed answer of p after the time its
// tokens take. With DropAfter it returns outcomeDropped without answering
// once the first DropAfter tokens' time has passed.
func completeReply(ctx context.Context, w http.ResponseWriter, cfg Config, p plan) outcome {
	n := len(p.Tokens)
	if d := cfg.DropAfter; d > 0 && d <= n {
		if !sleep(ctx, generationTime(cfg, d)) {
			return outcomeCancelled
		}
		return outcomeDropped
	}
	if !sleep(ctx, generationTime(cfg, n)) {
		return outcomeCancelled
	}
	writeJSON(w, http.StatusOK, completion{
		ID:      completionID(),
		Object:  "chat.completion",
		Created: time.Now().Unix(),
		Model:   cfg.Model,
		Choices: []completionChoice{{
			Index: 0,
			Message: replyMessage{
				Role:      "assistant",
				Content:   strings.Join(p.Tokens, ""),
				ToolCalls: []any{},
			},
			Logprobs:     jsonNull,
			FinishReason: p.FinishReason,
			StopReason:   jsonNull,
		}},
		Usage: fullUsage{usage: newUsage(p.PromptTokens, n), PromptTokensDetails: jsonNull},
	})
	return outcomeCompleted
}
