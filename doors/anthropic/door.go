// Package anthropic is the Anthropic-compatible front door of llmedge:
// POST /v1/messages (plain and streamed) and POST
// /v1/messages/count_tokens, with Anthropic's request fields, answer
// shapes, event sequence and error shape {"type":"error","error":{"type",
// "message"}}, so that Anthropic's SDKs, and the tools built on them, work
// against the gateway: base URL https://<host>, API key = the bearer
// credential (sent as x-api-key or Authorization: Bearer).
//
// It is a gateway.Door: authentication, the model scope, limits, routing,
// retries, timeouts, metrics and timings are the shared pipeline's, and
// this package reads requests and writes answers in Anthropic's shapes.
//
// Each model takes the door's requests in one of three modes (Mode): the
// body carried through to replicas that serve Anthropic's API themselves
// (vLLM, Ollama, llama.cpp's server: /v1/messages), or translated into
// OpenAI's chat completions for those that do not, and the answer
// translated back (translate.go, answer.go), or the first and, for a
// replica found not to serve it, the second (auto, the default).
package anthropic

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/backends/protocols"
	"github.com/llmedge/llmedge/gateway"
	"github.com/llmedge/llmedge/internal/jsonx"
	"github.com/llmedge/llmedge/wire"
)

// Mode is how a model's replicas get this door's requests.
type Mode uint8

const (
	// ModeAuto carries requests through to /v1/messages, and translates
	// them into chat completions for a replica that answers 404 there
	// (it is remembered: see package backends/protocols/openaicompat) or whose
	// protocol does not speak Anthropic's API (ollama's /api/chat, native).
	ModeAuto Mode = iota
	// ModePassthrough carries requests through, and never translates them:
	// a replica without /v1/messages fails the request.
	ModePassthrough
	// ModeTranslate translates every request into chat completions.
	ModeTranslate
)

// Modes are the names of the modes, as the model option `anthropic` takes
// them.
var Modes = []string{"auto", "passthrough", "translate"}

// ParseMode reads a mode's name; "" is auto.
func ParseMode(s string) (Mode, error) {
	switch s {
	case "", "auto":
		return ModeAuto, nil
	case "passthrough":
		return ModePassthrough, nil
	case "translate":
		return ModeTranslate, nil
	}
	return 0, fmt.Errorf("anthropic mode %q: want auto, passthrough or translate", s)
}

func (m Mode) String() string {
	if int(m) < len(Modes) {
		return Modes[m]
	}
	return "Mode(" + strconv.Itoa(int(m)) + ")"
}

// Door reads Messages requests and writes Anthropic's answers.
type Door struct {
	limits api.Limits
	// models are the model types the operator configured: the accepted
	// values of "model".
	models []string
	// names, when set, accepts names beyond models (LoRA adapters).
	names func(string) bool
	// modes are the models' modes; a model absent is ModeAuto.
	modes map[string]Mode
}

// New returns the door for the configured models, with the same limits as
// the native API.
func New(limits api.Limits, models []string, modes map[string]Mode) *Door {
	return &Door{limits: limits.WithDefaults(), models: models, modes: modes}
}

// WithNames has d accept the names accept says yes to, besides its
// models: the names of the models' LoRA adapters, which the gateway
// resolves.
func (d *Door) WithNames(accept func(string) bool) *Door {
	d.names = accept
	return d
}

// Name implements gateway.Door.
func (*Door) Name() string { return "anthropic" }

// Mode is the mode of model.
func (d *Door) Mode(model string) Mode { return d.modes[model] }

// Prepare implements gateway.Preparer: Anthropic's clients send their key
// as x-api-key (the SDKs' apiKey, until lately) or as a bearer token
// (authToken, and apiKey in the SDKs of late 2026): without an
// Authorization header, the one x-api-key given is the bearer credential.
// The answer names its request ID as Anthropic's does, request-id (the
// SDKs expose it), beside X-Request-ID.
func (*Door) Prepare(w http.ResponseWriter, r *http.Request) {
	h := r.Header
	if keys := h.Values("X-Api-Key"); len(keys) == 1 && keys[0] != "" && len(h.Values("Authorization")) == 0 {
		h.Set("Authorization", "Bearer "+keys[0])
	}
	if id := w.Header().Get(api.RequestIDHeader); id != "" {
		w.Header().Set("Request-Id", id)
	}
}

