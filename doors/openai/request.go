package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"mime"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/llmedge/llmedge/api"
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

// fields are the members of a request body parse reads, raw (nil when
// absent; a repeated member's last value, as encoding/json keeps).
type fields struct {
	model, messages, stream, streamOptions, temperature, topP, maxTokens,
	maxCompletionTokens, stop, seed, user, n []byte
	// bad are the members refused whatever else the body holds: unknown
	// ones, and inert ones with a value that asks for something.
	bad []string
}

func (fl *fields) set(key, val []byte) bool {
	name := key[1 : len(key)-1] // compared without a copy...
	if hasByte(name, '\\') {
		name = []byte(keyName(key)) // ...unless spelled with escapes
	}
	switch string(name) {
	case "model":
		fl.model = val
	case "messages":
		fl.messages = val
	case "stream":
		fl.stream = val
	case "stream_options":
		fl.streamOptions = val
	case "temperature":
		fl.temperature = val
	case "top_p":
		fl.topP = val
	case "max_tokens":
		fl.maxTokens = val
	case "max_completion_tokens":
		fl.maxCompletionTokens = val
	case "stop":
		fl.stop = val
	case "seed":
		fl.seed = val
	case "user":
		fl.user = val
	case "n":
		fl.n = val
	default:
		if accept, ok := inert[string(name)]; ok && (isNull(val) || accept(val)) {
			return true
		}
		fl.bad = append(fl.bad, string(name))
	}
	return true
}

// parse validates a JSON body into a Chat.
func (f *Door) parse(body []byte) (api.Chat, *api.Error) {
	var chat api.Chat
	if !json.Valid(body) {
		return chat, invalid(codeInvalidJSON, "",
			"We could not parse the JSON body of your request: it is not valid JSON.")
	}
	if firstByte(body) != '{' {
		return chat, invalid(codeInvalidType, "", "The request body must be a JSON object.")
	}
	var fl fields
	eachMember(body, fl.set)

	// model: required, one of the configured model types.
	if !present(fl.model) {
		return chat, invalid(codeMissing, "model", "You must provide a model parameter.")
	}
	model, ok := stringValue(fl.model)
	if !ok {
		return chat, typeError("model", "a string", fl.model)
	}
	if !slices.Contains(f.models, model) {
		return chat, modelNotFound(model)
	}
	chat.Model = model

	if !present(fl.messages) {
		return chat, invalid(codeMissing, "messages", "Missing required parameter: 'messages'.")
	}
	msgs, aerr := f.parseMessages(fl.messages)
	if aerr != nil {
		return chat, aerr
	}
	chat.Messages = msgs

	// The other fields, in a fixed order so that the error reported is
	// always the same one; refused members last, by name.
	s := &chat.Sampling
	if present(fl.stream) {
		b, ok := boolValue(fl.stream)
		if !ok {
			return chat, typeError("stream", "a boolean", fl.stream)
		}
		chat.Stream = b
	}
	if present(fl.temperature) {
		v, aerr := numberIn(fl.temperature, "temperature", 0, api.MaxTemperature)
		if aerr != nil {
			return chat, aerr
		}
		s.Temperature = &v
	}
	if present(fl.topP) {
		v, aerr := numberIn(fl.topP, "top_p", 0, 1)
		if aerr != nil {
			return chat, aerr
		}
		s.TopP = &v
	}
	// max_completion_tokens replaced max_tokens in OpenAI's API; when a
	// client sends both, the newer one wins (as in vLLM).
	if present(fl.maxTokens) {
		n, aerr := integerIn(fl.maxTokens, "max_tokens", 1, maxTokensLimit)
		if aerr != nil {
			return chat, aerr
		}
		s.MaxTokens = int(n)
	}
	if present(fl.maxCompletionTokens) {
		n, aerr := integerIn(fl.maxCompletionTokens, "max_completion_tokens", 1, maxTokensLimit)
		if aerr != nil {
			return chat, aerr
		}
		s.MaxTokens = int(n)
	}
	if present(fl.stop) {
		stop, aerr := f.parseStop(fl.stop)
		if aerr != nil {
			return chat, aerr
		}
		s.Stop = stop
	}
	if present(fl.seed) {
		n, aerr := integerIn(fl.seed, "seed", math.MinInt64, math.MaxInt64)
		if aerr != nil {
			return chat, aerr
		}
		s.Seed = &n
	}
	if present(fl.user) {
		u, ok := stringValue(fl.user)
		if !ok {
			return chat, typeError("user", "a string", fl.user)
		}
		chat.User = u
	}
	if present(fl.n) {
		n, aerr := integerIn(fl.n, "n", 1, math.MaxInt32)
		if aerr != nil {
			return chat, aerr
		}
		if n != 1 {
			return chat, invalid(codeUnsupportedV, "n",
				"Unsupported value: 'n' must be 1: this gateway generates one choice per request.")
		}
	}
	if present(fl.streamOptions) {
		if !chat.Stream {
			return chat, invalid(codeInvalidValue, "stream_options",
				"The 'stream_options' parameter is only allowed when 'stream' is enabled.")
		}
		include, aerr := parseStreamOptions(fl.streamOptions)
		if aerr != nil {
			return chat, aerr
		}
		chat.IncludeUsage = include
	}
	if len(fl.bad) > 0 {
		sort.Strings(fl.bad)
		name := fl.bad[0]
		if _, ok := inert[name]; ok {
			return chat, invalid(codeUnsupported, name,
				"Unsupported parameter: '"+name+"' is not supported by this gateway; leave it out.")
		}
		return chat, invalid(codeUnknown, name, "Unrecognized request argument supplied: "+name)
	}
	return chat, nil
}

