package openai

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"unicode/utf8"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/boundary/reserve"
	"github.com/llmedge/llmedge/wire"
)

// Bounds of the request fields that have none in the shared limits.
const (
	// maxStop bounds the stop sequences: OpenAI takes 4, vLLM any number;
	// 16 accepts every OpenAI client and bounds the matching a replica
	// does per token.
	maxStop = 16
	// maxTokensLimit bounds max_tokens to what every engine's integer
	// fields hold.
	maxTokensLimit = math.MaxInt32
	// maxChoices bounds n: each choice is a whole generation on the
	// replica (vLLM takes any number; OpenAI 128).
	maxChoices = 128
)

// decodeChat reads and validates a chat completions request body. The
// first problem found is reported, as OpenAI's API does, naming its field
// in param with OpenAI's path syntax ("messages[2].content").
//
// The body is carried through to the replica: the door reads what the
// gateway needs (the model, the messages for routing and limits, stream,
// the reply cap) and checks the shapes of what it reads, and every other
// member (tools, response_format, logprobs, n, penalties, a vendor's own)
// reaches the replica as the client wrote it. A replica whose protocol
// cannot carry a member refuses it, naming it (see package protocols).
func (f *Door) decodeChat(r *http.Request) (api.Chat, []byte, *api.Error) {
	if ct := r.Header.Get("Content-Type"); !api.JSONType(ct) {
		return api.Chat{}, nil, invalid(codeInvalidValue, "",
			"Unsupported Content-Type '"+ct+"': send the request body as application/json.")
	}
	return api.DecodeLeased(r, f.limits.MaxBodyBytes, f.parse)
}

// chats are reused between requests: reading a body then allocates only
// the strings kept.
var chats = sync.Pool{New: func() any { return new(wire.Chat) }}

// parse validates a JSON body, read by wire.ReadChat, into a Chat.
func (f *Door) parse(body []byte) (api.Chat, *api.Error) {
	c := chats.Get().(*wire.Chat)
	defer func() {
		c.Forget()
		chats.Put(c)
	}()
	if err := wire.ReadChat(body, c); err != nil {
		var we *wire.Error
		if errors.As(err, &we) && we.Duplicate {
			p := wire.PathString(we.Path)
			return api.Chat{}, invalid(codeDuplicate, p,
				"Duplicate parameter: '"+p+"' is given more than once in the request body; give each parameter once.")
		}
		return api.Chat{}, invalid(codeInvalidJSON, "",
			"We could not parse the JSON body of your request: it is not valid JSON.")
	}
	if c.Body.Kind() != wire.Object {
		return api.Chat{}, invalid(codeInvalidType, "", "The request body must be a JSON object.")
	}
	chat, aerr := f.validate(c)
	if aerr != nil {
		return chat, aerr
	}
	// What a protocol needs to carry the body through, copied out of the
	// pooled reader (the spans point into body, which the request keeps).
	w := &api.Wire{Format: api.FormatOpenAIChat, Body: body, Object: c.Body,
		Members: append([]wire.Member(nil), c.Members...), Messages: make([]wire.Value, len(c.Items)), ConvRead: true}
	w.ConvItems, w.ConvMedia = reserve.Read(c)
	for i := range c.Items {
		w.Messages[i] = c.Items[i].Value
	}
	chat.Wire = w
	return chat, nil
}

