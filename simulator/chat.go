package simulator

import (
	"context"
	"net/http"
	"time"
)

// decodeFunc reads a chat request body in one dialect's request format.
type decodeFunc func(r *http.Request, w http.ResponseWriter) (*chat, error)

// replyFunc answers a valid request c with p, streamed or not, and
// reports how that ended.
type replyFunc func(ctx context.Context, w http.ResponseWriter, cfg Config, d *dialect, p plan, c *chat) outcome

// endpoint is one generating API the simulator serves: how its requests
// are read, its errors written and its answers sent.
type endpoint struct {
	decode decodeFunc
	// reply answers; nil answers in the chat format of the dialect.
	reply replyFunc
	// writeError sends an error answer; nil sends the dialect's.
	writeError func(w http.ResponseWriter, d *dialect, e *apiError)
	// record makes the request the LastRequest of the stats.
	record bool
	// apiKeyHeader also accepts the API key in this header (Anthropic's
	// x-api-key).
	apiKeyHeader string
}

// handleChat answers a chat request of dialect d, read with decode.
func (s *Server) handleChat(w http.ResponseWriter, r *http.Request, d *dialect, decode decodeFunc) {
	s.handleGenerate(w, r, d, endpoint{decode: decode, record: true})
}

// handleGenerate answers a request to a generating endpoint ep of dialect
// d. Checks come in vLLM's order (API key, body, context length); then, in
// order, the concurrency cap, an injected error, a hang, or the answer
// (streamed or not), possibly dropped or failed in-band. Only answers go
// through the engine (engine.go): its sequence slots, prefill lane and
// prefix cache.
func (s *Server) handleGenerate(w http.ResponseWriter, r *http.Request, d *dialect, ep endpoint) {
	path := r.URL.Path
	cfg, n, inFlight := s.begin(path)
	o := outcomeRejected
	defer func() { s.end(path, o) }() // also runs when abortConnection panics

	writeError := func(e *apiError) {
		if ep.writeError != nil {
			ep.writeError(w, d, e)
		} else {
			e.writeAs(w, d)
		}
	}
	if !authorized(cfg.APIKey, r) && !keyInHeader(cfg.APIKey, r, ep.apiKeyHeader) {
		writeUnauthorized(w)
		return
	}
	c, err := ep.decode(r, w)
	if err != nil {
		writeError(badRequest(err.Error()))
		return
	}
	if ep.record {
		lr := lastRequest(c, len(r.Header.Values("Authorization")) > 0)
		lr.Traceparent = r.Header.Get("Traceparent")
		s.recordRequest(lr)
	}
	if e := c.validate(); e != nil {
		writeError(e)
		return
	}
	adapter, endAdapter, e := s.lora.begin(cfg, c.Model)
	if e != nil {
		writeError(e)
		return
	}
	defer endAdapter()
	if adapter != "" {
		cfg.Model = adapter // vLLM answers with the adapter's name
	}
	p, e := planReply(cfg, c)
	if e != nil {
		writeError(e)
		return
	}
	cfg.DropAfter, cfg.ErrorAfter = faultAt(cfg, p, cfg.DropAfter), faultAt(cfg, p, cfg.ErrorAfter)
	p.seq = s.engine.sequence(cfg, p)
	p.seq.prio = c.Priority
	defer p.seq.end() // releases its slot and lane even on abortConnection
	ctx := r.Context()
	switch {
	case cfg.MaxConcurrent > 0 && inFlight > int64(cfg.MaxConcurrent):
		writeError(&apiError{Status: d.overloadStatus, Message: d.overloadMessage})
	case injectError(cfg.Seed, n, cfg.ErrorRate):
		o = outcomeError
		msg := "Simulated replica failure (error_rate)."
		if cfg.ErrorStatus == d.overloadStatus {
			msg = d.overloadMessage
		}
		writeError(&apiError{Status: cfg.ErrorStatus, Message: msg})
	case cfg.Hang:
		<-ctx.Done()
		o = outcomeCancelled
	case cfg.ErrorAfter > 0 && cfg.ErrorAfter <= p.steps() && !c.Stream:
		o = outcomeError
		if !p.seq.firstToken(ctx) || !p.seq.decode(ctx, decodeTime(cfg, cfg.ErrorAfter)) {
			o = outcomeCancelled
			break
		}
		writeError(&apiError{Status: http.StatusInternalServerError, Message: "Simulated replica failure (error_after)."})
	case ep.reply != nil:
		o = ep.reply(ctx, w, cfg, d, p, c)
	case d.name == DialectOllama:
		o = ollamaReply(ctx, w, cfg, p, c.Stream)
	case d.name == DialectNative:
		o = nativeReply(ctx, w, cfg, p, c)
	case c.Stream:
		o = streamReply(ctx, w, cfg, d, p, c)
	default:
		o = completeReply(ctx, w, cfg, p, c)
	}
	if o == outcomeDropped {
		abortConnection()
	}
}

// begin counts a new request to the generating endpoint path and returns
// the Config it will use, its sequence number and the number of requests
// in flight with it.
func (s *Server) begin(path string) (Config, uint64, int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stats.Requests++
	s.stats.InFlight++
	e := s.endpointStats(path)
	e.Requests++
	e.InFlight++
	s.seq++
	return s.cfg, s.seq, s.stats.InFlight
}

// end counts how a request to path ended.
func (s *Server) end(path string, o outcome) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stats.finish(o)
	s.endpointStats(path).finish(o)
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

// completeReply sends the non-streamed chat answer of p after the time its
// tokens take. With DropAfter it returns outcomeDropped without answering
// once the first DropAfter tokens' time has passed.
func completeReply(ctx context.Context, w http.ResponseWriter, cfg Config, p plan, c *chat) outcome {
	// (All OpenAI dialects answer alike when not streaming.)
	if o, ok := waitWhole(ctx, cfg, p); !ok {
		return o
	}
	choices := make([]completionChoice, len(p.Choices))
	for i, r := range p.Choices {
		msg := replyMessage{Role: "assistant", ToolCalls: []toolCallOut{}, ReasoningContent: r.reasoningText()}
		if r.Call != nil {
			msg.ToolCalls = []toolCallOut{{ID: r.Call.ID, Type: "function", Function: functionCall{Name: r.Call.Name, Arguments: r.Call.Arguments}}}
		} else {
			text := r.text()
			msg.Content = &text
		}
		lp := jsonNull
		if c.Logprobs {
			lp = encodeJSON(chatLogprobsOf(cfg.Seed, i%max(c.N, 1), r.Pieces, 0, c.TopLogprobs))
		}
		choices[i] = completionChoice{Index: i, Message: msg, Logprobs: lp, FinishReason: r.Finish, StopReason: stopReasonJSON(r)}
	}
	writeJSON(w, http.StatusOK, completion{
		ID:      completionID(),
		Object:  "chat.completion",
		Created: time.Now().Unix(),
		Model:   cfg.Model,
		Choices: choices,
		Usage:   completionUsage(cfg, p),
	})
	return outcomeCompleted
}

// completionUsage is the usage of a non-streamed answer, nil with NoUsage.
func completionUsage(cfg Config, p plan) *fullUsage {
	if cfg.NoUsage {
		return nil
	}
	u := &fullUsage{usage: newUsage(p.PromptTokens, p.completionTokens()), PromptTokensDetails: jsonNull}
	if d := detailsOf(cfg, p); d != nil {
		u.PromptTokensDetails = encodeJSON(d)
	}
	return u
}
