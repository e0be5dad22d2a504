package simulator

import (
	"context"
	"net/http"
	"time"
)

// eventStreamType is the Content-Type vLLM (Starlette) gives its streams.
const eventStreamType = "text/event-stream; charset=utf-8"

// streamReply sends p as server-sent events, flushing each one: after TTFT
// the role chunk and the first token, then one token chunk per ITL, the
// finishing chunk, the usage chunk when includeUsage, and "[DONE]". With
// DropAfter it returns outcomeDropped right after that many tokens.
func streamReply(ctx context.Context, w http.ResponseWriter, cfg Config, p plan, includeUsage bool) outcome {
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", eventStreamType)
	w.WriteHeader(http.StatusOK)
	if rc.Flush() != nil || !sleep(ctx, cfg.TTFT.D()) {
		return outcomeCancelled
	}

	id, created := completionID(), time.Now().Unix()
	newChunk := func(choices []chunkChoice, u *usage) chunk {
		return chunk{ID: id, Object: "chat.completion.chunk", Created: created, Model: cfg.Model, Choices: choices, Usage: u}
	}
	one := func(d delta, finish *string) []chunkChoice {
		c := chunkChoice{Index: 0, Delta: d, Logprobs: jsonNull, FinishReason: finish}
		if finish != nil {
			c.StopReason = jsonNull
		}
		return []chunkChoice{c}
	}
	// write sends one event; it reports whether the write and flush worked.
	write := func(data []byte) bool {
		ev := make([]byte, 0, len(data)+8)
		ev = append(append(append(ev, "data: "...), data...), "\n\n"...)
		if _, err := w.Write(ev); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	// send is write that also notices a client already gone.
	send := func(data []byte) bool { return write(data) && ctx.Err() == nil }

	empty := ""
	if !send(encodeJSON(newChunk(one(delta{Role: "assistant", Content: &empty}, nil), nil))) {
		return outcomeCancelled
	}
	for i, tok := range p.Tokens {
		if i > 0 && !sleep(ctx, cfg.ITL.D()) {
			return outcomeCancelled
		}
		if !send(encodeJSON(newChunk(one(delta{Content: &tok}, nil), nil))) {
			return outcomeCancelled
		}
		if cfg.DropAfter > 0 && i+1 == cfg.DropAfter {
			return outcomeDropped
		}
	}
	finish := p.FinishReason
	if !send(encodeJSON(newChunk(one(delta{}, &finish), nil))) {
		return outcomeCancelled
	}
	if includeUsage {
		u := newUsage(p.PromptTokens, len(p.Tokens))
		if !send(encodeJSON(newChunk([]chunkChoice{}, &u))) {
			return outcomeCancelled
		}
	}
	// A client may hang up as soon as it has read [DONE]; that is success.
	if !write([]byte("[DONE]")) {
		return outcomeCancelled
	}
	return outcomeCompleted
}
