package simulator

import (
	"context"
	"net/http"
	"time"
)

// eventStreamType is the Content-Type vLLM (Starlette) gives its streams.
const eventStreamType = "text/event-stream; charset=utf-8"

// streamReply sends p as server-sent events in d's framing, flushing each
// one: once the first token is due (engine.go: queues, prefill, TTFT) the
// role chunk and the first token, then one token chunk per ITL, the
// finishing chunk, the usage chunk when includeUsage, and "[DONE]". Usage goes on the finishing chunk instead with UsageInFinish
// (or llama.cpp), and nowhere with NoUsage. TGI adds ":" keep-alive comments
// and sends empty ids. With DropAfter it returns outcomeDropped right after
// that many tokens; with ErrorAfter it sends d's in-band error instead of
// the rest and returns outcomeError.
func streamReply(ctx context.Context, w http.ResponseWriter, cfg Config, d *dialect, p plan, includeUsage bool) outcome {
	rc, ok := startStream(ctx, w, p, eventStreamType)
	if !ok {
		return outcomeCancelled
	}

	id, created := completionID(), time.Now().Unix()
	if d.emptyID {
		id = ""
	}
	newChunk := func(choices []chunkChoice, u *usage) chunk {
		return chunk{ID: id, Object: "chat.completion.chunk", Created: created, Model: cfg.Model, Choices: choices, Usage: u}
	}
	one := func(dl delta, finish *string) []chunkChoice {
		c := chunkChoice{Index: 0, Delta: dl, Logprobs: jsonNull, FinishReason: finish}
		if finish != nil {
			c.StopReason = jsonNull
		}
		return []chunkChoice{c}
	}
	// writeRaw sends bytes as they are; it reports whether the write and
	// flush worked.
	writeRaw := func(b []byte) bool {
		if _, err := w.Write(b); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	write := func(data []byte) bool {
		ev := make([]byte, 0, len(data)+len(d.dataPrefix)+2)
		ev = append(append(append(ev, d.dataPrefix...), data...), "\n\n"...)
		return writeRaw(ev)
	}
	// send is write that also notices a client already gone.
	send := func(data []byte) bool { return write(data) && ctx.Err() == nil }

	empty := ""
	if !send(encodeJSON(newChunk(one(delta{Role: "assistant", Content: &empty}, nil), nil))) {
		return outcomeCancelled
	}
	if d.keepAlive && !writeRaw([]byte(":\n\n")) {
		return outcomeCancelled
	}
	o, ok := emitTokens(ctx, cfg, p,
		func(tok string) bool { return send(encodeJSON(newChunk(one(delta{Content: &tok}, nil), nil))) },
		func() bool { return writeRaw(d.streamError("Simulated replica failure (error_after).")) })
	if !ok {
		return o
	}
	var u *usage
	if !cfg.NoUsage && (includeUsage || d.usageInFinish) {
		v := newUsage(p.PromptTokens, len(p.Tokens))
		u = &v
	}
	inFinish := cfg.UsageInFinish || d.usageInFinish
	finish := p.FinishReason
	var finishUsage *usage
	if inFinish {
		finishUsage = u
	}
	if !send(encodeJSON(newChunk(one(delta{}, &finish), finishUsage))) {
		return outcomeCancelled
	}
	if u != nil && !inFinish {
		if !send(encodeJSON(newChunk([]chunkChoice{}, u))) {
			return outcomeCancelled
		}
	}
	// A client may hang up as soon as it has read [DONE]; that is success.
	if !write([]byte("[DONE]")) {
		return outcomeCancelled
	}
	return outcomeCompleted
}
