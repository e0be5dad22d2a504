package simulator

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/llmedge/llmedge/api"
)

// nativeRequest is the public inference request (see README).
type nativeRequest struct {
	Messages    []api.Message `json:"messages"`
	ModelType   string        `json:"model_type"`
	Temperature *float64      `json:"temperature"`
	Stream      bool          `json:"stream"`
}

// decodeNative reads a POST /tasks/assistant_inference body.
func decodeNative(r *http.Request, w http.ResponseWriter) (*chat, error) {
	var req nativeRequest
	if err := readBody(r, w, &req); err != nil {
		return nil, err
	}
	c := &chat{Model: req.ModelType, Messages: req.Messages, Temperature: req.Temperature,
		Stream: req.Stream, MessagesMissing: req.Messages == nil}
	if c.Messages == nil {
		c.Messages = []api.Message{}
	}
	return c, nil
}

// nativeReply answers in llmedge's public format: streamed, one
// `data: {"content"}` event per token then `event: done` with the whole
// answer; not streamed, that answer as JSON. NoUsage sends zero counts
// with "usage_reported": false. DropAfter and ErrorAfter (`event: error`)
// work as in streamReply.
func nativeReply(ctx context.Context, w http.ResponseWriter, cfg Config, p plan, c *chat) outcome {
	start := time.Now()
	answer := func() api.InferenceResponse {
		d := time.Since(start).Seconds()
		resp := api.InferenceResponse{Content: strings.Join(p.Tokens, ""), ModelType: c.Model,
			ProcessingTime: d, InferenceTime: d, MessageCount: len(c.Messages)}
		if cfg.NoUsage {
			resp.UsageReported = api.UsageNotReported()
		} else {
			u := newUsage(p.PromptTokens, len(p.Tokens))
			resp.Usage = api.Usage{PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens, TotalTokens: u.TotalTokens}
		}
		return resp
	}
	if !c.Stream {
		if o, ok := waitWhole(ctx, cfg, p); !ok {
			return o
		}
		writeJSON(w, http.StatusOK, answer())
		return outcomeCompleted
	}
	rc, ok := startStream(ctx, w, p, eventStreamType)
	if !ok {
		return outcomeCancelled
	}
	send := func(b []byte) bool {
		if _, err := w.Write(b); err != nil {
			return false
		}
		return rc.Flush() == nil && ctx.Err() == nil
	}
	o, ok := emitTokens(ctx, cfg, p,
		func(tok string) bool { return send(sseLine("data: ", api.StreamDelta{Content: tok})) },
		func() bool {
			return send(dialects[DialectNative].streamError("The replicas failed to answer (simulated, error_after)"))
		})
	if !ok {
		return o
	}
	if !send(append([]byte("event: done\n"), sseLine("data: ", answer())...)) && ctx.Err() == nil {
		return outcomeCancelled
	}
	return outcomeCompleted
}
