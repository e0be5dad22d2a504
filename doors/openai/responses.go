package openai

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/backends/protocols"
	"github.com/llmedge/llmedge/boundary/reserve"
	"github.com/llmedge/llmedge/gateway"
	"github.com/llmedge/llmedge/internal/jsonx"
	"github.com/llmedge/llmedge/wire"
)

// Responses is the door's codec of POST /v1/responses, OpenAI's Responses
// API, carried through to replicas that serve it (the OpenAI-compatible
// protocol: vLLM, Ollama 0.13.3 and later; the others refuse it, naming
// the API).
//
// The gateway keeps no state between requests, and its replicas cannot be
// counted on to keep any either: the next request may reach another one.
// So the endpoint is stateless, as with "store": false: a request without
// "store" is sent on with "store": false, and what needs a stored response
// is refused with a 400 naming the member: previous_response_id,
// conversation, background: true, store: true, a stored prompt template
// (prompt) and input items that refer to stored items (item_reference). A
// client carries a conversation on by sending its items again, as input.
type Responses struct{ *Door }

// PathResponses is the Responses API's path; under it, paths that name a
// stored response (GET, DELETE, cancel, input_items) are answered 404.
const PathResponses = "/v1/responses"

// stateful are the members that need a response store, and why each is
// refused.
var stateful = []struct {
	name string
	// refuse reports whether the value asks for the store.
	refuse func(wire.Value) bool
	why    string
}{
	{"previous_response_id", wire.Value.Given, "it continues a response a server stored"},
	{"conversation", wire.Value.Given, "it continues a conversation a server stored"},
	{"background", func(v wire.Value) bool { return v.Kind() == wire.True }, "a background response is stored to be polled"},
	{"store", func(v wire.Value) bool { return v.Kind() == wire.True }, "a stored response could not be found again: each request may reach another replica"},
	{"prompt", wire.Value.Given, "it names a prompt template a server stored"},
}

// Decode implements gateway.Door: the model, the input and instructions
// (the text routing and the limits count), stream and the reply cap are
// read, the shapes of tools and text.format checked, and what needs a
// response store refused; the rest is carried through as written.
func (rs Responses) Decode(r *http.Request) (api.Chat, []byte, *api.Error) {
	if ct := r.Header.Get("Content-Type"); !api.JSONType(ct) {
		return api.Chat{}, nil, invalid(codeInvalidValue, "",
			"Unsupported Content-Type '"+ct+"': send the request body as application/json.")
	}
	return api.DecodeLeased(r, rs.limits.MaxBodyBytes, rs.parseResponses)
}

// inputs are reused between requests, as chats are.
var inputs = sync.Pool{New: func() any { return new(wire.Chat) }}

