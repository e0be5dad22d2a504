// Package nativeapi implements protocols.Protocol for replicas that speak
// llmedge's own public API (POST /tasks/assistant_inference, see README),
// e.g. another llmedge or a FastAPI service with the same contract. The
// gateway still authenticates, validates, routes and re-times the request.
//
// The request always streams ("stream": true): `data: {"content"}` deltas,
// then `event: done` with the full response (usage taken from it, unless
// it says "usage_reported": false), or `event: error` with {"detail"}.
// Non-2xx answers are FastAPI-shaped {"detail": ...}: 422 is KindBadRequest,
// 429 and 503 KindOverloaded, 401/403/404 KindServer (our configuration).
//
// The package imports nothing from Caddy and uses only the standard library.
package nativeapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/backends/protocols"
	"github.com/llmedge/llmedge/backends/protocols/sse"
)

// DefaultMaxLineBytes bounds one SSE line when Protocol.MaxLineBytes is 0.
const DefaultMaxLineBytes = 1 << 20

// inferencePath is the public inference endpoint.
const inferencePath = "/tasks/assistant_inference"

// Protocol is the native adapter. The zero value is ready to use; it holds
// no connections and is safe for concurrent use.
type Protocol struct {
	// MaxLineBytes bounds one SSE line and one event's data; a longer one
	// fails with KindProtocol. 0 means DefaultMaxLineBytes.
	MaxLineBytes int
}

var _ protocols.Protocol = (*Protocol)(nil)

// inferenceRequest is the body sent to the replica. The model name goes in
// model_type; max_tokens has no place in the public API and is not sent.
type inferenceRequest struct {
	Messages    []api.Message `json:"messages"`
	ModelType   string        `json:"model_type,omitempty"`
	Temperature *float64      `json:"temperature,omitempty"`
	Stream      bool          `json:"stream"`
}

// Chat implements protocols.Protocol. client nil means http.DefaultClient;
// deadlines come from ctx. FirstByte is when the first delta arrived (Done
// when none did), Done when `event: done` arrived.
func (b *Protocol) Chat(ctx context.Context, client *http.Client, req *protocols.Request, onDelta protocols.DeltaFunc) (*protocols.Result, error) {
	if req == nil {
		return nil, &protocols.Error{Kind: protocols.KindBadRequest, Message: "no chat request"}
	}
	if err := protocols.Refuse(req, "native", carried, protocols.TextOnly); err != nil {
		return nil, err
	}
	body := inferenceRequest{Messages: req.Messages, ModelType: req.Model, Temperature: req.Temperature, Stream: true}
	if body.Messages == nil {
		body.Messages = []api.Message{}
	}
	url := strings.TrimRight(req.BaseURL, "/") + inferencePath
	return protocols.Exchange(ctx, client, url, body, req.APIKey, "text/event-stream", func(r io.Reader) (*protocols.Result, error) {
		return parseStream(ctx, r, b.maxLineBytes(), onDelta)
	})
}

// carried are the members of an OpenAI chat request the native API
// carries: text messages, temperature, and what only shapes the door's
// answer (stream_options). The reply cap (max_tokens,
// max_completion_tokens) has no place in the native API and is ignored:
// the replica (another llmedge) caps replies with its own model's
// max_tokens, and a cap only shortens an answer. Every other member is
// refused, naming it: top_p (but 1), stop (but []), seed, tools,
// response_format and the rest, which would change the answer if they
// were honoured.
var carried = protocols.Carried{"model": true, "messages": true, "stream": true, "stream_options": true,
	"temperature": true, "max_tokens": true, "max_completion_tokens": true}

func (b *Protocol) maxLineBytes() int {
	if b == nil || b.MaxLineBytes <= 0 {
		return DefaultMaxLineBytes
	}
	return b.MaxLineBytes
}

// doneEvent is the part of the `event: done` payload the gateway uses.
type doneEvent struct {
	Usage *struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
		TotalTokens      int `json:"total_tokens"`
	} `json:"usage"`
	UsageReported *bool `json:"usage_reported"`
}

// parseStream reads the public streaming format from r, calling onDelta (if
// not nil) for every non-empty delta, and returns the result at `event: done`.
// Comments (": ping") and unknown events are skipped.
//
// Errors: `event: error` is KindServer with the replica's detail; malformed
// JSON, an over-long line and a stream without `event: done` are
// KindProtocol; a read timeout is KindTimeout. Started tells whether onDelta
// had been called. When ctx ends first the error wraps ctx.Err(); an error
// from onDelta is returned as is.
func parseStream(ctx context.Context, r io.Reader, maxLine int, onDelta protocols.DeltaFunc) (*protocols.Result, error) {
	out := protocols.Collector{OnDelta: onDelta}
	events := sse.NewReader(r, maxLine)
	for {
		if ctx.Err() != nil {
			return nil, protocols.Canceled(ctx)
		}
		ev, err := events.Next()
		switch {
		case err == nil:
		case ctx.Err() != nil:
			return nil, protocols.Canceled(ctx)
		case errors.Is(err, sse.ErrLineTooLong):
			return nil, out.Fail(protocols.KindProtocol, "stream line longer than "+strconv.Itoa(maxLine)+" bytes", nil)
		case errors.Is(err, io.EOF):
			return nil, out.Fail(protocols.KindProtocol, "stream ended before event: done", nil)
		default:
			return nil, protocols.BodyError(ctx, err, "stream broken before event: done", out.Deltas > 0)
		}
		data := bytes.TrimSpace(ev.Data)
		switch ev.Name {
		case "error":
			return nil, out.Fail(protocols.KindServer, protocols.PayloadMessage(data, "replica reported an error in the stream"), nil)
		case "done":
			return finish(&out, data)
		case "", "message":
		default:
			continue
		}
		if len(data) == 0 {
			continue
		}
		var delta api.StreamDelta
		if err := json.Unmarshal(data, &delta); err != nil {
			return nil, out.Fail(protocols.KindProtocol, "malformed JSON in a stream delta", err)
		}
		if err := out.Add(ctx, delta.Content); err != nil {
			return nil, err
		}
	}
}

// finish builds the result from the `event: done` payload data.
func finish(out *protocols.Collector, data []byte) (*protocols.Result, error) {
	var d doneEvent
	if err := json.Unmarshal(data, &d); err != nil {
		return nil, out.Fail(protocols.KindProtocol, "malformed JSON in event: done", err)
	}
	res := &protocols.Result{Content: out.Content.String(), FinishReason: "stop", // the public API does not say
		FirstByte: out.First, Done: time.Now()}
	if res.FirstByte.IsZero() {
		res.FirstByte = res.Done
	}
	if d.Usage != nil && (d.UsageReported == nil || *d.UsageReported) {
		res.Usage = api.Usage{PromptTokens: d.Usage.PromptTokens, CompletionTokens: d.Usage.CompletionTokens, TotalTokens: d.Usage.TotalTokens}
		res.UsageKnown = true
	}
	return res, nil
}
