package openai

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"mime"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/llmedge/llmedge/api"
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
)

// decodeChat reads and validates a chat completions request body. The
// first problem found is reported, as OpenAI's API does, naming its field
// in param with OpenAI's path syntax ("messages[2].content").
//
// Fields the gateway cannot honour are refused rather than ignored, so a
// client never gets an answer that silently dropped what it asked for:
// unknown fields (OpenAI refuses them too), n > 1, tools, image parts.
// Fields whose value asks for nothing (tools: [], logprobs: false,
// presence_penalty: 0) are accepted, because some clients always send them.
func (f *Door) decodeChat(r *http.Request) (api.Chat, []byte, *api.Error) {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || !(mt == "application/json" || strings.HasSuffix(mt, "+json")) {
			return api.Chat{}, nil, invalid(codeInvalidValue, "",
				"Unsupported Content-Type '"+ct+"': send the request body as application/json.")
		}
	}
	body, aerr := api.ReadBody(r, f.limits.MaxBodyBytes)
	if aerr != nil {
		return api.Chat{}, nil, aerr
	}
	chat, aerr := f.parse(body)
	return chat, body, aerr
}

// chats are reused between requests: reading a body then allocates only
// the strings kept.
var chats = sync.Pool{New: func() any { return new(wire.Chat) }}

