package simulator

import (
	"context"
	"net/http"
	"time"
)

// eventStreamType is the Content-Type vLLM (Starlette) gives its streams.
const eventStreamType = "text/event-stream; charset=utf-8"

// sse writes a stream's events, flushing each.
type sse struct {
	ctx context.Context
	w   http.ResponseWriter
	rc  *http.ResponseController
}

// raw sends bytes as they are; it reports whether the write and flush
// worked.
func (s sse) raw(b []byte) bool {
	if _, err := s.w.Write(b); err != nil {
		return false
	}
	return s.rc.Flush() == nil
}

// send is raw that also notices a client already gone.
func (s sse) send(b []byte) bool { return s.raw(b) && s.ctx.Err() == nil }

// event sends a named event ("event: name\ndata: {json}\n\n"), as the
// Anthropic and Responses streams frame them.
func (s sse) event(name string, payload any) bool {
	b := append([]byte("event: "+name+"\ndata: "), encodeJSON(payload)...)
	return s.send(append(b, "\n\n"...))
}

// streamReply sends p as server-sent events in d's framing, flushing each
// one: once the first token is due (engine.go: queues, prefill, TTFT) a
// role chunk per choice, the name of each tool call, then at each step
// (ITL apart) one chunk per choice still going, with its next token (or
// fragment of its call's arguments, and logprobs when asked), each
// choice's finishing chunk right after its last token, the usage chunk
// when includeUsage, and "[DONE]". Usage goes on the last finishing chunk
// instead with UsageInFinish (or llama.cpp), and nowhere with NoUsage. TGI
// adds ":" keep-alive comments and sends empty ids. With DropAfter it
// returns outcomeDropped right after that many steps; with ErrorAfter it
// sends d's in-band error instead of the rest and returns outcomeError.
func streamReply(ctx context.Context, w http.ResponseWriter, cfg Config, d *dialect, p plan, c *chat) outcome {
	rc, ok := startStream(ctx, w, p, eventStreamType)
	if !ok {
		return outcomeCancelled
	}
	out := sse{ctx, w, rc}

	id, created := completionID(), time.Now().Unix()
	if d.emptyID {
		id = ""
	}
	newChunk := func(choices []chunkChoice, u *usage) chunk {
		return chunk{ID: id, Object: "chat.completion.chunk", Created: created, Model: cfg.Model, Choices: choices, Usage: u}
	}
	// write sends one data event, without checking for a client gone.
	write := func(data []byte) bool {
		ev := make([]byte, 0, len(data)+len(d.dataPrefix)+2)
		ev = append(append(append(ev, d.dataPrefix...), data...), "\n\n"...)
		return out.raw(ev)
	}
	send := func(cc chunkChoice, u *usage) bool {
		return write(encodeJSON(newChunk([]chunkChoice{cc}, u))) && ctx.Err() == nil
	}

	empty := ""
	for i := range p.Choices {
		if !send(chunkChoice{Index: i, Delta: delta{Role: "assistant", Content: &empty}, Logprobs: jsonNull}, nil) {
			return outcomeCancelled
		}
	}
	if d.keepAlive && !out.raw([]byte(":\n\n")) {
		return outcomeCancelled
	}
	callHead := func(r reply) delta {
		return delta{ToolCalls: []deltaToolCall{{ID: r.Call.ID, Type: "function", Function: &deltaFunction{Name: r.Call.Name, Arguments: &empty}}}}
	}
	for i, r := range p.Choices {
		if r.Call == nil || len(r.Reasoning) > 0 {
			continue // a call after reasoning is named after it
		}
		if !send(chunkChoice{Index: i, Delta: callHead(r), Logprobs: jsonNull}, nil) {
			return outcomeCancelled
		}
	}

	var u *usage
	if !cfg.NoUsage && (c.IncludeUsage || d.usageInFinish) {
		v := newUsage(p.PromptTokens, p.completionTokens())
		v.Details = detailsOf(cfg, p)
		u = &v
	}
	inFinish := cfg.UsageInFinish || d.usageInFinish
	left := len(p.Choices)
	finish := func(i int) bool {
		r := p.Choices[i]
		left--
		var fu *usage
		if inFinish && left == 0 {
			fu = u
		}
		return send(chunkChoice{Index: i, Delta: delta{}, Logprobs: jsonNull, FinishReason: &r.Finish, StopReason: stopReasonJSON(r)}, fu)
	}
	n := max(c.N, 1)
	o, ok := emitSteps(ctx, cfg, p.seq, p.steps(),
		func(step int) bool {
			for i, r := range p.Choices {
				if step >= r.tokens() {
					continue
				}
				piece, thinking := r.step(step)
				var dl delta
				switch {
				case thinking:
					dl.ReasoningContent = &piece
				case r.Call != nil:
					if len(r.Reasoning) > 0 && step == len(r.Reasoning) && !send(chunkChoice{Index: i, Delta: callHead(r), Logprobs: jsonNull}, nil) {
						return false
					}
					dl.ToolCalls = []deltaToolCall{{Function: &deltaFunction{Arguments: &piece}}}
				default:
					dl.Content = &piece
				}
				lp := jsonNull
				if c.Logprobs {
					lp = encodeJSON(chatLogprobsOf(cfg.Seed, i%n, []string{piece}, step, c.TopLogprobs))
				}
				if !send(chunkChoice{Index: i, Delta: dl, Logprobs: lp}, nil) {
					return false
				}
			}
			return true
		},
		func(step int) bool {
			for i, r := range p.Choices {
				if max(r.tokens(), 1) == step+1 && !finish(i) {
					return false
				}
			}
			return true
		},
		func() bool { return out.raw(d.streamError("Simulated replica failure (error_after).")) })
	if !ok {
		return o
	}
	if p.steps() == 0 {
		for i := range p.Choices {
			if !finish(i) {
				return outcomeCancelled
			}
		}
	}
	if u != nil && !inFinish {
		if !write(encodeJSON(newChunk([]chunkChoice{}, u))) || ctx.Err() != nil {
			return outcomeCancelled
		}
	}
	// A client may hang up as soon as it has read [DONE]; that is success.
	if !write([]byte("[DONE]")) {
		return outcomeCancelled
	}
	return outcomeCompleted
}
