package openaicompat

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
	"github.com/llmedge/llmedge/wire"
)

// Anthropic's Messages API, as the engines that serve it beside OpenAI's
// (vLLM, Ollama, llama.cpp's server) take it: POST /v1/messages and
// /v1/messages/count_tokens, the client's body carried through with the
// gateway's edits (the model's name, its default system prompt as the
// "system" member, its reply cap on max_tokens). The answer is Anthropic's
// message, or its stream of named events (message_start,
// content_block_start, content_block_delta, content_block_stop,
// message_delta, message_stop, ping, error), passed to the door as the
// replica wrote them (protocols.Delta: Data, Event) with what the gateway
// reads of them: the text of text_delta events, the usage (input_tokens
// from message_start, output_tokens from message_delta), the stop_reason.
//
// A replica that does not serve /v1/messages answers 404: when the door
// gives a translation (api.Wire.Translate, its "auto" mode), the request
// is sent again at once, translated, to /v1/chat/completions, and the
// replica's address is remembered for unservedFor, during which its
// requests go translated from the start. A 404 that names the model (the
// engine serves the path but not that model name) is not taken for a
// missing path.

// anthropicFormat reports Anthropic's formats.
func anthropicFormat(f api.Format) bool {
	return f == api.FormatAnthropicMessages || f == api.FormatAnthropicCountTokens
}

// Speaks implements protocols.Speaker: the formats of the engines'
// endpoints (paths).
func (*Protocol) Speaks(f api.Format) bool {
	_, ok := paths[f]
	return ok
}

// chatAnthropic runs a request in one of Anthropic's formats: to the path
// of the format, or translated when the replica is known not to serve it.
func (b *Protocol) chatAnthropic(ctx context.Context, client *http.Client, req *protocols.Request, onDelta protocols.DeltaFunc) (*protocols.Result, error) {
	w := req.Wire
	counting := w.Format == api.FormatAnthropicCountTokens && w.Tokenize != nil
	if counting && (w.TokenizeOnly || uncounted.has(req.BaseURL, time.Now())) {
		return b.countTokens(ctx, client, req) // anthropic_count.go
	}
	if w.Translate != nil && unservedMessages.has(req.BaseURL, time.Now()) {
		return b.translated(ctx, client, req, onDelta)
	}
	res, err := b.send(ctx, client, req, onDelta)
	be := notFound(err)
	if be == nil {
		return res, err
	}
	// The path is not served: nothing was passed on yet.
	if counting {
		uncounted.add(req.BaseURL, time.Now())
		return b.countTokens(ctx, client, req)
	}
	if w.Format == api.FormatAnthropicCountTokens {
		return nil, &protocols.Error{Kind: protocols.KindUnsupported, Status: be.Status, Param: string(w.Format),
			Message: "the replica does not serve /v1/messages/count_tokens (" + be.Message + ")"}
	}
	if w.Translate == nil {
		be.Message = "the replica does not serve /v1/messages (" + be.Message + "); set the model's anthropic option to auto or translate"
		return nil, be
	}
	unservedMessages.add(req.BaseURL, time.Now())
	return b.translated(ctx, client, req, onDelta)
}

// translated runs req with the door's translation of its body.
func (b *Protocol) translated(ctx context.Context, client *http.Client, req *protocols.Request, onDelta protocols.DeltaFunc) (*protocols.Result, error) {
	tw, err := req.Wire.Translate()
	if err != nil {
		return nil, err
	}
	r := *req
	r.Wire = tw
	return b.send(ctx, client, &r, onDelta)
}

// notFound is err when it is a replica's 404 for the path rather than
// for the model: the path is not served, and nothing was passed on yet.
func notFound(err error) *protocols.Error {
	if err == nil {
		return nil // before be, which errors.As moves to the heap
	}
	var be *protocols.Error
	if !errors.As(err, &be) || be.Status != http.StatusNotFound || namesModel(be.Message) {
		return nil
	}
	return be
}

// namesModel reports a 404 about the model rather than the path: vLLM's
// "The model `x` does not exist.", Ollama's "model 'x' not found".
func namesModel(msg string) bool { return strings.Contains(strings.ToLower(msg), "model") }

// addAnthropicUsage folds u into the gateway's usage: counts u gives
// replace the ones before (Anthropic's counts are totals so far, never
// increments).
func addAnthropicUsage(u wire.AnthropicUsage, out *api.Usage, known *bool) {
	if !u.Given {
		return
	}
	in, cw, cr := u.InputTokens, u.CacheCreationInputTokens, u.CacheReadInputTokens
	if in.Given || cw.Given || cr.Given {
		out.PromptTokens = in.N + cw.N + cr.N
		*known = true
	}
	if cr.Given {
		out.CachedTokens, out.CachedKnown = cr.N, true
	}
	if u.OutputTokens.Given {
		out.CompletionTokens = u.OutputTokens.N
		*known = true
	}
	out.TotalTokens = out.PromptTokens + out.CompletionTokens
}