// validate judges the members c holds.
func (f *Door) validate(c *wire.Chat) (api.Chat, *api.Error) {
	var chat api.Chat
	// model: required, one of the configured model types.
	if !c.Model.Given() {
		return chat, invalid(codeMissing, "model", "You must provide a model parameter.")
	}
	model, aerr := f.model(c.Model)
	if aerr != nil {
		return chat, aerr
	}
	chat.Model = model

	if !c.Messages.Given() {
		return chat, invalid(codeMissing, "messages", "Missing required parameter: 'messages'.")
	}
	msgs, aerr := f.parseMessages(c)
	if aerr != nil {
		return chat, aerr
	}
	chat.Messages = msgs

	// The other fields, in a fixed order so that the error reported is
	// always the same one; refused members last, by name.
	s := &chat.Sampling
	if c.Stream.Given() {
		b, ok := c.Stream.Bool()
		if !ok {
			return chat, typeError("stream", "a boolean", c.Stream)
		}
		chat.Stream = b
	}
	if c.Temperature.Given() {
		v, aerr := numberIn(c.Temperature, "temperature", 0, api.MaxTemperature)
		if aerr != nil {
			return chat, aerr
		}
		s.Temperature = &v
	}
	if c.TopP.Given() {
		v, aerr := numberIn(c.TopP, "top_p", 0, 1)
		if aerr != nil {
			return chat, aerr
		}
		s.TopP = &v
	}
	// max_completion_tokens replaced max_tokens in OpenAI's API; when a
	// client sends both, the newer one wins (as in vLLM).
	if c.MaxTokens.Given() {
		n, aerr := integerIn(c.MaxTokens, "max_tokens", 1, maxTokensLimit)
		if aerr != nil {
			return chat, aerr
		}
		s.MaxTokens = int(n)
	}
	if c.MaxCompletionTokens.Given() {
		n, aerr := integerIn(c.MaxCompletionTokens, "max_completion_tokens", 1, maxTokensLimit)
		if aerr != nil {
			return chat, aerr
		}
		s.MaxTokens = int(n)
	}
	if c.Stop.Given() {
		stop, aerr := f.parseStop(c)
		if aerr != nil {
			return chat, aerr
		}
		s.Stop = stop
	}
	if c.Seed.Given() {
		n, aerr := integerIn(c.Seed, "seed", math.MinInt64, math.MaxInt64)
		if aerr != nil {
			return chat, aerr
		}
		s.Seed = &n
	}
	if c.User.Given() {
		u, ok := c.User.Str()
		if !ok {
			return chat, typeError("user", "a string", c.User)
		}
		chat.User = u
	}
	if c.N.Given() {
		if _, aerr := integerIn(c.N, "n", 1, maxChoices); aerr != nil {
			return chat, aerr
		}
	}
	if c.StreamOptions.Given() {
		if !chat.Stream {
			return chat, invalid(codeInvalidValue, "stream_options",
				"The 'stream_options' parameter is only allowed when 'stream' is enabled.")
		}
		include, aerr := parseStreamOptions(c)
		if aerr != nil {
			return chat, aerr
		}
		chat.IncludeUsage = include
	}
	return chat, nil
}

// model is the configured model v names.
func (f *Door) model(v wire.Value) (string, *api.Error) {
	for _, m := range f.models {
		if v.Is(m) {
			return m, nil // the usual spelling, compared without a copy
		}
	}
	model, ok := v.Str()
	if !ok {
		return "", typeError("model", "a string", v)
	}
	if i := slices.Index(f.models, model); i >= 0 {
		return f.models[i], nil
	}
	if f.names != nil && f.names(model) {
		return model, nil
	}
	return "", modelNotFound(model)
}

func (f *Door) parseMessages(c *wire.Chat) ([]api.Message, *api.Error) {
	if c.Messages.Kind() != wire.Array {
		return nil, typeError("messages", "an array", c.Messages)
	}
	n := len(c.Items)
	if n == 0 {
		return nil, invalid(codeEmptyArray, "messages",
			"Invalid 'messages': empty array. Expected an array with minimum length 1, but got an empty array instead.")
	}
	if max := f.limits.MaxMessages; n > max {
		return nil, invalid(codeArrayTooLong, "messages", fmt.Sprintf(
			"Invalid 'messages': array too long. Expected an array with maximum length %d, but got an array with length %d instead.",
			max, n))
	}
	msgs := make([]api.Message, n)
	for i := range c.Items {
		var aerr *api.Error
		if msgs[i], aerr = f.parseMessage(c, i); aerr != nil {
			return nil, aerr
		}
	}
	return msgs, nil
}

// messageParam names message i's field name in OpenAI's path syntax;
// built only for an error.
func messageParam(i int, name string) string {
	p := "messages[" + strconv.Itoa(i) + "]"
	if name != "" {
		p += "." + name
	}
	return p
}

func (f *Door) parseMessage(c *wire.Chat, i int) (api.Message, *api.Error) {
	m := &c.Items[i]
	if m.Kind() != wire.Object {
		return api.Message{}, typeError(messageParam(i, ""), "an object", m.Value)
	}
	r, aerr := parseRole(m.Role, i)
	if aerr != nil {
		return api.Message{}, aerr
	}
	msg, aerr := f.parseContent(c, m, i, r)
	if aerr != nil {
		return api.Message{}, aerr
	}
	// A participant's name and an assistant's refusal text change nothing
	// in what the replica is asked, but must be what OpenAI says they are.
	for _, fv := range []struct {
		name string
		val  wire.Value
	}{{"name", m.Name}, {"refusal", m.Refusal}} {
		if fv.val.Given() && fv.val.Kind() != wire.String {
			return api.Message{}, typeError(messageParam(i, fv.name), "a string", fv.val)
		}
	}
	if !m.ToolCalls.Given() && !m.FunctionCall.Given() {
		return msg, nil
	}
	content := msg.Text() // joined with the calls below
	if m.ToolCalls.Given() {
		if m.ToolCalls.Kind() != wire.Array {
			return api.Message{}, typeError(messageParam(i, "tool_calls"), "an array", m.ToolCalls)
		}
		// A call's name and arguments are part of the conversation a
		// replica caches: routing sees them as written.
		if string(m.ToolCalls.Raw) != "[]" {
			content += string(m.ToolCalls.Raw)
		}
	}
	if m.FunctionCall.Given() {
		content += string(m.FunctionCall.Raw)
	}
	return api.Message{Role: r, Content: content}, nil
}