// parseResponses validates a Responses request body, read in one pass
// (wire.ReadInput: input's items and their content parts with it).
func (rs Responses) parseResponses(body []byte) (api.Chat, *api.Error) {
	o := inputs.Get().(*wire.Chat)
	defer func() {
		o.Forget()
		inputs.Put(o)
	}()
	if err := wire.ReadInput(body, o); err != nil {
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
	mv := o.Member("model")
	if !mv.Given() {
		return chat, invalid(codeMissing, "model", "You must provide a model parameter.")
	}
	var aerr *api.Error
	if chat.Model, aerr = rs.model(mv); aerr != nil {
		return chat, aerr
	}
	for _, s := range stateful {
		if v := o.Member(s.name); s.refuse(v) {
			return chat, statefulError(s.name, s.why)
		}
	}
	var head [1]api.Message // the instructions, when given, come before the input
	heads := 0
	if v := o.Member("instructions"); v.Given() {
		if v.Kind() != wire.String {
			return chat, typeError("instructions", "a string", v)
		}
		head[0] = api.Message{Role: api.RoleSystem, Quoted: v.Raw} // as written: see api.Message
		if aerr = rs.charsWithin(&head[0], "instructions"); aerr != nil {
			return chat, aerr
		}
		heads = 1
	}
	if chat.Messages, aerr = rs.inputMessages(o, head[:heads]); aerr != nil {
		return chat, aerr
	}
	if heads > 0 {
		chat.Items = len(chat.Messages) - heads // the input items: instructions are not one
	}
	if v := o.Member("stream"); v.Given() {
		b, ok := v.Bool()
		if !ok {
			return chat, typeError("stream", "a boolean", v)
		}
		chat.Stream = b
	}
	if v := o.Member("stream_options"); v.Given() {
		if !chat.Stream {
			return chat, invalid(codeInvalidValue, "stream_options",
				"The 'stream_options' parameter is only allowed when 'stream' is enabled.")
		}
		if v.Kind() != wire.Object {
			return chat, typeError("stream_options", "an object", v)
		}
	}
	if v := o.Member("max_output_tokens"); v.Given() {
		n, aerr := integerIn(v, "max_output_tokens", 1, maxTokensLimit)
		if aerr != nil {
			return chat, aerr
		}
		chat.Sampling.MaxTokens = int(n)
	}
	if v := o.Member("temperature"); v.Given() {
		x, aerr := numberIn(v, "temperature", 0, api.MaxTemperature)
		if aerr != nil {
			return chat, aerr
		}
		chat.Sampling.Temperature = &x
	}
	if v := o.Member("top_p"); v.Given() {
		x, aerr := numberIn(v, "top_p", 0, 1)
		if aerr != nil {
			return chat, aerr
		}
		chat.Sampling.TopP = &x
	}
	if v := o.Member("tools"); v.Given() {
		if aerr := checkTools(v); aerr != nil {
			return chat, aerr
		}
	}
	if v := o.Member("text"); v.Given() {
		if aerr := checkText(v); aerr != nil {
			return chat, aerr
		}
	}
	if v := o.Member("user"); v.Given() {
		u, ok := v.Str()
		if !ok {
			return chat, typeError("user", "a string", v)
		}
		chat.User = u
	}
	// The members, copied out of the pooled reader (their spans point
	// into body, which the request keeps).
	members := append([]wire.Member(nil), o.Members...)
	w := &api.Wire{Format: api.FormatOpenAIResponses, Body: body, Object: o.Body, Members: members, ConvRead: true}
	w.ConvItems, w.ConvMedia = reserve.Read(o)
	switch rs.responsesModes[chat.Model] {
	case ResponsesTranslate:
		tw, u := translateResponses(body, members)
		if u != nil {
			return chat, u.apiError()
		}
		w = tw
	case ResponsesAuto:
		w.Translate = lazyResponsesTranslation(body, members)
	}
	chat.Wire = w
	return chat, nil
}

// statefulError refuses a member that needs a response store.
func statefulError(name, why string) *api.Error {
	return invalid(codeUnsupported, name, "Unsupported parameter: '"+name+"': "+why+
		", and this gateway keeps no responses (every request is served as with store: false). "+
		"Send the whole conversation as input instead.")
}

// inputMessages reads input, a string or an array of items, as messages
// for routing and the limits, left as written (api.Message), neither
// decoded nor joined: a message item's content string quoted, or its
// parts (a text part's text, any other part whole), and any other item (a
// function call, its output, reasoning) whole, under the role whose turn
// it is part of. They follow head, the messages before them, in one
// slice.
func (rs Responses) inputMessages(o *wire.Chat, head []api.Message) ([]api.Message, *api.Error) {
	switch v := o.Messages; v.Kind() {
	case wire.String:
		m := api.Message{Role: api.RoleUser, Quoted: v.Raw}
		if aerr := rs.charsWithin(&m, "input"); aerr != nil {
			return nil, aerr
		}
		return append(append(make([]api.Message, 0, len(head)+1), head...), m), nil
	case wire.Array:
	case wire.Absent, wire.Null:
		return nil, invalid(codeMissing, "input", "Missing required parameter: 'input'.")
	default:
		return nil, typeError("input", "a string or an array of input items", v)
	}
	if len(o.Items) == 0 {
		return nil, invalid(codeEmptyArray, "input", "Invalid 'input': empty array. Expected an array with minimum length 1, but got an empty array instead.")
	}
	msgs := append(make([]api.Message, 0, len(head)+min(len(o.Items), rs.limits.MaxMessages)), head...)
	for i := range o.Items {
		if i == rs.limits.MaxMessages {
			return nil, invalid(codeArrayTooLong, "input", fmt.Sprintf(
				"Invalid 'input': array too long. Expected an array with maximum length %d.", rs.limits.MaxMessages))
		}
		m, bad := rs.inputItem(o, &o.Items[i], i)
		if bad != nil {
			return nil, bad
		}
		msgs = append(msgs, m)
	}
	return msgs, nil
}

// inputItem reads item i of input, as o read it.
func (rs Responses) inputItem(o *wire.Chat, it *wire.ChatMessage, i int) (api.Message, *api.Error) {
	param := func(name string) string {
		p := "input[" + strconv.Itoa(i) + "]"
		if name != "" {
			p += "." + name
		}
		return p
	}
	item := it.Value
	if item.Kind() != wire.Object {
		return api.Message{}, typeError(param(""), "an object", item)
	}
	typ, role, content := it.Type, it.Role, it.Content
	t := "message"
	if typ.Given() {
		s, ok := typ.StrOf(itemTypes...)
		if !ok {
			return api.Message{}, typeError(param("type"), "a string", typ)
		}
		t = s
	}
	switch t {
	case "message":
	case "item_reference":
		return api.Message{}, invalid(codeUnsupported, param("type"), "Unsupported parameter: '"+param("type")+
			"': an item reference names an item a server stored, and this gateway keeps none (every request is served as with store: false). "+
			"Send the item itself instead.")
	case "function_call_output", "custom_tool_call_output", "computer_call_output", "local_shell_call_output", "mcp_approval_response":
		return api.Message{Role: api.RoleTool, Parts: [][]byte{item.Raw}}, nil
	default:
		// A call, reasoning: the model's turn, as written.
		return api.Message{Role: api.RoleAssistant, Parts: [][]byte{item.Raw}}, nil
	}
	r, ok := role.StrOf(api.RoleUser, api.RoleAssistant, api.RoleSystem, "developer")
	if !role.Given() {
		return api.Message{}, invalid(codeMissing, param("role"), "Missing required parameter: '"+param("role")+"'.")
	}
	if !ok {
		return api.Message{}, typeError(param("role"), "a string", role)
	}
	switch r {
	case api.RoleUser, api.RoleAssistant, api.RoleSystem:
	case "developer":
		r = api.RoleSystem
	default:
		return api.Message{}, invalid(codeInvalidValue, param("role"), "Invalid value: '"+r+
			"'. Supported values are: 'user', 'assistant', 'system' and 'developer'.")
	}
	m := api.Message{Role: r}
	switch content.Kind() {
	case wire.String:
		m.Quoted = content.Raw
	case wire.Array:
		parts := o.PartsOf(it)
		m.Parts = make([][]byte, len(parts)) // an empty array too: not a string
		for j, part := range parts {
			if part.Kind() != wire.Object {
				return api.Message{}, typeError(param("content")+"["+strconv.Itoa(j)+"]", "an object", part.Value)
			}
			if part.Text.Kind() == wire.String && (part.Type.Is("input_text") || part.Type.Is("output_text") || part.Type.Is("text")) {
				m.Parts[j] = part.Text.Raw
			} else {
				m.Parts[j] = part.Raw // an image, a file, a refusal: as written
			}
		}
	case wire.Absent, wire.Null:
		return api.Message{}, invalid(codeMissing, param("content"), "Missing required parameter: '"+param("content")+"'.")
	default:
		return api.Message{}, typeError(param("content"), "a string or an array of content parts", content)
	}
	// The parameter's name is built only for an error: a request has many
	// items.
	if n, over := rs.charsOver(&m, 0); over {
		return api.Message{}, rs.tooLong(param("content"), n)
	}
	return m, nil
}

// itemTypes are the types of input items clients send, which an item's
// type is compared with as written, without a copy.
var itemTypes = []string{"message", "function_call", "function_call_output", "reasoning",
	"custom_tool_call", "custom_tool_call_output", "item_reference"}

// checkTools checks that tools is an array of objects, each with a type.
func checkTools(v wire.Value) *api.Error {
	if v.Kind() != wire.Array {
		return typeError("tools", "an array", v)
	}
	var bad *api.Error
	_ = v.Elements(func(i int, tool wire.Value) bool {
		p := "tools[" + strconv.Itoa(i) + "]"
		if tool.Kind() != wire.Object {
			bad = typeError(p, "an object", tool)
			return false
		}
		var typ wire.Value
		_ = tool.Members(func(m wire.Member) bool {
			if m.Name == "type" {
				typ = m.Value
			}
			return true
		})
		switch {
		case !typ.Given():
			bad = invalid(codeMissing, p+".type", "Missing required parameter: '"+p+".type'.")
		case typ.Kind() != wire.String:
			bad = typeError(p+".type", "a string", typ)
		}
		return bad == nil
	})
	return bad
}

// checkText checks text.format's shape: an object with a type, and for
// json_schema a name and a schema object.
func checkText(v wire.Value) *api.Error {
	if v.Kind() != wire.Object {
		return typeError("text", "an object", v)
	}
	var format wire.Value
	_ = v.Members(func(m wire.Member) bool {
		if m.Name == "format" {
			format = m.Value
		}
		return true
	})
	if !format.Given() {
		return nil
	}
	if format.Kind() != wire.Object {
		return typeError("text.format", "an object", format)
	}
	var typ, name, schema wire.Value
	_ = format.Members(func(m wire.Member) bool {
		switch m.Name {
		case "type":
			typ = m.Value
		case "name":
			name = m.Value
		case "schema":
			schema = m.Value
		}
		return true
	})
	t, ok := typ.Str()
	switch {
	case !typ.Given():
		return invalid(codeMissing, "text.format.type", "Missing required parameter: 'text.format.type'.")
	case !ok:
		return typeError("text.format.type", "a string", typ)
	case t == "text", t == "json_object":
		return nil
	case t != "json_schema":
		return invalid(codeInvalidValue, "text.format.type", "Invalid value: '"+t+
			"'. Supported values are: 'text', 'json_object' and 'json_schema'.")
	case !name.Given():
		return invalid(codeMissing, "text.format.name", "Missing required parameter: 'text.format.name'.")
	case name.Kind() != wire.String:
		return typeError("text.format.name", "a string", name)
	case !schema.Given():
		return invalid(codeMissing, "text.format.schema", "Missing required parameter: 'text.format.schema'.")
	case schema.Kind() != wire.Object:
		return typeError("text.format.schema", "an object", schema)
	}
	return nil
}

// WriteAnswer implements gateway.Door: the replica's response object
// with the gateway's model name; else a response made of the replica's
// chat completion (a translated request: its reasoning, text and tool
// calls), or of the answer's text (see responses_answer.go).
func (rs Responses) WriteAnswer(w http.ResponseWriter, a *gateway.Answer) {
	switch a.RawFormat {
	case api.FormatOpenAIResponses:
		writeJSON(w, appendRenamed(make([]byte, 0, len(a.Raw)+len(a.Model)), a.Raw, a.RawModel, a.Model))
	case api.FormatOpenAIChat:
		writeJSON(w, appendResponseFromChat(make([]byte, 0, 512+len(a.Raw)), a))
	default:
		writeJSON(w, appendResponseFromText(make([]byte, 0, 512+len(a.Content)), a))
	}
}

// AppendDelta implements gateway.Door: the replica's event as it wrote it,
// under its name, with the gateway's model name in the response it
// carries. A translated request's chat completion chunks, or the text
// alone of a replica that answered a stream's request with one JSON
// object, are written as the Responses API's events (responsesStream).
func (rs Responses) AppendDelta(b []byte, a *gateway.Answer, d *protocols.Delta) []byte {
	switch {
	case d.Data != nil && d.Format != api.FormatOpenAIChat:
		a.Relayed = true
		if d.Event != "" {
			b = append(b, "event: "...)
			b = append(b, d.Event...)
			b = append(b, '\n')
		}
		b = append(b, "data: "...)
		b = appendRenamed(b, d.Data, d.Model, a.Model)
		return append(b, "\n\n"...)
	case d.Data != nil && d.Format == api.FormatOpenAIChat:
		return responsesStreamOf(a).appendChunk(b, a, d.Data)
	case d.Text != "":
		return responsesStreamOf(a).appendText(b, a, d.Text)
	}
	return b
}

// AppendEnd implements gateway.Door: nothing after the replica's events,
// whose last one ended the stream (the Responses API sends no [DONE]);
// after a translation, the end of the sequence: the open item's done
// events and response.completed with the whole response.
func (rs Responses) AppendEnd(b []byte, a *gateway.Answer) []byte {
	if a.Relayed {
		return b
	}
	s := responsesStreamOf(a)
	if !s.started && a.Content != "" {
		b = s.appendText(b, a, a.Content) // a text that came whole
	}
	return s.end(b, a)
}

// AppendStreamError implements gateway.Door: a failure after the stream
// started is the Responses API's error event, after which the stream
// ends; in a translated stream, response.failed with the response so far
// and the error, as the API ends a response that failed.
func (rs Responses) AppendStreamError(b []byte, a *gateway.Answer, err *api.Error) []byte {
	if s, ok := a.State.(*responsesStream); ok && s.started && !a.Relayed {
		return s.fail(b, a, err)
	}
	_, _, code := describe(err)
	b = append(b, "event: error\ndata: {\"type\":\"error\",\"code\":"...)
	b = appendNullableString(b, code)
	b = append(b, `,"message":`...)
	b = jsonx.String(b, message(err))
	b = append(b, `,"param":`...)
	b = appendNullableString(b, err.Param)
	return append(b, "}\n\n"...)
}

// serveStoredResponse answers the paths under /v1/responses/ that name a
// stored response (retrieve, delete, cancel, its input items): the
// gateway stores none.
func serveStoredResponse(w http.ResponseWriter, r *http.Request) {
	writeError(w, &api.Error{Status: http.StatusNotFound, Code: "not_found",
		Detail: "This gateway stores no responses (every request is served as with store: false): " +
			r.Method + " " + clipPath(r.URL.Path) + " has none to find."})
}

func clipPath(p string) string {
	if len(p) > 200 {
		return p[:200] + "..."
	}
	return p
}

var _ gateway.Door = Responses{}