// Decode implements gateway.Door.
func (d *Door) Decode(r *http.Request) (api.Chat, []byte, *api.Error) {
	return d.decode(r, endpointMessages)
}

// WriteError implements gateway.Door.
func (*Door) WriteError(w http.ResponseWriter, err *api.Error) { writeError(w, err) }

// WriteAnswer implements gateway.Door: the replica's own message, when it
// is in this door's format, with the gateway's model name; else a message
// made of the replica's chat completion (its text, reasoning and tool
// calls), or of the answer's text.
func (*Door) WriteAnswer(w http.ResponseWriter, a *gateway.Answer) {
	var b []byte
	switch a.RawFormat {
	case api.FormatAnthropicMessages, api.FormatAnthropicCountTokens:
		b = appendRenamed(make([]byte, 0, len(a.Raw)+len(a.Model)), a.Raw, a.RawModel, a.Model)
	case api.FormatOpenAIChat:
		b = appendFromChat(make([]byte, 0, 256+len(a.Raw)), a)
	default:
		b = appendFromText(make([]byte, 0, 256+len(a.Content)+len(a.Content)/8), a)
	}
	api.WriteBody(w, http.StatusOK, b)
}

// AppendDelta implements gateway.Door: the replica's own event, when it is
// in this door's format, as it wrote it (its name, and the gateway's model
// name in message_start); else the events of Anthropic's sequence that the
// replica's chat completion chunk, or its new text, makes (see stream).
func (*Door) AppendDelta(b []byte, a *gateway.Answer, d *protocols.Delta) []byte {
	s := streamOf(a)
	switch {
	case d.Data != nil && d.Format == api.FormatAnthropicMessages && d.Event != "":
		a.Relayed, s.relayed = true, true
		if d.Event == "message_stop" {
			s.stopped = true
		}
		b = append(b, "event: "...)
		b = append(b, d.Event...)
		b = append(b, "\ndata: "...)
		b = appendRenamed(b, d.Data, d.Model, a.Model)
		return append(b, "\n\n"...)
	case d.Data != nil && d.Format == api.FormatOpenAIChat:
		return s.appendChunk(b, a, d.Data)
	case d.Text != "":
		b = s.begin(b, a)
		return s.appendText(b, d.Text)
	}
	return b
}

// AppendEnd implements gateway.Door: after the replica's own events,
// message_stop if it did not send one; else the end of the sequence: the
// open block's content_block_stop, message_delta with the stop_reason and
// the usage, message_stop.
func (*Door) AppendEnd(b []byte, a *gateway.Answer) []byte {
	s := streamOf(a)
	if s.relayed {
		if s.stopped {
			return b
		}
		return append(b, "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"...)
	}
	b = s.begin(b, a)
	if s.next == 0 && a.Content != "" {
		b = s.appendText(b, a.Content) // a text that came whole
	}
	return s.end(b, a)
}

// AppendStreamError implements gateway.Door: a failure after the stream
// started is an error event, Anthropic's error object, after which the
// stream ends. The SDKs raise it as an APIError of its type.
func (*Door) AppendStreamError(b []byte, a *gateway.Answer, err *api.Error) []byte {
	_, typ := describe(err)
	b = append(b, "event: error\ndata: "...)
	b = appendError(b, err, typ, a.ID)
	return append(b, '\n', '\n')
}

// appendRenamed appends data with the model member's value (at model, a
// span of data; none when it is absent) replaced by name.
func appendRenamed(b, data []byte, model wire.Value, name string) []byte {
	if model.Raw == nil || model.End > len(data) {
		return append(b, data...)
	}
	b = append(b, data[:model.Start]...)
	b = jsonx.String(b, name)
	return append(b, data[model.End:]...)
}

var (
	_ gateway.Door     = (*Door)(nil)
	_ gateway.Preparer = (*Door)(nil)
)