// parseRole takes OpenAI's roles. "developer" (OpenAI's new name for
// system instructions) counts as "system" for routing and for the
// protocols that translate the request (a body carried through keeps it).
func parseRole(raw wire.Value, i int) (string, *api.Error) {
	// The usual roles are compared raw, without decoding.
	switch {
	case raw.Is(api.RoleUser):
		return api.RoleUser, nil
	case raw.Is(api.RoleAssistant):
		return api.RoleAssistant, nil
	case raw.Is(api.RoleSystem):
		return api.RoleSystem, nil
	case raw.Is(api.RoleTool):
		return api.RoleTool, nil
	}
	param := messageParam(i, "role")
	if !raw.Given() {
		return "", invalid(codeMissing, param, "Missing required parameter: '"+param+"'.")
	}
	role, ok := raw.Str()
	if !ok {
		return "", typeError(param, "a string", raw)
	}
	switch role {
	case api.RoleSystem, api.RoleUser, api.RoleAssistant:
		return role, nil // spelled with escapes
	case "developer":
		return api.RoleSystem, nil
	case api.RoleTool, "function":
		return role, nil
	}
	return "", invalid(codeInvalidValue, param, "Invalid value: '"+role+
		"'. Supported values are: 'system', 'developer', 'user', 'assistant', 'tool' and 'function'.")
}

// parseContent takes a string, left as the client wrote it (quoted: see
// api.Message), or an array of content parts, left as written too
// (api.Message.Parts: text parts' texts and other parts, images, audio,
// files, which routing sees as written), neither decoded nor joined. An
// assistant's content may be null (a message of tool calls alone).
func (f *Door) parseContent(c *wire.Chat, m *wire.ChatMessage, i int, role string) (api.Message, *api.Error) {
	msg := api.Message{Role: role}
	switch m.Content.Kind() {
	case wire.String:
		msg.Quoted = m.Content.Raw
	case wire.Array:
		parts := c.PartsOf(m)
		msg.Parts = make([][]byte, len(parts))
		for j, part := range parts {
			raw, aerr := contentPart(part, i, j)
			if aerr != nil {
				return api.Message{}, aerr
			}
			msg.Parts[j] = raw
		}
	default:
		param := messageParam(i, "content")
		if !m.Content.Given() {
			if role == api.RoleAssistant && (m.ToolCalls.Given() || m.FunctionCall.Given() || m.Refusal.Given()) {
				return msg, nil
			}
			return api.Message{}, invalid(codeMissing, param, "Missing required parameter: '"+param+"'.")
		}
		return api.Message{}, typeError(param, "a string or an array of content parts", m.Content)
	}
	// The limit is on text: an image's bytes are bounded by the body's.
	// Characters are counted (decoding) only past the bound.
	max := f.limits.MaxContentChars
	if n, over := msg.CharsOver(max); over {
		param := messageParam(i, "content")
		return api.Message{}, invalid(codeStringTooLong, param, fmt.Sprintf(
			"Invalid '%s': string too long. Expected a string with maximum length %d, but got a string with length %d instead.",
			param, max, n))
	}
	return msg, nil
}

// contentPart reads part j of message i's content: a text part's text,
// a JSON string as written, or another part as written, an object.
// Members beside type and text (a client's cache hints) are the
// replica's to read.
func contentPart(part wire.ChatPart, i, j int) (raw []byte, aerr *api.Error) {
	param := func(name string) string {
		p := messageParam(i, "content") + "[" + strconv.Itoa(j) + "]"
		if name != "" {
			p += "." + name
		}
		return p
	}
	if part.Kind() != wire.Object {
		return nil, typeError(param(""), "an object", part.Value)
	}
	if typ := part.Type; !typ.Is("text") {
		t, ok := typ.Str()
		switch {
		case !typ.Given():
			return nil, invalid(codeMissing, param("type"), "Missing required parameter: '"+param("type")+"'.")
		case !ok:
			return nil, typeError(param("type"), "a string", typ)
		case t != "text":
			return part.Raw, nil // an image, audio or file part, as written
		}
	}
	if part.Text.Kind() != wire.String {
		if !part.Text.Given() {
			return nil, invalid(codeMissing, param("text"), "Missing required parameter: '"+param("text")+"'.")
		}
		return nil, typeError(param("text"), "a string", part.Text)
	}
	return part.Text.Raw, nil
}

