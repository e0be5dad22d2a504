package openai

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"

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
	if ct := r.Header.Get("Content-Type"); !api.JSONType(ct) {
		return api.Chat{}, nil, invalid(codeInvalidValue, "",
			"Unsupported Content-Type '"+ct+"': send the request body as application/json.")
	}
	return api.DecodeLeased(r, f.limits.MaxBodyBytes, func(body []byte) (api.Chat, *api.Error) {
		return f.parseOther(body, format, input)
	})
}

// parseOther validates a completions or embeddings body, read in one
// pass by wire.ReadPrompt with the chat's pooled reader: input names the
// prompt member ("prompt" or "input").
func (f *Door) parseOther(body []byte, format api.Format, input string) (api.Chat, *api.Error) {
	c := chats.Get().(*wire.Chat)
	defer func() {
		c.Forget()
		chats.Put(c)
	}()
	if err := wire.ReadPrompt(body, c, input); err != nil {
		var we *wire.Error
		if errors.As(err, &we) && we.Duplicate {
			p := wire.PathString(we.Path)
			return api.Chat{}, invalid(codeDuplicate, p,
				"Duplicate parameter: '"+p+"' is given more than once in the request body; give each parameter once.")
		}
		return api.Chat{}, invalid(codeInvalidJSON, "", "We could not parse the JSON body of your request: it is not valid JSON.")
	}
	if c.Body.Kind() != wire.Object {
		return api.Chat{}, invalid(codeInvalidType, "", "The request body must be a JSON object.")
	}
	var chat api.Chat
	var aerr *api.Error
	if !c.Model.Given() {
		return chat, invalid(codeMissing, "model", "You must provide a model parameter.")
	}
	if chat.Model, aerr = f.model(c.Model); aerr != nil {
		return chat, aerr
	}
	msg, aerr := f.promptMessage(body, c, input)
	if aerr != nil {
		return chat, aerr
	}
	chat.Messages = []api.Message{msg}
	if v := c.Stream; v.Given() {
		b, ok := v.Bool()
		if !ok {
			return chat, typeError("stream", "a boolean", v)
		}
		chat.Stream = b && format == api.FormatOpenAICompletions
	}
	if v := c.StreamOptions; v.Given() {
		if !chat.Stream {
			return chat, invalid(codeInvalidValue, "stream_options",
				"The 'stream_options' parameter is only allowed when 'stream' is enabled.")
		}
		if v.Kind() != wire.Object {
			return chat, typeError("stream_options", "an object", v)
		}
		for _, o := range c.Options {
			if o.Name == "include_usage" {
				chat.IncludeUsage = o.Value.Kind() == wire.True
			}
		}
	}
	if v := c.MaxTokens; v.Given() {
		n, aerr := integerIn(v, "max_tokens", 1, maxTokensLimit)
		if aerr != nil {
			return chat, aerr
		}
		chat.Sampling.MaxTokens = int(n)
	}
	if v := c.N; v.Given() {
		if _, aerr := integerIn(v, "n", 1, maxChoices); aerr != nil {
			return chat, aerr
		}
	}
	// The members' spans, copied out of the pooled reader (they point
	// into body, which the request keeps).
	w := &api.Wire{Format: format, Body: body, Object: c.Body, Members: append([]wire.Member(nil), c.Members...)}
	if len(c.Items) > 0 {
		w.Prompts = make([]wire.Value, len(c.Items))
		for i := range c.Items {
			w.Prompts[i] = c.Items[i].Value
		}
	}
	chat.Wire = w
	return chat, nil
}

// promptMessage is a prompt or an input as the user's message routing and
// the limits read, kept as the client wrote it, nothing decoded or
// joined: a string as api.Message.Quoted; an array (a batch) as
// api.Message.Parts, a string element as written (quoted) and token ids
// as written, a run of ids one part (the ids of one prompt, commas and
// all) and an array of ids one part. Routing hashes the parts and the
// newlines between them; the limit counts the strings' characters, the
// newlines, and a token id's or an array of ids' bytes as written.
func (f *Door) promptMessage(body []byte, c *wire.Chat, name string) (api.Message, *api.Error) {
	m := api.Message{Role: api.RoleUser}
	switch v := c.Messages; v.Kind() {
	case wire.String:
		m.Quoted = v.Raw
		return m, f.charsWithin(&m, name)
	case wire.Array:
	case wire.Absent, wire.Null:
		return m, invalid(codeMissing, name, "Missing required parameter: '"+name+"'.")
	default:
		return m, typeError(name, "a string or an array", v)
	}
	if len(c.Items) == 0 {
		return m, invalid(codeEmptyArray, name, "Invalid '"+name+"': empty array.")
	}
	m.Parts = make([][]byte, 0, len(c.Items))
	ids, run := 0, -1 // bytes of token ids; the first id of the current run
	for i := range c.Items {
		e := c.Items[i].Value
		switch e.Kind() {
		case wire.Number:
			ids += len(e.Raw)
			if run < 0 {
				run = e.Start
			}
			if i+1 == len(c.Items) || c.Items[i+1].Kind() != wire.Number {
				m.Parts = append(m.Parts, body[run:e.End:e.End])
				run = -1
			}
		case wire.String:
			m.Parts = append(m.Parts, e.Raw)
		case wire.Array:
			ids += len(e.Raw)
			m.Parts = append(m.Parts, e.Raw)
		default:
			return m, typeError(name+"["+strconv.Itoa(i)+"]", "a string, a token or an array of tokens", e)
		}
	}
	return m, f.promptWithin(&m, name, ids)
}

// charsWithin refuses a message whose text has more characters than a
// message may (max_content_chars), counted as every door counts them
// (api.Message.CharsOver: decoded only past the bound), naming param.
func (f *Door) charsWithin(m *api.Message, param string) *api.Error {
	return f.promptWithin(m, param, 0)
}

// promptWithin is charsWithin for a prompt holding ids bytes of token ids
// besides its text: they count as characters, as written.
func (f *Door) promptWithin(m *api.Message, param string, ids int) *api.Error {
	if n, over := f.charsOver(m, ids); over {
		return f.tooLong(param, n)
	}
	return nil
}

// charsOver reports whether m, with ids characters besides, is over the
// limit, and how many characters it has then.
func (f *Door) charsOver(m *api.Message, ids int) (n int, over bool) {
	max := f.limits.MaxContentChars
	if ids <= max {
		n, over = m.CharsOver(max - ids)
	} else {
		n, over = m.CharsOver(-1) // every character counted: the error says how many
	}
	return n + ids, over
}

// tooLong is the error of param's n characters, over the limit.
func (f *Door) tooLong(param string, n int) *api.Error {
	return invalid(codeStringTooLong, param, fmt.Sprintf(
		"Invalid '%s': string too long. Expected a string with maximum length %d, but got a string with length %d instead.",
		param, f.limits.MaxContentChars, n))
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