// inert are the OpenAI fields the gateway does not pass on, each with the
// values that ask for nothing and are therefore accepted (null always is).
// Any other value is refused as unsupported.
var inert = map[string]func([]byte) bool{
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

func (f *Door) parseMessages(raw []byte) ([]api.Message, *api.Error) {
	if firstByte(raw) != '[' {
		return nil, typeError("messages", "an array", raw)
	}
	n := countElements(raw)
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
	var aerr *api.Error
	eachElement(raw, func(i int, item []byte) bool {
		msgs[i], aerr = f.parseMessage(i, item)
		return aerr == nil
	})
	if aerr != nil {
		return nil, aerr
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

func (f *Door) parseMessage(i int, item []byte) (api.Message, *api.Error) {
	if firstByte(item) != '{' {
		return api.Message{}, typeError(messageParam(i, ""), "an object", item)
	}
	var role, content, name, refusal, toolCalls, functionCall []byte
	var unknown string
	eachMember(item, func(key, val []byte) bool {
		switch {
		case keyIs(key, "role"):
			role = val
		case keyIs(key, "content"):
			content = val
		case keyIs(key, "name"):
			name = val
		case keyIs(key, "refusal"):
			refusal = val
		case keyIs(key, "tool_calls"):
			toolCalls = val
		case keyIs(key, "function_call"):
			functionCall = val
		default:
			if unknown == "" {
				unknown = keyName(key)
			}
		}
		return true
	})
	r, aerr := parseRole(role, i)
	if aerr != nil {
		return api.Message{}, aerr
	}
	c, aerr := f.parseContent(content, i)
	if aerr != nil {
		return api.Message{}, aerr
	}
	// A participant's name and an assistant's refusal text change nothing
	// in what the replica is asked, but must be what OpenAI says they are.
	for _, fv := range []struct {
		name string
		val  []byte
	}{{"name", name}, {"refusal", refusal}} {
		if present(fv.val) && firstByte(fv.val) != '"' {
			return api.Message{}, typeError(messageParam(i, fv.name), "a string", fv.val)
		}
	}
	for _, fv := range []struct {
		name string
		val  []byte
	}{{"tool_calls", toolCalls}, {"function_call", functionCall}} {
		if present(fv.val) && !isEmptyArray(fv.val) {
			p := messageParam(i, fv.name)
			return api.Message{}, invalid(codeUnsupported, p,
				"Unsupported parameter: '"+p+"': this gateway does not support tool calls.")
		}
	}
	if unknown != "" {
		p := messageParam(i, unknown)
		return api.Message{}, invalid(codeUnknown, p, "Unrecognized request argument supplied: "+p)
	}
	return api.Message{Role: r, Content: c}, nil
}

// parseRole takes OpenAI's roles; "developer" (OpenAI's new name for
// system instructions) is sent to replicas as "system", the role their
// chat templates know.
func parseRole(raw []byte, i int) (string, *api.Error) {
	// The usual roles are compared raw, without decoding.
	switch string(raw) {
	case `"user"`:
		return api.RoleUser, nil
	case `"assistant"`:
		return api.RoleAssistant, nil
	case `"system"`:
		return api.RoleSystem, nil
	}
	param := messageParam(i, "role")
	if !present(raw) {
		return "", invalid(codeMissing, param, "Missing required parameter: '"+param+"'.")
	}
	role, ok := stringValue(raw)
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
func (f *Door) parseContent(raw []byte, i int) (string, *api.Error) {
	var content string
	switch firstByte(raw) {
	case '"':
		content = unquote(raw)
	case '[':
		var b strings.Builder
		var aerr *api.Error
		eachElement(raw, func(j int, part []byte) bool {
			var text string
			text, aerr = contentPart(part, i, j)
			if j > 0 {
				b.WriteByte('\n')
			}
			b.WriteString(text)
			return aerr == nil
		})
		if aerr != nil {
			return "", aerr
		}
		content = b.String()
	default:
		param := messageParam(i, "content")
		if !present(raw) {
			return "", invalid(codeMissing, param, "Missing required parameter: '"+param+"'.")
		}
		return "", typeError(param, "a string or an array of content parts", raw)
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
func contentPart(part []byte, i, j int) (string, *api.Error) {
	param := func(name string) string {
		p := messageParam(i, "content") + "[" + strconv.Itoa(j) + "]"
		if name != "" {
			p += "." + name
		}
		return p
	}
	if firstByte(part) != '{' {
		return "", typeError(param(""), "an object", part)
	}
	var typ, text []byte
	eachMember(part, func(key, val []byte) bool {
		switch {
		case keyIs(key, "type"):
			typ = val
		case keyIs(key, "text"):
			text = val
		}
		return true
	})
	if string(typ) != `"text"` {
		t, ok := stringValue(typ)
		switch {
		case !present(typ):
			return "", invalid(codeMissing, param("type"), "Missing required parameter: '"+param("type")+"'.")
		case !ok:
			return "", typeError(param("type"), "a string", typ)
		case t != "text":
			return "", invalid(codeUnsupportedV, param("type"), "Unsupported value: content parts of type '"+t+
				"' are not supported: this gateway serves text-only models; send text parts only.")
		}
	}
	s, ok := stringValue(text)
	if !ok {
		if !present(text) {
			return "", invalid(codeMissing, param("text"), "Missing required parameter: '"+param("text")+"'.")
		}
		return "", typeError(param("text"), "a string", text)
	}
	return s, nil
}

// parseStop takes a string or an array of strings.
func (f *Door) parseStop(raw []byte) ([]string, *api.Error) {
	var stop []string
	isArray := firstByte(raw) == '['
	switch {
	case firstByte(raw) == '"':
		stop = []string{unquote(raw)}
	case isArray:
		if n := countElements(raw); n > maxStop {
			return nil, invalid(codeArrayTooLong, "stop", fmt.Sprintf(
				"Invalid 'stop': array too long. Expected an array with maximum length %d, but got an array with length %d instead.",
				maxStop, n))
		}
		var aerr *api.Error
		eachElement(raw, func(i int, item []byte) bool {
			s, ok := stringValue(item)
			if !ok {
				aerr = typeError("stop["+strconv.Itoa(i)+"]", "a string", item)
				return false
			}
			stop = append(stop, s)
			return true
		})
		if aerr != nil {
			return nil, aerr
		}
	default:
		return nil, typeError("stop", "a string or an array of strings", raw)
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
func parseStreamOptions(raw []byte) (bool, *api.Error) {
	if firstByte(raw) != '{' {
		return false, typeError("stream_options", "an object", raw)
	}
	var include bool
	var aerr *api.Error
	eachMember(raw, func(key, v []byte) bool {
		name := keyName(key)
		switch name {
		case "include_usage", "include_obfuscation":
			if !present(v) {
				return true
			}
			b, ok := boolValue(v)
			if !ok {
				aerr = typeError("stream_options."+name, "a boolean", v)
				return false
			}
			if name == "include_usage" {
				include = b
			}
		default:
			aerr = invalid(codeUnknown, "stream_options."+name, "Unrecognized request argument supplied: stream_options."+name)
			return false
		}
		return true
	})
	return include, aerr
}

// numberIn reads a number in [min, max].
func numberIn(raw []byte, param string, min, max float64) (float64, *api.Error) {
	if !isNumber(raw) {
		return 0, typeError(param, "a number", raw)
	}
	v, err := strconv.ParseFloat(string(raw), 64)
	if err != nil || v < min || v > max {
		return 0, invalid(codeInvalidValue, param, fmt.Sprintf(
			"Invalid '%s': must be between %s and %s, got %s.", param, fmtNum(min), fmtNum(max), clip(raw)))
	}
	return v, nil
}

// integerIn reads a whole number in [min, max]; 5.0 and 5e0 are not one,
// as OpenAI's API judges them.
func integerIn(raw []byte, param string, min, max int64) (int64, *api.Error) {
	if !isNumber(raw) {
		return 0, typeError(param, "an integer", raw)
	}
	n, err := strconv.ParseInt(string(raw), 10, 64)
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
func typeError(param, want string, raw []byte) *api.Error {
	return invalid(codeInvalidType, param, "Invalid type for '"+param+"': expected "+want+", but got "+kind(raw)+" instead.")
}

// kind names a JSON value's type, as OpenAI's messages do.
func kind(raw []byte) string {
	switch firstByte(raw) {
	case '"':
		return "a string"
	case '{':
		return "an object"
	case '[':
		return "an array"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	if bytes.ContainsAny(raw, ".eE") {
		return "a decimal"
	}
	return "an integer"
}

// clip is a short rendering of a value for a message.
func clip(raw []byte) string {
	if len(raw) > 32 {
		return string(raw[:32]) + "..."
	}
	return string(raw)
}

func fmtNum(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

// The values below are members of a body json.Valid accepted, as
// eachMember and eachElement cut them: valid JSON without surrounding
// space.

func firstByte(raw []byte) byte {
	raw = bytes.TrimLeft(raw, " \t\r\n")
	if len(raw) == 0 {
		return 0
	}
	return raw[0]
}

// present reports a field that was sent with a value other than null:
// OpenAI's API reads null as "not given" for every optional field.
func present(raw []byte) bool { return raw != nil && !isNull(raw) }

func isNull(raw []byte) bool { return string(raw) == "null" }

func isNumber(raw []byte) bool {
	c := firstByte(raw)
	return c == '-' || ('0' <= c && c <= '9')
}

func stringValue(raw []byte) (string, bool) {
	if firstByte(raw) != '"' {
		return "", false
	}
	return unquote(raw), true
}

// boolValue takes JSON's true and false only: OpenAI's API does not read
// "yes" or 1 as a boolean.
func boolValue(raw []byte) (bool, bool) {
	switch string(raw) {
	case "true":
		return true, true
	case "false":
		return false, true
	}
	return false, false
}

// Acceptors of inert fields' values.

func isZero(raw []byte) bool {
	if !isNumber(raw) {
		return false
	}
	v, err := strconv.ParseFloat(string(raw), 64)
	return err == nil && v == 0
}

func isFalse(raw []byte) bool { return string(raw) == "false" }

func isBool(raw []byte) bool { _, ok := boolValue(raw); return ok }

func isString(raw []byte) bool { _, ok := stringValue(raw); return ok }

func isObject(raw []byte) bool { return firstByte(raw) == '{' }

func isEmptyObject(raw []byte) bool {
	empty := true
	eachMember(raw, func(_, _ []byte) bool { empty = false; return false })
	return firstByte(raw) == '{' && empty
}

func isEmptyArray(raw []byte) bool { return firstByte(raw) == '[' && countElements(raw) == 0 }

func never([]byte) bool { return false }

func oneOf(values ...string) func([]byte) bool {
	return func(raw []byte) bool {
		s, ok := stringValue(raw)
		return ok && slices.Contains(values, s)
	}
}

// isTextFormat accepts response_format {"type":"text"}, the default.
func isTextFormat(raw []byte) bool {
	if firstByte(raw) != '{' {
		return false
	}
	n, text := 0, false
	eachMember(raw, func(key, val []byte) bool {
		n++
		text = keyIs(key, "type") && string(val) == `"text"`
		return true
	})
	return n == 1 && text
}

// isTextModality accepts modalities ["text"], the default.
func isTextModality(raw []byte) bool {
	n, text := 0, false
	eachElement(raw, func(_ int, val []byte) bool {
		n++
		text = string(val) == `"text"`
		return true
	})
	return firstByte(raw) == '[' && n == 1 && text
}
