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
func (f *Front) decodeChat(r *http.Request) (api.Chat, []byte, *api.Error) {
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

// parse validates a JSON body into a Chat.
func (f *Front) parse(body []byte) (api.Chat, *api.Error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil || fields == nil {
		if t := firstByte(body); t != '{' && json.Valid(body) {
			return api.Chat{}, invalid(codeInvalidType, "", "The request body must be a JSON object.")
		}
		return api.Chat{}, invalid(codeInvalidJSON, "",
			"We could not parse the JSON body of your request: it is not valid JSON.")
	}
	var chat api.Chat

	// model: required, one of the configured model types.
	raw, ok := fields["model"]
	if !ok || isNull(raw) {
		return chat, invalid(codeMissing, "model", "You must provide a model parameter.")
	}
	model, ok := stringValue(raw)
	if !ok {
		return chat, typeError("model", "a string", raw)
	}
	if !slices.Contains(f.models, model) {
		return chat, modelNotFound(model)
	}
	chat.Model = model

	raw, ok = fields["messages"]
	if !ok || isNull(raw) {
		return chat, invalid(codeMissing, "messages", "Missing required parameter: 'messages'.")
	}
	msgs, aerr := f.parseMessages(raw)
	if aerr != nil {
		return chat, aerr
	}
	chat.Messages = msgs

	// Every other field, in a fixed order so the error reported is
	// always the same one; unknown fields last, by name.
	s := &chat.Sampling
	var streamOptions json.RawMessage
	if raw := fields["stream"]; present(raw) {
		b, ok := boolValue(raw)
		if !ok {
			return chat, typeError("stream", "a boolean", raw)
		}
		chat.Stream = b
	}
	if raw := fields["stream_options"]; present(raw) {
		streamOptions = raw
	}
	if raw := fields["temperature"]; present(raw) {
		v, aerr := numberIn(raw, "temperature", 0, api.MaxTemperature)
		if aerr != nil {
			return chat, aerr
		}
		s.Temperature = &v
	}
	if raw := fields["top_p"]; present(raw) {
		v, aerr := numberIn(raw, "top_p", 0, 1)
		if aerr != nil {
			return chat, aerr
		}
		s.TopP = &v
	}
	// max_completion_tokens replaced max_tokens in OpenAI's API; when a
	// client sends both, the newer one wins (as in vLLM).
	for _, name := range []string{"max_tokens", "max_completion_tokens"} {
		if raw := fields[name]; present(raw) {
			n, aerr := integerIn(raw, name, 1, maxTokensLimit)
			if aerr != nil {
				return chat, aerr
			}
			s.MaxTokens = int(n)
		}
	}
	if raw := fields["stop"]; present(raw) {
		stop, aerr := f.parseStop(raw)
		if aerr != nil {
			return chat, aerr
		}
		s.Stop = stop
	}
	if raw := fields["seed"]; present(raw) {
		n, aerr := integerIn(raw, "seed", math.MinInt64, math.MaxInt64)
		if aerr != nil {
			return chat, aerr
		}
		s.Seed = &n
	}
	if raw := fields["user"]; present(raw) {
		u, ok := stringValue(raw)
		if !ok {
			return chat, typeError("user", "a string", raw)
		}
		chat.User = u
	}
	if raw := fields["n"]; present(raw) {
		n, aerr := integerIn(raw, "n", 1, math.MaxInt32)
		if aerr != nil {
			return chat, aerr
		}
		if n != 1 {
			return chat, invalid(codeUnsupportedV, "n",
				"Unsupported value: 'n' must be 1: this gateway generates one choice per request.")
		}
	}
	if streamOptions != nil {
		if !chat.Stream {
			return chat, invalid(codeInvalidValue, "stream_options",
				"The 'stream_options' parameter is only allowed when 'stream' is enabled.")
		}
		include, aerr := parseStreamOptions(streamOptions)
		if aerr != nil {
			return chat, aerr
		}
		chat.IncludeUsage = include
	}
	var unknown []string
	for name, raw := range fields {
		if known[name] {
			continue
		}
		if accept, ok := inert[name]; ok {
			if !isNull(raw) && !accept(raw) {
				unknown = append(unknown, name) // reported below, after the sort
			}
			continue
		}
		unknown = append(unknown, name)
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		name := unknown[0]
		if _, ok := inert[name]; ok {
			return chat, invalid(codeUnsupported, name,
				"Unsupported parameter: '"+name+"' is not supported by this gateway; leave it out.")
		}
		return chat, invalid(codeUnknown, name, "Unrecognized request argument supplied: "+name)
	}
	return chat, nil
}

// known are the fields parse reads.
var known = map[string]bool{
	"model": true, "messages": true, "stream": true, "stream_options": true, "temperature": true,
	"top_p": true, "max_tokens": true, "max_completion_tokens": true, "stop": true, "seed": true,
	"user": true, "n": true,
}

// inert are the OpenAI fields the gateway does not pass on, each with the
// values that ask for nothing and are therefore accepted (null always is).
// Any other value is refused as unsupported.
var inert = map[string]func(json.RawMessage) bool{
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

func (f *Front) parseMessages(raw json.RawMessage) ([]api.Message, *api.Error) {
	var items []json.RawMessage
	if firstByte(raw) != '[' || json.Unmarshal(raw, &items) != nil {
		return nil, typeError("messages", "an array", raw)
	}
	if len(items) == 0 {
		return nil, invalid(codeEmptyArray, "messages",
			"Invalid 'messages': empty array. Expected an array with minimum length 1, but got an empty array instead.")
	}
	if max := f.limits.MaxMessages; len(items) > max {
		return nil, invalid(codeArrayTooLong, "messages", fmt.Sprintf(
			"Invalid 'messages': array too long. Expected an array with maximum length %d, but got an array with length %d instead.",
			max, len(items)))
	}
	msgs := make([]api.Message, len(items))
	for i, item := range items {
		param := "messages[" + strconv.Itoa(i) + "]"
		var m map[string]json.RawMessage
		if firstByte(item) != '{' || json.Unmarshal(item, &m) != nil {
			return nil, typeError(param, "an object", item)
		}
		role, aerr := parseRole(m["role"], param)
		if aerr != nil {
			return nil, aerr
		}
		content, aerr := f.parseContent(m["content"], param+".content")
		if aerr != nil {
			return nil, aerr
		}
		for name, v := range m {
			switch name {
			case "role", "content":
			case "name", "refusal":
				// A participant's name and an assistant's refusal text
				// change nothing in what the replica is asked.
				if _, ok := stringValue(v); !ok && !isNull(v) {
					return nil, typeError(param+"."+name, "a string", v)
				}
			case "tool_calls", "function_call":
				if !isNull(v) && !isEmptyArray(v) {
					return nil, invalid(codeUnsupported, param+"."+name,
						"Unsupported parameter: '"+param+"."+name+"': this gateway does not support tool calls.")
				}
			default:
				return nil, invalid(codeUnknown, param+"."+name,
					"Unrecognized request argument supplied: "+param+"."+name)
			}
		}
		msgs[i] = api.Message{Role: role, Content: content}
	}
	return msgs, nil
}

// parseRole takes OpenAI's roles; "developer" (OpenAI's new name for
// system instructions) is sent to replicas as "system", the role their
// chat templates know.
func parseRole(raw json.RawMessage, param string) (string, *api.Error) {
	param += ".role"
	if !present(raw) {
		return "", invalid(codeMissing, param, "Missing required parameter: '"+param+"'.")
	}
	role, ok := stringValue(raw)
	if !ok {
		return "", typeError(param, "a string", raw)
	}
	switch role {
	case api.RoleSystem, api.RoleUser, api.RoleAssistant:
		return role, nil
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
func (f *Front) parseContent(raw json.RawMessage, param string) (string, *api.Error) {
	if !present(raw) {
		return "", invalid(codeMissing, param, "Missing required parameter: '"+param+"'.")
	}
	var content string
	switch firstByte(raw) {
	case '"':
		s, ok := stringValue(raw)
		if !ok {
			return "", typeError(param, "a string or an array of content parts", raw)
		}
		content = s
	case '[':
		var parts []json.RawMessage
		if json.Unmarshal(raw, &parts) != nil {
			return "", typeError(param, "a string or an array of content parts", raw)
		}
		var b strings.Builder
		for j, part := range parts {
			pp := param + "[" + strconv.Itoa(j) + "]"
			var p map[string]json.RawMessage
			if firstByte(part) != '{' || json.Unmarshal(part, &p) != nil {
				return "", typeError(pp, "an object", part)
			}
			typ, ok := stringValue(p["type"])
			if !ok {
				if !present(p["type"]) {
					return "", invalid(codeMissing, pp+".type", "Missing required parameter: '"+pp+".type'.")
				}
				return "", typeError(pp+".type", "a string", p["type"])
			}
			if typ != "text" {
				return "", invalid(codeUnsupportedV, pp+".type", "Unsupported value: content parts of type '"+typ+
					"' are not supported: this gateway serves text-only models; send text parts only.")
			}
			text, ok := stringValue(p["text"])
			if !ok {
				if !present(p["text"]) {
					return "", invalid(codeMissing, pp+".text", "Missing required parameter: '"+pp+".text'.")
				}
				return "", typeError(pp+".text", "a string", p["text"])
			}
			if j > 0 {
				b.WriteByte('\n')
			}
			b.WriteString(text)
		}
		content = b.String()
	default:
		return "", typeError(param, "a string or an array of content parts", raw)
	}
	if max := f.limits.MaxContentChars; utf8.RuneCountInString(content) > max {
		return "", invalid(codeStringTooLong, param, fmt.Sprintf(
			"Invalid '%s': string too long. Expected a string with maximum length %d, but got a string with length %d instead.",
			param, max, utf8.RuneCountInString(content)))
	}
	return content, nil
}

// parseStop takes a string or an array of strings.
func (f *Front) parseStop(raw json.RawMessage) ([]string, *api.Error) {
	var stop []string
	switch firstByte(raw) {
	case '"':
		s, ok := stringValue(raw)
		if !ok {
			return nil, typeError("stop", "a string or an array of strings", raw)
		}
		stop = []string{s}
	case '[':
		var items []json.RawMessage
		if json.Unmarshal(raw, &items) != nil {
			return nil, typeError("stop", "a string or an array of strings", raw)
		}
		if len(items) > maxStop {
			return nil, invalid(codeArrayTooLong, "stop", fmt.Sprintf(
				"Invalid 'stop': array too long. Expected an array with maximum length %d, but got an array with length %d instead.",
				maxStop, len(items)))
		}
		for i, item := range items {
			s, ok := stringValue(item)
			if !ok {
				return nil, typeError("stop["+strconv.Itoa(i)+"]", "a string", item)
			}
			stop = append(stop, s)
		}
	default:
		return nil, typeError("stop", "a string or an array of strings", raw)
	}
	for i, s := range stop {
		param := "stop"
		if firstByte(raw) == '[' {
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
func parseStreamOptions(raw json.RawMessage) (bool, *api.Error) {
	var opts map[string]json.RawMessage
	if firstByte(raw) != '{' || json.Unmarshal(raw, &opts) != nil {
		return false, typeError("stream_options", "an object", raw)
	}
	var include bool
	for _, name := range sortedKeys(opts) {
		v := opts[name]
		switch name {
		case "include_usage", "include_obfuscation":
			if !present(v) {
				continue
			}
			b, ok := boolValue(v)
			if !ok {
				return false, typeError("stream_options."+name, "a boolean", v)
			}
			if name == "include_usage" {
				include = b
			}
		default:
			return false, invalid(codeUnknown, "stream_options."+name,
				"Unrecognized request argument supplied: stream_options."+name)
		}
	}
	return include, nil
}

// numberIn reads a number in [min, max].
func numberIn(raw json.RawMessage, param string, min, max float64) (float64, *api.Error) {
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
func integerIn(raw json.RawMessage, param string, min, max int64) (int64, *api.Error) {
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
func typeError(param, want string, raw json.RawMessage) *api.Error {
	return invalid(codeInvalidType, param, "Invalid type for '"+param+"': expected "+want+", but got "+kind(raw)+" instead.")
}

// kind names a JSON value's type, as OpenAI's messages do.
func kind(raw json.RawMessage) string {
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
func clip(raw json.RawMessage) string {
	if len(raw) > 32 {
		return string(raw[:32]) + "..."
	}
	return string(raw)
}

func fmtNum(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

// The values below come from json.Unmarshal into json.RawMessage, so they
// are valid JSON without surrounding space.

func firstByte(raw []byte) byte {
	raw = bytes.TrimLeft(raw, " \t\r\n")
	if len(raw) == 0 {
		return 0
	}
	return raw[0]
}

// present reports a field that was sent with a value other than null:
// OpenAI's API reads null as "not given" for every optional field.
func present(raw json.RawMessage) bool { return raw != nil && !isNull(raw) }

func isNull(raw json.RawMessage) bool { return string(raw) == "null" }

func isNumber(raw json.RawMessage) bool {
	c := firstByte(raw)
	return c == '-' || ('0' <= c && c <= '9')
}

func stringValue(raw json.RawMessage) (string, bool) {
	if firstByte(raw) != '"' {
		return "", false
	}
	var s string
	return s, json.Unmarshal(raw, &s) == nil
}

// boolValue takes JSON's true and false only: OpenAI's API does not read
// "yes" or 1 as a boolean.
func boolValue(raw json.RawMessage) (bool, bool) {
	switch string(raw) {
	case "true":
		return true, true
	case "false":
		return false, true
	}
	return false, false
}

func sortedKeys(m map[string]json.RawMessage) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Acceptors of inert fields' values.

func isZero(raw json.RawMessage) bool {
	if !isNumber(raw) {
		return false
	}
	v, err := strconv.ParseFloat(string(raw), 64)
	return err == nil && v == 0
}

func isFalse(raw json.RawMessage) bool { return string(raw) == "false" }

func isBool(raw json.RawMessage) bool { _, ok := boolValue(raw); return ok }

func isString(raw json.RawMessage) bool { _, ok := stringValue(raw); return ok }

func isObject(raw json.RawMessage) bool { return firstByte(raw) == '{' }

func isEmptyObject(raw json.RawMessage) bool {
	var m map[string]json.RawMessage
	return firstByte(raw) == '{' && json.Unmarshal(raw, &m) == nil && len(m) == 0
}

func isEmptyArray(raw json.RawMessage) bool {
	var a []json.RawMessage
	return firstByte(raw) == '[' && json.Unmarshal(raw, &a) == nil && len(a) == 0
}

func never(json.RawMessage) bool { return false }

func oneOf(values ...string) func(json.RawMessage) bool {
	return func(raw json.RawMessage) bool {
		s, ok := stringValue(raw)
		return ok && slices.Contains(values, s)
	}
}

// isTextFormat accepts response_format {"type":"text"}, the default.
func isTextFormat(raw json.RawMessage) bool {
	var rf map[string]json.RawMessage
	if firstByte(raw) != '{' || json.Unmarshal(raw, &rf) != nil || len(rf) != 1 {
		return false
	}
	t, ok := stringValue(rf["type"])
	return ok && t == "text"
}

// isTextModality accepts modalities ["text"], the default.
func isTextModality(raw json.RawMessage) bool {
	var m []string
	return firstByte(raw) == '[' && json.Unmarshal(raw, &m) == nil && len(m) == 1 && m[0] == "text"
}
