package openai

import (
	"errors"
	"fmt"
	"mime"
	"net/http"
	"strconv"
	"strings"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/backends/protocols"
	"github.com/llmedge/llmedge/gateway"
	"github.com/llmedge/llmedge/internal/jsonx"
	"github.com/llmedge/llmedge/wire"
)

// Completions is the door's codec of POST /v1/completions: a prompt in,
// text out, carried through to replicas that serve the endpoint (the
// OpenAI-compatible protocol; the others refuse it, naming the API).
type Completions struct{ *Door }

// Embeddings is the door's codec of POST /v1/embeddings: inputs in,
// vectors out, carried through as Completions is.
type Embeddings struct{ *Door }

// Decode implements gateway.Door.
func (c Completions) Decode(r *http.Request) (api.Chat, []byte, *api.Error) {
	return c.decodeOther(r, api.FormatOpenAICompletions, "prompt")
}

// Decode implements gateway.Door.
func (e Embeddings) Decode(r *http.Request) (api.Chat, []byte, *api.Error) {
	return e.decodeOther(r, api.FormatOpenAIEmbeddings, "input")
}

// decodeOther reads a completions or embeddings body: the model, the
// prompt or input (the text routing and the limits count), the stream and
// the reply cap; the rest is carried through as the client wrote it.
func (f *Door) decodeOther(r *http.Request, format api.Format, input string) (api.Chat, []byte, *api.Error) {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || !(mt == "application/json" || strings.HasSuffix(mt, "+json")) {
			return api.Chat{}, nil, invalid(codeInvalidValue, "",
				"Unsupported Content-Type '"+ct+"': send the request body as application/json.")
		}
	}
	return api.DecodeLeased(r, f.limits.MaxBodyBytes, func(body []byte) (api.Chat, *api.Error) {
		return f.parseOther(body, format, input)
	})
}

// parseOther validates a completions or embeddings body.
func (f *Door) parseOther(body []byte, format api.Format, input string) (api.Chat, *api.Error) {
	var o wire.Request
	if err := wire.ReadRequest(body, &o); err != nil {
		var we *wire.Error
		if errors.As(err, &we) && we.Duplicate {
			p := wire.PathString(we.Path)
			return api.Chat{}, invalid(codeDuplicate, p,
				"Duplicate parameter: '"+p+"' is given more than once in the request body; give each parameter once.")
		}
		return api.Chat{}, invalid(codeInvalidJSON, "", "We could not parse the JSON body of your request: it is not valid JSON.")
	}
	if o.Body.Kind() != wire.Object {
		return api.Chat{}, invalid(codeInvalidType, "", "The request body must be a JSON object.")
	}
	var chat api.Chat
	var aerr *api.Error
	mv := o.Member("model")
	if !mv.Given() {
		return chat, invalid(codeMissing, "model", "You must provide a model parameter.")
	}
	if chat.Model, aerr = f.model(mv); aerr != nil {
		return chat, aerr
	}
	msg, aerr := f.inputMessage(o.Member(input), input)
	if aerr != nil {
		return chat, aerr
	}
	chat.Messages = []api.Message{msg}
	if v := o.Member("stream"); v.Given() {
		b, ok := v.Bool()
		if !ok {
			return chat, typeError("stream", "a boolean", v)
		}
		chat.Stream = b && format == api.FormatOpenAICompletions
	}
	if v := o.Member("stream_options"); v.Given() {
		if !chat.Stream {
			return chat, invalid(codeInvalidValue, "stream_options",
				"The 'stream_options' parameter is only allowed when 'stream' is enabled.")
		}
		if v.Kind() != wire.Object {
			return chat, typeError("stream_options", "an object", v)
		}
		_ = v.Members(func(m wire.Member) bool {
			if m.Name == "include_usage" {
				chat.IncludeUsage = m.Value.Kind() == wire.True
			}
			return true
		})
	}
	if v := o.Member("max_tokens"); v.Given() {
		n, aerr := integerIn(v, "max_tokens", 1, maxTokensLimit)
		if aerr != nil {
			return chat, aerr
		}
		chat.Sampling.MaxTokens = int(n)
	}
	if v := o.Member("n"); v.Given() {
		if _, aerr := integerIn(v, "n", 1, maxChoices); aerr != nil {
			return chat, aerr
		}
	}
	chat.Wire = &api.Wire{Format: format, Body: body, Object: o.Body, Members: o.Members}
	return chat, nil
}

