package openaicompat

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strconv"
	"time"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/backends/protocols"
	"github.com/llmedge/llmedge/backends/protocols/sse"
	"github.com/llmedge/llmedge/wire"
)

// streamOutcome is what a completed stream produced.
type streamOutcome struct {
	// Collector holds the text and passes deltas on.
	protocols.Collector
	finishReason string
	usage        api.Usage
	usageKnown   bool
	// done is when the stream ended.
	done time.Time
	// sawDone is true when the stream ended with [DONE] (rather than at
	// the end of input after a finish_reason).
	sawDone bool
	delta   protocols.Delta // reused event by event
	// whole, when set, builds the one answer the client wants.
	whole *accumulator
	// raw, when set, is that answer as the replica sent it whole (a
	// Responses stream's last response object), its model at rawModel.
	raw      []byte
	rawModel wire.Value
}

// pass passes one event of a stream carried through on, with what the
// gateway read of it: the text of the first choice, whether it carries
// output or a finish (on any choice), whether it carries the usage alone.
func (out *streamOutcome) pass(ctx context.Context, data []byte, f api.Format, c *wire.Answer, hasUsage bool) error {
	d := &out.delta
	*d = protocols.Delta{Data: data, Format: f, Model: c.Model, UsageOnly: len(c.Choices) == 0 && hasUsage}
	for i, ch := range c.Choices {
		if i == 0 {
			d.Text = ch.Delta + ch.Text
			if ch.FinishReason != "" {
				out.finishReason = ch.FinishReason
			}
		}
		if ch.Delta != "" || ch.Text != "" || ch.Output || ch.FinishReason != "" {
			d.Token = true
		}
	}
	return out.Event(ctx, d)
}

// parseStream reads an OpenAI-compatible stream of chat.completion.chunk
// events from r and calls onDelta (if not nil) for every non-empty
// choices[0].delta.content, in order.
//
// It ends successfully at "data: [DONE]", or when the input ends, cleanly
// or not, once a finish_reason was seen: the answer is complete and some
// servers omit [DONE]. Usage is taken from the
// last chunk with a non-null usage. Chunk ids are ignored.
//
// Errors: an error reported in the stream ("error:" line, "event: error",
// an {"error":...} or {"object":"error"} payload) is KindServer with the
// replica's message; malformed JSON, an over-long line and a stream cut
// short are KindProtocol; a read timeout is KindTimeout; Started tells
// whether onDelta had been called. When ctx ends first the result wraps
// ctx.Err(). An error from onDelta stops reading and is returned as is.
//
// A stream carried through in format f passes every event on, as the
// replica wrote it, with what the gateway read of it (see protocols.Delta).
func parseStream(ctx context.Context, r io.Reader, maxLine int, f api.Format, whole bool, onDelta protocols.DeltaFunc) (*streamOutcome, error) {
	if anthropicFormat(f) {
		return parseAnthropicStream(ctx, r, maxLine, f, onDelta)
	}
	out := &streamOutcome{Collector: protocols.Collector{OnDelta: onDelta}}
	if whole && f != "" {
		out.whole = &accumulator{format: f}
	}
	events := sse.NewReader(r, maxLine)
	fail := func(kind protocols.Kind, msg string, err error) error { return out.Fail(kind, msg, err) }
	chunks := wire.NewAnswerReader() // one reader for the stream's chunks
	defer chunks.Release()
	var c wire.Answer // reused chunk after chunk
	for {
		if ctx.Err() != nil {
			return nil, protocols.Canceled(ctx)
		}
		ev, err := events.Next()
		if err != nil {
			switch {
			case ctx.Err() != nil:
				return nil, protocols.Canceled(ctx)
			case errors.Is(err, sse.ErrLineTooLong):
				return nil, fail(protocols.KindProtocol, "stream line longer than "+strconv.Itoa(maxLine)+" bytes", nil)
			case out.finishReason != "":
				// Complete answer, no [DONE]: accepted.
				out.done = time.Now()
				return out, nil
			case errors.Is(err, io.EOF):
				return nil, fail(protocols.KindProtocol, "stream ended before [DONE]", nil)
			}
			return nil, protocols.BodyError(ctx, err, "stream broken before [DONE]", out.Deltas > 0)
		}

		switch ev.Name {
		case "", "message":
		case "error":
			return nil, fail(protocols.KindServer, protocols.PayloadMessage(ev.Data, "replica reported an error in the stream"), nil)
		default:
			continue // an event type that is not part of the chat stream
		}
		data := bytes.TrimSpace(ev.Data)
		if len(data) == 0 {
			continue
		}
		if string(data) == "[DONE]" {
			out.sawDone = true
			out.done = time.Now()
			return out, nil
		}

		if err := chunks.Read(data, &c); err != nil {
			return nil, fail(protocols.KindProtocol, "malformed JSON in a stream chunk", err)
		}
		if c.IsError() {
			return nil, fail(protocols.KindServer, protocols.PayloadMessage(data, "replica reported an error in the stream"), nil)
		}
		u, hasUsage := usage(c.Usage)
		if hasUsage {
			out.usage, out.usageKnown = u, true
		}
		if f != "" {
			if out.whole != nil {
				out.whole.add(data)
			}
			if err := out.pass(ctx, data, f, &c, hasUsage); err != nil {
				return nil, err
			}
			continue
		}
		if len(c.Choices) == 0 {
			continue // e.g. vLLM's separate usage chunk
		}
		choice := c.Choices[0]
		if err := out.Add(ctx, choice.Delta); err != nil {
			return nil, err
		}
		if fr := choice.FinishReason; fr != "" {
			out.finishReason = fr
		}
	}
}