// readAnthropic reads a non-streamed answer in one of Anthropic's formats:
// a message, or count_tokens' {"input_tokens": n}. Raw is the answer, the
// model's name at Model; Content the text of its text blocks.
func readAnthropic(data []byte, f api.Format, res *protocols.Result) error {
	var m wire.AnthropicMessage
	err := wire.ReadAnthropicMessage(data, &m)
	var malformed *wire.Error
	switch {
	case errors.As(err, &malformed):
		return &protocols.Error{Kind: protocols.KindProtocol, Message: "malformed JSON in the response", Err: err}
	case m.IsError():
		return &protocols.Error{Kind: protocols.KindServer, Message: protocols.PayloadMessage(data, "replica reported an error")}
	case err != nil:
		return &protocols.Error{Kind: protocols.KindProtocol, Message: "malformed answer", Err: err}
	}
	res.Raw, res.Format, res.Model = data, f, m.Model
	if f == api.FormatAnthropicCountTokens {
		if !m.InputTokens.Given {
			return &protocols.Error{Kind: protocols.KindProtocol, Message: "count_tokens answer without input_tokens"}
		}
		// Nothing was generated: the count costs no tokens.
		res.UsageKnown = true
		return nil
	}
	if m.Type != "message" {
		return &protocols.Error{Kind: protocols.KindProtocol, Message: "answer is not a message (type " + strconv.Quote(m.Type) + ")"}
	}
	res.Content, res.FinishReason = m.Text, m.StopReason
	addAnthropicUsage(m.Usage, &res.Usage, &res.UsageKnown)
	return nil
}

// parseAnthropicStream reads Anthropic's stream of named events and passes
// each on (protocols.Delta: Data, Event, Format f) with what the gateway
// reads of it. content_block_delta events carry output (Token), the text
// of text_delta ones is the answer's text; a message_delta with its
// stop_reason ends the output (Token, FinishReason); message_stop ends the
// stream. An error event fails it: KindOverloaded for overloaded_error
// (another replica may be tried while nothing was relayed), else
// KindServer, with the replica's message. A stream cut after its
// stop_reason is complete; before, KindProtocol.
func parseAnthropicStream(ctx context.Context, r io.Reader, maxLine int, f api.Format, onDelta protocols.DeltaFunc) (*streamOutcome, error) {
	out := &streamOutcome{Collector: protocols.Collector{OnDelta: onDelta}}
	events := sse.NewReader(r, maxLine)
	fail := func(kind protocols.Kind, msg string, err error) error { return out.Fail(kind, msg, err) }
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
				out.done = time.Now() // complete: its stop_reason came
				return out, nil
			case errors.Is(err, io.EOF):
				return nil, fail(protocols.KindProtocol, "stream ended before message_stop", nil)
			}
			return nil, protocols.BodyError(ctx, err, "stream broken before message_stop", out.Deltas > 0)
		}
		data := bytes.TrimSpace(ev.Data)
		if len(data) == 0 {
			continue
		}
		if bytes.IndexByte(data, '\n') >= 0 {
			// Relayed as one data line: a JSON value spread over lines
			// is compacted.
			var c bytes.Buffer
			if json.Compact(&c, data) == nil {
				data = c.Bytes()
			}
		}
		var e wire.AnthropicEvent
		if err := wire.ReadAnthropicEvent(data, &e); err != nil {
			return nil, fail(protocols.KindProtocol, "malformed JSON in a stream event", err)
		}
		name := ev.Name
		if name == "" || name == "message" {
			name = e.Type // an unnamed event names itself
		}
		if name == "error" || e.Type == "error" {
			kind := protocols.KindServer
			if e.ErrorType == "overloaded_error" {
				kind = protocols.KindOverloaded
			}
			return nil, fail(kind, protocols.PayloadMessage(data, "replica reported an error in the stream"), nil)
		}
		d := &out.delta
		*d = protocols.Delta{Data: data, Format: f, Event: name}
		switch name {
		case "message_start":
			addAnthropicUsage(e.MessageUsage, &out.usage, &out.usageKnown)
			d.Model = messageModel(data)
		case "content_block_delta":
			d.Token = true
			if e.DeltaType == "text_delta" {
				d.Text = e.DeltaText
			}
		case "message_delta":
			if e.StopGiven {
				out.finishReason = e.StopReason
				d.Token = true
			}
			addAnthropicUsage(e.Usage, &out.usage, &out.usageKnown)
		case "message_stop":
			d.Token = true
		}
		if err := out.Event(ctx, d); err != nil {
			return nil, err
		}
		if name == "message_stop" {
			if out.finishReason == "" {
				out.finishReason = "end_turn"
			}
			out.sawDone = true
			out.done = time.Now()
			return out, nil
		}
	}
}

// messageModel is the span of message.model in a message_start event.
func messageModel(data []byte) wire.Value {
	var model wire.Value
	whole := wire.Value{Raw: data, End: len(data)}
	_ = whole.Members(func(m wire.Member) bool {
		if m.Name != "message" {
			return true
		}
		_ = m.Value.Members(func(mm wire.Member) bool {
			if mm.Name == "model" && mm.Value.Kind() == wire.String {
				model = mm.Value
				return false
			}
			return true
		})
		return false
	})
	return model
}