// parseStop takes a string or an array of strings.
func (f *Door) parseStop(c *wire.Chat) ([]string, *api.Error) {
	var stop []string
	isArray := c.Stop.Kind() == wire.Array
	switch {
	case c.Stop.Kind() == wire.String:
		stop = []string{c.Stop.Text()}
	case isArray:
		if n := len(c.Stops); n > maxStop {
			return nil, invalid(codeArrayTooLong, "stop", fmt.Sprintf(
				"Invalid 'stop': array too long. Expected an array with maximum length %d, but got an array with length %d instead.",
				maxStop, n))
		}
		for i, item := range c.Stops {
			s, ok := item.Str()
			if !ok {
				return nil, typeError("stop["+strconv.Itoa(i)+"]", "a string", item)
			}
			stop = append(stop, s)
		}
	default:
		return nil, typeError("stop", "a string or an array of strings", c.Stop)
	}
	for i, s := range stop {
		param := "stop"
		if isArray {
			param += "[" + strconv.Itoa(i) + "]"
		}
		switch {
		case s == "":
			return nil, invalid(codeInvalidValue, param, "Invalid '"+param+"': a stop sequence must not be empty.")
		case utf8.RuneCountInString(s) > f.limits.MaxContentChars:
			return nil, invalid(codeStringTooLong, param, "Invalid '"+param+"': string too long.")
		}
	}
	return stop, nil
}

// parseStreamOptions reads include_usage; OpenAI's include_obfuscation
// (padding against side channels on its own service) is checked as a
// boolean, other options are the replica's.
func parseStreamOptions(c *wire.Chat) (bool, *api.Error) {
	if c.StreamOptions.Kind() != wire.Object {
		return false, typeError("stream_options", "an object", c.StreamOptions)
	}
	var include bool
	for _, o := range c.Options {
		if !o.Known || !o.Value.Given() {
			continue // a replica's own option (vLLM's continuous_usage_stats) is its to read
		}
		b, ok := o.Value.Bool()
		if !ok {
			return false, typeError("stream_options."+o.Name, "a boolean", o.Value)
		}
		if o.Name == "include_usage" {
			include = b
		}
	}
	return include, nil
}

// numberIn reads a number in [min, max].
func numberIn(raw wire.Value, param string, min, max float64) (float64, *api.Error) {
	if raw.Kind() != wire.Number {
		return 0, typeError(param, "a number", raw)
	}
	v, err := strconv.ParseFloat(string(raw.Raw), 64)
	if err != nil || v < min || v > max {
		return 0, invalid(codeInvalidValue, param, fmt.Sprintf(
			"Invalid '%s': must be between %s and %s, got %s.", param, fmtNum(min), fmtNum(max), raw.Clip(32)))
	}
	return v, nil
}

// integerIn reads a whole number in [min, max]; 5.0 and 5e0 are not one,
// as OpenAI's API judges them.
func integerIn(raw wire.Value, param string, min, max int64) (int64, *api.Error) {
	if raw.Kind() != wire.Number {
		return 0, typeError(param, "an integer", raw)
	}
	n, err := strconv.ParseInt(string(raw.Raw), 10, 64)
	switch {
	case errors.Is(err, strconv.ErrRange):
		return 0, invalid(codeInvalidValue, param, "Invalid '"+param+"': the integer "+raw.Clip(32)+" is out of range.")
	case err != nil:
		return 0, typeError(param, "an integer", raw)
	}
	if n < min || n > max {
		if min == 1 && n < 1 {
			return 0, invalid(codeInvalidValue, param, fmt.Sprintf("Invalid '%s': must be at least 1, got %d.", param, n))
		}
		return 0, invalid(codeInvalidValue, param, fmt.Sprintf("Invalid '%s': must be between %d and %d, got %d.", param, min, max, n))
	}
	return n, nil
}

// typeError is a 400 naming the field, what it should be and what it was.
func typeError(param, want string, raw wire.Value) *api.Error {
	return invalid(codeInvalidType, param, "Invalid type for '"+param+"': expected "+want+", but got "+kind(raw)+" instead.")
}

// kind names a JSON value's type, as OpenAI's messages do.
func kind(raw wire.Value) string {
	switch raw.Kind() {
	case wire.String:
		return "a string"
	case wire.Object:
		return "an object"
	case wire.Array:
		return "an array"
	case wire.True, wire.False:
		return "a boolean"
	case wire.Null:
		return "null"
	}
	if bytes.ContainsAny(raw.Raw, ".eE") {
		return "a decimal"
	}
	return "an integer"
}

func fmtNum(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