// inputMessage is a prompt or an input as the user's message routing and
// the limits read: a string as written (api.Message.Quoted, not decoded),
// or strings joined with newlines, or token ids as written.
func (f *Door) inputMessage(v wire.Value, name string) (api.Message, *api.Error) {
	m := api.Message{Role: api.RoleUser}
	switch v.Kind() {
	case wire.String:
		m.Quoted = v.Raw
		return m, f.charsWithin(&m, name)
	case wire.Array:
		var b strings.Builder
		var bad *api.Error
		err := v.Elements(func(i int, e wire.Value) bool {
			switch e.Kind() {
			case wire.String:
				if i > 0 {
					b.WriteByte('\n')
				}
				b.WriteString(e.Text())
			case wire.Number, wire.Array:
				b.Write(e.Raw) // token ids
			default:
				bad = typeError(name+"["+strconv.Itoa(i)+"]", "a string, a token or an array of tokens", e)
				return false
			}
			return true
		})
		if bad != nil {
			return m, bad
		}
		if err != nil || b.Len() == 0 && v.Kind() == wire.Array && string(v.Raw) == "[]" {
			return m, invalid(codeEmptyArray, name, "Invalid '"+name+"': empty array.")
		}
		m.Content = b.String()
		return m, f.charsWithin(&m, name)
	case wire.Absent, wire.Null:
		return m, invalid(codeMissing, name, "Missing required parameter: '"+name+"'.")
	}
	return m, typeError(name, "a string or an array", v)
}

// charsWithin refuses a message whose text has more characters than a
// message may (max_content_chars), counted as every door counts them
// (api.Message.CharsOver: decoded only past the bound), naming param.
func (f *Door) charsWithin(m *api.Message, param string) *api.Error {
	max := f.limits.MaxContentChars
	if n, over := m.CharsOver(max); over {
		return invalid(codeStringTooLong, param, fmt.Sprintf(
			"Invalid '%s': string too long. Expected a string with maximum length %d, but got a string with length %d instead.",
			param, max, n))
	}
	return nil
}

// WriteAnswer implements gateway.Door: the replica's answer with the
// gateway's model name.
func (c Completions) WriteAnswer(w http.ResponseWriter, a *gateway.Answer) {
	if a.Raw != nil {
		writeJSON(w, appendRenamed(make([]byte, 0, len(a.Raw)+len(a.Model)), a.Raw, a.RawModel, a.Model))
		return
	}
	b := append(make([]byte, 0, 192+len(a.Content)), `{"id":`...)
	b = appendID(b, a.ID)
	b = append(b, `,"object":"text_completion","created":`...)
	b = jsonx.Int(b, a.Created.Unix())
	b = append(b, `,"model":`...)
	b = jsonx.String(b, a.Model)
	b = append(b, `,"choices":[{"index":0,"text":`...)
	b = jsonx.String(b, a.Content)
	b = append(b, `,"logprobs":null,"finish_reason":`...)
	b = jsonx.String(b, finishReason(a.FinishReason))
	b = append(b, "}]"...)
	if a.UsageKnown {
		b = append(b, `,"usage":`...)
		b = appendUsage(b, a)
	}
	writeJSON(w, append(b, '}'))
}

// AppendDelta implements gateway.Door: the replica's event as it wrote
// it, with the gateway's model name (the usage event only when asked
// for); a continuation's as the stream's (splice.go).
func (c Completions) AppendDelta(b []byte, a *gateway.Answer, d *protocols.Delta) []byte {
	if d.Data == nil || (d.UsageOnly && !a.IncludeUsage) {
		return b
	}
	a.Relayed = true
	b = append(b, "data: "...)
	if sp, ok := a.Splice.(*splice); ok && a.Continued > 0 {
		b = appendSpliced(b, a, d, sp)
	} else {
		b = appendRenamed(b, d.Data, d.Model, a.Model)
	}
	return append(b, "\n\n"...)
}

// AppendEnd implements gateway.Door: [DONE], after the replica's events.
func (c Completions) AppendEnd(b []byte, a *gateway.Answer) []byte {
	return append(b, "data: [DONE]\n\n"...)
}

// WriteAnswer implements gateway.Door: the replica's answer with the
// gateway's model name.
func (e Embeddings) WriteAnswer(w http.ResponseWriter, a *gateway.Answer) {
	if a.Raw == nil {
		writeError(w, api.NewError(http.StatusBadGateway, "The replicas of model '"+a.Model+"' sent no embeddings"))
		return
	}
	writeJSON(w, appendRenamed(make([]byte, 0, len(a.Raw)+len(a.Model)), a.Raw, a.RawModel, a.Model))
}

// AppendDelta implements gateway.Door: embeddings are not streamed.
func (Embeddings) AppendDelta(b []byte, _ *gateway.Answer, _ *protocols.Delta) []byte { return b }

// AppendEnd implements gateway.Door: embeddings are not streamed.
func (Embeddings) AppendEnd(b []byte, _ *gateway.Answer) []byte { return b }

var (
	_ gateway.Door = Completions{}
	_ gateway.Door = Embeddings{}
)