// parse validates a JSON body, read by wire.ReadChat, into a Chat.
func (f *Door) parse(body []byte) (api.Chat, *api.Error) {
	c := chats.Get().(*wire.Chat)
	defer func() {
		// Keep the slices, not the body they point into.
		clear(c.Members)
		clear(c.Items)
		clear(c.Parts)
		clear(c.Stops)
		clear(c.Options)
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
	return f.validate(c)
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
		b, ok := boolValue(c.Stream)
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
		n, aerr := integerIn(c.N, "n", 1, math.MaxInt32)
		if aerr != nil {
			return chat, aerr
		}
		if n != 1 {
			return chat, invalid(codeUnsupportedV, "n",
				"Unsupported value: 'n' must be 1: this gateway generates one choice per request.")
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
	// Members the gateway does not read are refused, unless they are
	// inert ones whose value asks for nothing.
	var bad []string
	for _, m := range c.Members {
		if m.Known {
			continue
		}
		if accept, ok := inert[m.Name]; ok && (m.Value.IsNull() || accept(m.Value)) {
			continue
		}
		bad = append(bad, m.Name)
	}
	if len(bad) > 0 {
		sort.Strings(bad)
		name := bad[0]
		if _, ok := inert[name]; ok {
			return chat, invalid(codeUnsupported, name,
				"Unsupported parameter: '"+name+"' is not supported by this gateway; leave it out.")
		}
		return chat, invalid(codeUnknown, name, "Unrecognized request argument supplied: "+name)
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
	return "", modelNotFound(model)
}

// inert are the OpenAI fields the gateway does not pass on, each with the
// values that ask for nothing and are therefore accepted (null always is).
// Any other value is refused as unsupported.
var inert = map[string]func(wire.Value) bool{
	"frequency_penalty":   isZero,
	"presence_penalty":    isZero,
	"logprobs":            isFalse,
	"top_logprobs":        isZero,
	"logit_bias":          isEmptyObject,
	"tools":               isEmptyArray,
	"functions":           isEmptyArray,
	"tool_choice":         oneOf("none", "auto"),
	"function_call":       oneOf("none", "auto"),
	"parallel_tool_calls": isBool,
	"response_format":     isTextFormat,
	"store":               isFalse,
	"metadata":            isObject,
	"service_tier":        oneOf("auto", "default"),
	"modalities":          isTextModality,
	"reasoning_effort":    never,
	"verbosity":           never,
	"audio":               never,
	"prediction":          never,
	"web_search_options":  never,
	// Identifiers and hints that change nothing in the answer.
	"safety_identifier": isString,
	"prompt_cache_key":  isString,
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
	content, aerr := f.parseContent(c, m, i)
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
	for _, fv := range []struct {
		name string
		val  wire.Value
	}{{"tool_calls", m.ToolCalls}, {"function_call", m.FunctionCall}} {
		if fv.val.Given() && !isEmptyArray(fv.val) {
			p := messageParam(i, fv.name)
			return api.Message{}, invalid(codeUnsupported, p,
				"Unsupported parameter: '"+p+"': this gateway does not support tool calls.")
		}
	}
	if m.Other.Value.Raw != nil {
		p := messageParam(i, m.Other.Name)
		return api.Message{}, invalid(codeUnknown, p, "Unrecognized request argument supplied: "+p)
	}
	return api.Message{Role: r, Content: content}, nil
}

// parseRole takes OpenAI's roles; "developer" (OpenAI's new name for
// system instructions) is sent to replicas as "system", the role their
// chat templates know.
func parseRole(raw wire.Value, i int) (string, *api.Error) {
	// The usual roles are compared raw, without decoding.
	switch {
	case raw.Is(api.RoleUser):
		return api.RoleUser, nil
	case raw.Is(api.RoleAssistant):
		return api.RoleAssistant, nil
	case raw.Is(api.RoleSystem):
		return api.RoleSystem, nil
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
	case "tool", "function":
		return "", invalid(codeUnsupportedV, param,
			"Unsupported value: '"+param+"' does not support '"+role+"': this gateway does not support tool calls.")
	}
	return "", invalid(codeInvalidValue, param, "Invalid value: '"+role+
		"'. Supported values are: 'system', 'developer', 'user' and 'assistant'.")
}

// parseContent takes a string, or an array of text parts, joined with
// newlines (as vLLM joins them for a chat template). Other parts (images,
// audio, files) are refused: the replicas behind this gateway are asked
// for text only.
func (f *Door) parseContent(c *wire.Chat, m *wire.ChatMessage, i int) (string, *api.Error) {
	var content string
	switch m.Content.Kind() {
	case wire.String:
		content = m.Content.Text()
	case wire.Array:
		var b strings.Builder
		for j, part := range c.PartsOf(m) {
			text, aerr := contentPart(part, i, j)
			if aerr != nil {
				return "", aerr
			}
			if j > 0 {
				b.WriteByte('\n')
			}
			b.WriteString(text)
		}
		content = b.String()
	default:
		param := messageParam(i, "content")
		if !m.Content.Given() {
			return "", invalid(codeMissing, param, "Missing required parameter: '"+param+"'.")
		}
		return "", typeError(param, "a string or an array of content parts", m.Content)
	}
	if max := f.limits.MaxContentChars; len(content) > max && utf8.RuneCountInString(content) > max {
		param := messageParam(i, "content")
		return "", invalid(codeStringTooLong, param, fmt.Sprintf(
			"Invalid '%s': string too long. Expected a string with maximum length %d, but got a string with length %d instead.",
			param, max, utf8.RuneCountInString(content)))
	}
	return content, nil
}

// contentPart reads part j of message i's content: a text part. Members
// beside type and text (a client's cache hints) are ignored.
func contentPart(part wire.ChatPart, i, j int) (string, *api.Error) {
	param := func(name string) string {
		p := messageParam(i, "content") + "[" + strconv.Itoa(j) + "]"
		if name != "" {
			p += "." + name
		}
		return p
	}
	if part.Kind() != wire.Object {
		return "", typeError(param(""), "an object", part.Value)
	}
	if typ := part.Type; !typ.Is("text") {
		t, ok := typ.Str()
		switch {
		case !typ.Given():
			return "", invalid(codeMissing, param("type"), "Missing required parameter: '"+param("type")+"'.")
		case !ok:
			return "", typeError(param("type"), "a string", typ)
		case t != "text":
			return "", invalid(codeUnsupportedV, param("type"), "Unsupported value: content parts of type '"+t+
				"' are not supported: this gateway serves text-only models; send text parts only.")
		}
	}
	s, ok := part.Text.Str()
	if !ok {
		if !part.Text.Given() {
			return "", invalid(codeMissing, param("text"), "Missing required parameter: '"+param("text")+"'.")
		}
		return "", typeError(param("text"), "a string", part.Text)
	}
	return s, nil
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
// (padding against side channels on its own service) is accepted and has
// nothing to do here.
func parseStreamOptions(c *wire.Chat) (bool, *api.Error) {
	if c.StreamOptions.Kind() != wire.Object {
		return false, typeError("stream_options", "an object", c.StreamOptions)
	}
	var include bool
	for _, o := range c.Options {
		if !o.Known {
			return false, invalid(codeUnknown, "stream_options."+o.Name, "Unrecognized request argument supplied: stream_options."+o.Name)
		}
		if !o.Value.Given() {
			continue
		}
		b, ok := boolValue(o.Value)
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
			"Invalid '%s': must be between %s and %s, got %s.", param, fmtNum(min), fmtNum(max), clip(raw)))
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
		return 0, invalid(codeInvalidValue, param, "Invalid '"+param+"': the integer "+clip(raw)+" is out of range.")
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

// clip is a short rendering of a value for a message.
func clip(raw wire.Value) string {
	if len(raw.Raw) > 32 {
		return string(raw.Raw[:32]) + "..."
	}
	return string(raw.Raw)
}

func fmtNum(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

// boolValue takes JSON's true and false only: OpenAI's API does not read
// "yes" or 1 as a boolean.
func boolValue(raw wire.Value) (bool, bool) {
	switch raw.Kind() {
	case wire.True:
		return true, true
	case wire.False:
		return false, true
	}
	return false, false
}

// Acceptors of inert fields' values.

func isZero(raw wire.Value) bool {
	if raw.Kind() != wire.Number {
		return false
	}
	v, err := strconv.ParseFloat(string(raw.Raw), 64)
	return err == nil && v == 0
}

func isFalse(raw wire.Value) bool { return raw.Kind() == wire.False }

func isBool(raw wire.Value) bool { _, ok := boolValue(raw); return ok }

func isString(raw wire.Value) bool { return raw.Kind() == wire.String }

func isObject(raw wire.Value) bool { return raw.Kind() == wire.Object }

func isEmptyObject(raw wire.Value) bool {
	empty := true
	err := raw.Members(func(wire.Member) bool { empty = false; return false })
	return raw.Kind() == wire.Object && empty && err == nil
}

func isEmptyArray(raw wire.Value) bool {
	empty := true
	err := raw.Elements(func(int, wire.Value) bool { empty = false; return false })
	return raw.Kind() == wire.Array && empty && err == nil
}

func never(wire.Value) bool { return false }

func oneOf(values ...string) func(wire.Value) bool {
	return func(raw wire.Value) bool {
		s, ok := raw.Str()
		return ok && slices.Contains(values, s)
	}
}

// isTextFormat accepts response_format {"type":"text"}, the default.
func isTextFormat(raw wire.Value) bool {
	n, text := 0, false
	err := raw.Members(func(m wire.Member) bool {
		n++
		text = m.Name == "type" && m.Value.Is("text")
		return true
	})
	return raw.Kind() == wire.Object && err == nil && n == 1 && text
}

// isTextModality accepts modalities ["text"], the default.
func isTextModality(raw wire.Value) bool {
	n, text := 0, false
	err := raw.Elements(func(_ int, v wire.Value) bool {
		n++
		text = v.Is("text")
		return true
	})
	return raw.Kind() == wire.Array && err == nil && n == 1 && text
}
