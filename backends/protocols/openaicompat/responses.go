package openaicompat

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/backends/protocols"
	"github.com/llmedge/llmedge/backends/protocols/sse"
	"github.com/llmedge/llmedge/wire"
)

// OpenAI's Responses API (POST /v1/responses), carried through to the
// engines that serve it (vLLM, Ollama 0.13.3 and later): the client's body
// goes on with the gateway's edits (passthrough.go), and the answer comes
// back as the replica wrote it. A stream is named events, each one's data
// a JSON object whose "type" repeats the event's name:
//
//	response.created, response.in_progress   the response object, in progress
//	response.output_item.added, response.content_part.added, ...
//	response.output_text.delta               new text ("delta")
//	response.function_call_arguments.delta   a call's arguments, growing
//	..., response.output_item.done
//	response.completed | response.incomplete the whole response, with usage
//	response.failed, error                   a failure
//
// and no [DONE]: the stream ends after its last event. The gateway reads
// the text of output_text deltas, the usage of the last response object
// (input_tokens and output_tokens, its prompt and completion tokens), and
// where each event's response names its model; every event is relayed as
// written, its name with it.

// A replica that does not serve /v1/responses (SGLang, TGI, llama.cpp's
// server, older vLLM) answers 404: when the door gives a translation
// (api.Wire.Translate, the model's "auto" mode), the request is sent again
// at once, translated, to /v1/chat/completions, and the replica is
// remembered for unservedFor, during which its Responses requests go
// translated from the start (see chatAnthropic, which does the same for
// /v1/messages: a replica may serve one API and not the other).

// chatResponses runs a request in the Responses API's format: to
// /v1/responses, or translated when the replica is known not to serve it.
func (b *Protocol) chatResponses(ctx context.Context, client *http.Client, req *protocols.Request, onDelta protocols.DeltaFunc) (*protocols.Result, error) {
	w := req.Wire
	if w.Translate != nil && unservedResponses.has(req.BaseURL, time.Now()) {
		return b.translated(ctx, client, req, onDelta)
	}
	res, err := b.send(ctx, client, req, onDelta)
	be := notFound(err)
	if be == nil {
		return res, err
	}
	// The path is not served: nothing was passed on yet.
	if w.Translate == nil {
		be.Message = "the replica does not serve /v1/responses (" + be.Message + "); set the model's responses option to auto or translate"
		return nil, be
	}
	unservedResponses.add(req.BaseURL, time.Now())
	return b.translated(ctx, client, req, onDelta)
}

// responsesFinish is a finished response's reason to stop, in the chat
// answer's terms: "length" when max_output_tokens cut it.
func responsesFinish(r *wire.Response) string {
	switch {
	case r.Status != "incomplete":
		return "stop"
	case r.IncompleteReason == "max_output_tokens":
		return "length"
	case r.IncompleteReason != "":
		return r.IncompleteReason
	}
	return "stop"
}

// readResponse fills res from a non-streamed response object data: its
// text, usage and finish, and the object itself (Raw) to pass on.
func readResponse(data []byte, res *protocols.Result) error {
	var r wire.Response
	if err := wire.ReadResponse(data, &r); err != nil {
		return &protocols.Error{Kind: protocols.KindProtocol, Message: "malformed JSON in the response", Err: err}
	}
	if r.Object == "error" || r.Error || r.Status == "failed" {
		return &protocols.Error{Kind: protocols.KindServer, Message: protocols.PayloadMessage(data, "replica reported a failed response")}
	}
	res.Usage, res.UsageKnown = usage(r.Usage)
	res.Raw, res.Format, res.Model = data, api.FormatOpenAIResponses, r.Model
	res.Content, res.FinishReason = r.Text, responsesFinish(&r)
	return nil
}

// responsesTerminal are the events that end a successful stream.
func responsesTerminal(typ string) bool {
	return typ == "response.completed" || typ == "response.incomplete"
}

// parseResponsesStream reads a Responses API stream from r, passing every
// event on to onDelta (when not nil) as the replica wrote it, with its
// name, its text and its response's model (see protocols.Delta). It ends
// successfully at response.completed or response.incomplete; with whole,
// that event's response object becomes the outcome's raw answer (the one
// answer a client that did not stream wants).
//
// Errors: response.failed, an error event, or an {"error":...} payload is
// KindServer with the replica's message; malformed JSON, an over-long
// line, and a stream that ends before its last event are KindProtocol;
// when ctx ends first the error wraps ctx.Err(); an error from onDelta is
// returned as is.
func parseResponsesStream(ctx context.Context, r io.Reader, maxLine int, whole bool, onDelta protocols.DeltaFunc) (*streamOutcome, error) {
	out := &streamOutcome{Collector: protocols.Collector{OnDelta: onDelta}}
	events := sse.NewReader(r, maxLine)
	fail := func(kind protocols.Kind, msg string, err error) error { return out.Fail(kind, msg, err) }
	var e wire.ResponsesEvent
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
			case errors.Is(err, io.EOF):
				return nil, fail(protocols.KindProtocol, "stream ended before response.completed", nil)
			}
			return nil, protocols.BodyError(ctx, err, "stream broken before response.completed", out.Deltas > 0)
		}
		data := bytes.TrimSpace(ev.Data)
		if len(data) == 0 || string(data) == "[DONE]" {
			continue // a [DONE] before the last event: the end of input tells
		}
		if err := wire.ReadResponsesEvent(data, &e); err != nil {
			return nil, fail(protocols.KindProtocol, "malformed JSON in a stream event", err)
		}
		typ := e.Type
		if typ == "" {
			typ = ev.Name
		}
		switch {
		case ev.Name == "error" || typ == "error" || e.Error:
			msg := e.Message
			if msg == "" {
				msg = protocols.PayloadMessage(data, "replica reported an error in the stream")
			}
			return nil, fail(protocols.KindServer, msg, nil)
		case typ == "response.failed":
			msg := e.Response.ErrorMessage
			if msg == "" {
				msg = "replica reported a failed response"
			}
			return nil, fail(protocols.KindServer, msg, nil)
		}
		if u, ok := usage(e.Response.Usage); ok {
			out.usage, out.usageKnown = u, true
		}
		d := &out.delta
		*d = protocols.Delta{Data: data, Format: api.FormatOpenAIResponses, Model: e.Response.Model, Event: ev.Name}
		end := responsesTerminal(typ)
		switch {
		case typ == "response.output_text.delta":
			d.Text, d.Token = e.Delta, true
		case end, strings.HasSuffix(typ, ".delta"), typ == "response.output_item.done":
			// Output of any kind (a call's arguments, a refusal, reasoning),
			// or the end: the first token is in.
			d.Token = true
		}
		if end {
			out.finishReason = responsesFinish(&e.Response)
			if whole && e.Response.Given {
				span := e.Response.Span
				out.raw = bytes.Clone(span.Raw)
				if m := e.Response.Model; m.Raw != nil {
					out.rawModel = wire.Value{Raw: out.raw[m.Start-span.Start : m.End-span.Start], Start: m.Start - span.Start, End: m.End - span.Start}
				}
			}
		}
		if err := out.Event(ctx, d); err != nil {
			return nil, err
		}
		if end {
			// Nothing follows the last event but, from some servers, a
			// [DONE]: the rest of the body is drained in the background.
			out.sawDone = true
			out.done = time.Now()
			return out, nil
		}
	}
}
