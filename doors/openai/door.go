// Package openai is the OpenAI-compatible front door of llmedge: POST
// /v1/chat/completions (plain and streamed), GET /v1/models and GET
// /v1/models/{id}, with OpenAI's request fields, answer shapes and error
// shape {"error":{"message","type","param","code"}}, so the official
// OpenAI SDKs work against the gateway unchanged: base URL
// https://<host>/v1, API key = the bearer credential.
//
// It is a gateway.Door: authentication, the model scope, limits, routing,
// retries, timeouts, metrics and timings are the shared pipeline's, and
// this package only reads requests and writes answers in OpenAI's shapes.
// (Package backends/protocols/openaicompat is the other side: the replicas' OpenAI API.)
package openai

import (
	"net/http"
	"time"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/auth"
	"github.com/llmedge/llmedge/backends/protocols"
	"github.com/llmedge/llmedge/gateway"
	"github.com/llmedge/llmedge/internal/jsonx"
	"github.com/llmedge/llmedge/wire"
)

// Door reads chat completions requests and writes OpenAI's answers.
type Door struct {
	limits api.Limits
	// models are the model types the operator configured: the accepted
	// values of "model", in the order the model list shows them.
	models []string
	// aliases map the names in models that are aliases to their models,
	// whose scopes cover them.
	aliases map[string]string
	// names, when set, accepts names beyond models that the gateway
	// resolves (a model's LoRA adapters).
	names func(string) bool
	// created is the "created" time of the listed models: when the
	// configuration was loaded, the only date the gateway knows of them.
	created int64
	// responsesModes are the models' modes for the Responses API; a model
	// absent is ResponsesAuto.
	responsesModes map[string]ResponsesMode
}

// New returns the door for the configured models, with the same limits
// as the native API.
func New(limits api.Limits, models []string) *Door {
	return &Door{limits: limits.WithDefaults(), models: models, created: time.Now().Unix()}
}

// WithAliases tells f which of its models' names are aliases, and of
// which model: the model list shows an alias to whoever may use its model.
func (f *Door) WithAliases(aliases map[string]string) *Door {
	f.aliases = aliases
	return f
}

// WithNames has f accept the names accept says yes to, besides its
// models: the names of the models' LoRA adapters, which the gateway
// resolves.
func (f *Door) WithNames(accept func(string) bool) *Door {
	f.names = accept
	return f
}

// scope is the scope that covers the model name: its model's.
func (f *Door) scope(name string) string {
	if m, ok := f.aliases[name]; ok {
		return auth.ModelScope(m)
	}
	return auth.ModelScope(name)
}

// Name implements gateway.Door.
func (*Door) Name() string { return "openai" }

// Models are the configured model types.
func (f *Door) Models() []string { return f.models }

// Decode implements gateway.Door.
func (f *Door) Decode(r *http.Request) (api.Chat, []byte, *api.Error) { return f.decodeChat(r) }

// WriteError implements gateway.Door.
func (*Door) WriteError(w http.ResponseWriter, err *api.Error) { writeError(w, err) }

// WriteAnswer implements gateway.Door: the replica's own answer, when it
// is in this door's format, with the gateway's model name; else a
// chat.completion made of the answer's text.
func (*Door) WriteAnswer(w http.ResponseWriter, a *gateway.Answer) {
	if a.Raw != nil {
		writeJSON(w, appendRenamed(make([]byte, 0, len(a.Raw)+len(a.Model)), a.Raw, a.RawModel, a.Model))
		return
	}
	b := make([]byte, 0, 256+len(a.Content)+len(a.Content)/8)
	b = appendHead(b, a, "chat.completion")
	b = append(b, `{"index":0,"message":{"role":"assistant","content":`...)
	b = jsonx.String(b, a.Content)
	b = append(b, `,"refusal":null},"logprobs":null,"finish_reason":`...)
	b = jsonx.String(b, finishReason(a.FinishReason))
	b = append(b, "}]"...)
	if a.UsageKnown {
		// Left out when the replica reported none: OpenAI's schema makes
		// usage optional, and zeros would be a false count.
		b = append(b, `,"usage":`...)
		b = appendUsage(b, a)
	}
	b = append(b, '}', '\n')
	api.WriteBody(w, http.StatusOK, b)
}

// AppendDelta implements gateway.Door: the replica's own event, when it
// is in this door's format (tool calls, several choices, logprobs
// included), with the gateway's model name, and without the usage event
// the gateway asked for on its own account; else a chat.completion.chunk
// with the new text, the first one with the role too, as OpenAI's first
// chunk has it.
func (*Door) AppendDelta(b []byte, a *gateway.Answer, d *protocols.Delta) []byte {
	if d.Data != nil {
		if d.UsageOnly && !a.IncludeUsage {
			return b
		}
		a.Relayed = true
		b = append(b, "data: "...)
		if sp, ok := a.Splice.(*splice); ok && a.Continued > 0 {
			b = appendSpliced(b, a, d, sp) // a continuation's chunk (splice.go)
		} else {
			b = appendRenamed(b, d.Data, d.Model, a.Model)
		}
		return append(b, "\n\n"...)
	}
	text := d.Text
	if text == "" {
		return b
	}
	b = append(b, "data: "...)
	b = appendHead(b, a, "chat.completion.chunk")
	b = append(b, `{"index":0,"delta":{`...)
	if a.Deltas == 0 {
		b = append(b, `"role":"assistant",`...)
	}
	b = append(b, `"content":`...)
	b = jsonx.String(b, text)
	return append(b, "},\"logprobs\":null,\"finish_reason\":null}]}\n\n"...)
}

