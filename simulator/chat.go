package simulator

import (
	"context"
	"net/http"
	"strings"
	"time"
)

// decodeFunc reads a chat request body in one dialect's request format.
type decodeFunc func(r *http.Request, w http.ResponseWriter) (*chat, error)

// handleChat answers a chat request of dialect d, read with decode.
// Checks come in vLLM's order (API key, body, context length); then, in
// order, the concurrency cap, an injected error, a hang, or the answer
// (streamed or not), possibly dropped or failed in-band. Only answers go
// through the engine (engine.go): its sequence slots, prefill lane and
// prefix cache.
func (s *Server) handleChat(w http.ResponseWriter, r *http.Request, d *dialect, decode decodeFunc) {
	cfg, n, inFlight := s.begin()
	o := outcomeRejected
	defer func() { s.end(o) }() // also runs when abortConnection panics

	if !authorized(cfg.APIKey, r) {
		writeUnauthorized(w)
		return
	}
	c, err := decode(r, w)
	if err != nil {
		badRequest(err.Error()).writeAs(w, d)
		return
	}
	lr := lastRequest(c, len(r.Header.Values("Authorization")) > 0)
	lr.Traceparent = r.Header.Get("Traceparent")
	s.recordRequest(lr)
	if e := c.validate(); e != nil {
		e.writeAs(w, d)
		return
	}
	p, e := planReply(cfg, c)
	if e != nil {
		e.writeAs(w, d)
		return
	}
	p.seq = s.engine.sequence(cfg, p)
	defer p.seq.end() // releases its slot and lane even on abortConnection
	ctx := r.Context()
	switch {
	case cfg.MaxConcurrent > 0 && inFlight > int64(cfg.MaxConcurrent):
		(&apiError{Status: d.overloadStatus, Message: d.overloadMessage}).writeAs(w, d)
	case injectError(cfg.Seed, n, cfg.ErrorRate):
		o = outcomeError
		msg := "Simulated replica failure (error_rate)."
		if cfg.ErrorStatus == d.overloadStatus {
			msg = d.overloadMessage
		}
		(&apiError{Status: cfg.ErrorStatus, Message: msg}).writeAs(w, d)
	case cfg.Hang:
		<-ctx.Done()
		o = outcomeCancelled
	case cfg.ErrorAfter > 0 && cfg.ErrorAfter <= len(p.Tokens) && !c.Stream:
		o = outcomeError
		if !p.seq.firstToken(ctx) || !sleep(ctx, decodeTime(cfg, cfg.ErrorAfter)) {
			o = outcomeCancelled
			break
		}
		(&apiError{Status: http.StatusInternalServerError, Message: "Simulated replica failure (error_after)."}).writeAs(w, d)
	case d.name == DialectOllama:
		o = ollamaReply(ctx, w, cfg, p, c.Stream)
	case d.name == DialectNative:
		o = nativeReply(ctx, w, cfg, p, c)
	case c.Stream:
		o = streamReply(ctx, w, cfg, d, p, c.IncludeUsage)
	default:
		o = completeReply(ctx, w, cfg, p)
	}
	if o == outcomeDropped {
		abortConnection()
	}
}

// begin counts a new chat request and returns the Config it will use, its
// sequence number and the number of chat requests in flight with it.
func (s *Server) begin() (Config, uint64, int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stats.Requests++
	s.stats.InFlight++
	s.seq++
	return s.cfg, s.seq, s.stats.InFlight
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

// decodeTime is how long producing tokens 2..k takes after the first.
func decodeTime(cfg Config, k int) time.Duration {
	return time.Duration(max(k-1, 0)) * cfg.ITL.D()
}

// completeReply sends the non-streamed answer of p after the time its
// tokens take. With DropAfter it returns outcomeDropped without answering
// once the first DropAfter tokens' time has passed.
func completeReply(ctx context.Context, w http.ResponseWriter, cfg Config, p plan) outcome {
	// (All OpenAI dialects answer alike when not streaming.)
	if o, ok := waitWhole(ctx, cfg, p); !ok {
		return o
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
		Usage: completionUsage(cfg, p),
	})
	return outcomeCompleted
}

// completionUsage is the usage of a non-streamed answer, nil with NoUsage.
func completionUsage(cfg Config, p plan) *fullUsage {
	if cfg.NoUsage {
		return nil
	}
	return &fullUsage{usage: newUsage(p.PromptTokens, len(p.Tokens)), PromptTokensDetails: jsonNull}
}