// AppendEnd implements gateway.Door: the chunk with finish_reason, the
// usage chunk ("choices":[]) when the client asked for it with
// stream_options.include_usage, then [DONE]; after the replica's own
// events, which carried the first two, [DONE] alone.
func (f *Door) AppendEnd(b []byte, a *gateway.Answer) []byte {
	if a.Relayed {
		return append(b, "data: [DONE]\n\n"...)
	}
	if a.Deltas == 0 {
		// An empty reply still opens with the role, so clients that build
		// the message from the deltas get an assistant message.
		b = append(b, "data: "...)
		b = appendHead(b, a, "chat.completion.chunk")
		b = append(b, `{"index":0,"delta":{"role":"assistant","content":`...)
		b = jsonx.String(b, a.Content)
		b = append(b, "},\"logprobs\":null,\"finish_reason\":null}]}\n\n"...)
	}
	b = append(b, "data: "...)
	b = appendHead(b, a, "chat.completion.chunk")
	b = append(b, `{"index":0,"delta":{},"logprobs":null,"finish_reason":`...)
	b = jsonx.String(b, finishReason(a.FinishReason))
	b = append(b, "}]}\n\n"...)
	if a.IncludeUsage {
		b = append(b, "data: "...)
		b = appendHead(b, a, "chat.completion.chunk")
		b = append(b, `],"usage":`...)
		if a.UsageKnown {
			b = appendUsage(b, a)
		} else {
			// null, as on every other chunk of OpenAI's streams: the
			// replica reported no counts, and zeros would be a false one.
			b = append(b, "null"...)
		}
		b = append(b, "}\n\n"...)
	}
	return append(b, "data: [DONE]\n\n"...)
}

// AppendStreamError implements gateway.Door: a failure after the stream
// started is a data event carrying an error object, after which the
// stream ends without [DONE]. The SDKs raise it as an API error.
func (*Door) AppendStreamError(b []byte, _ *gateway.Answer, err *api.Error) []byte {
	_, typ, code := describe(err)
	b = append(b, "data: "...)
	b = appendError(b, err, typ, code)
	return append(b, '\n', '\n')
}

// appendHead appends the fields every answer and chunk starts with, up to
// the opening of "choices".
func appendHead(b []byte, a *gateway.Answer, object string) []byte {
	b = append(b, `{"id":`...)
	b = appendID(b, a.ID)
	b = append(b, `,"object":"`...)
	b = append(b, object...)
	b = append(b, `","created":`...)
	b = jsonx.Int(b, a.Created.Unix())
	b = append(b, `,"model":`...)
	b = jsonx.String(b, a.Model)
	return append(b, `,"choices":[`...)
}

func appendUsage(b []byte, a *gateway.Answer) []byte {
	return appendUsageOf(b, a.Usage, a.Continued)
}

// appendUsageOf appends usage u; an answer continued on other replicas
// has its count of continuations in llmedge_continuations, a member of
// llmedge's own, which tells the client the counts are summed over them
// (see gateway.ContinuedUsage).
func appendUsageOf(b []byte, u api.Usage, continued int) []byte {
	b = append(b, `{"prompt_tokens":`...)
	b = jsonx.Int(b, int64(u.PromptTokens))
	b = append(b, `,"completion_tokens":`...)
	b = jsonx.Int(b, int64(u.CompletionTokens))
	b = append(b, `,"total_tokens":`...)
	b = jsonx.Int(b, int64(u.TotalTokens))
	if continued > 0 {
		b = append(b, `,"llmedge_continuations":`...)
		b = jsonx.Int(b, int64(continued))
	}
	return append(b, '}')
}

// finishReason maps a replica's finish reason to OpenAI's: "length" when
// the reply was cut by its token cap, else "stop". Engines differ
// (Ollama's done_reason, TGI's eos_token) and some report none.
func finishReason(r string) string {
	switch r {
	case "length", "max_tokens", "model_length":
		return "length"
	}
	return "stop"
}

// appendRenamed appends data with the model member's value (at model, a
// span of data; none when it is absent) replaced by name: a replica names
// its model as it serves it, a client as the gateway does.
func appendRenamed(b, data []byte, model wire.Value, name string) []byte {
	if model.Raw == nil || model.End > len(data) {
		return append(b, data...)
	}
	b = append(b, data[:model.Start]...)
	b = jsonx.String(b, name)
	return append(b, data[model.End:]...)
}

var _ gateway.Door = (*Door)(nil)
