package protocols

import (
	"slices"
	"strconv"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/wire"
)

// Carried lists the members of a door's request that a protocol which
// translates it can carry to its replicas (or may drop: what only shapes
// the door's own answer, such as stream_options).
type Carried map[string]bool

// Refuse checks a request carried through by its door (req.Wire) against
// what protocol name can carry of it when it translates: the first member
// it cannot carry, by name, is refused with a KindUnsupported error naming
// the member and the protocol, never silently dropped. A member whose
// value asks for nothing (tools: [], logprobs: false, a penalty of 0) is
// accepted, as some clients always send one. Messages are checked too:
// roles and content parts the protocol cannot carry.
func Refuse(req *Request, protocol string, carried Carried, msgs MessageCheck) *Error {
	w := req.Wire
	if w == nil {
		return nil
	}
	if w.Format != api.FormatOpenAIChat {
		// The whole API: no member to name, nothing to leave out.
		return &Error{Kind: KindUnsupported,
			Message: "this model's replicas speak the " + protocol + " protocol, which cannot carry " + APIName(w.Format) +
				"; use a model served over the OpenAI-compatible protocol"}
	}
	var bad []string
	for _, m := range w.Members {
		if carried[m.Name] || !m.Value.Given() {
			continue
		}
		if accept, ok := inert[m.Name]; ok && accept(m.Value) {
			continue
		}
		bad = append(bad, m.Name)
	}
	if len(bad) > 0 {
		slices.Sort(bad)
		return unsupported(protocol, bad[0], "'"+bad[0]+"'")
	}
	if msgs != nil {
		for i, m := range w.Messages {
			if what := msgs(m); what != "" {
				return unsupported(protocol, "messages["+strconv.Itoa(i)+"]", what)
			}
		}
	}
	return nil
}

// APIName names the API of a request format in words, for a refusal:
// "OpenAI's Responses API (/v1/responses)".
func APIName(f api.Format) string {
	switch f {
	case api.FormatOpenAIChat:
		return "OpenAI's chat completions API (/v1/chat/completions)"
	case api.FormatOpenAICompletions:
		return "OpenAI's completions API (/v1/completions)"
	case api.FormatOpenAIEmbeddings:
		return "OpenAI's embeddings API (/v1/embeddings)"
	case api.FormatOpenAIResponses:
		return "OpenAI's Responses API (/v1/responses)"
	case api.FormatAnthropicMessages:
		return "Anthropic's Messages API (/v1/messages)"
	}
	return "the " + string(f) + " API"
}

// Unsupported is the KindUnsupported error of a protocol that cannot
// carry what (in words) of the member param: it names both, and the
// protocol.
func Unsupported(protocol, param, what string) *Error { return unsupported(protocol, param, what) }

// MessageCheck names what a message (as the client wrote it) holds that a
// protocol cannot carry; "" when nothing.
type MessageCheck func(m wire.Value) string

// TextOnly is the MessageCheck of a protocol that carries text messages
// of the roles system, developer, user and assistant, and nothing else.
func TextOnly(m wire.Value) string {
	what := ""
	_ = m.Members(func(f wire.Member) bool {
		switch f.Name {
		case "role":
			if r, _ := f.Value.Str(); r == api.RoleTool || r == "function" {
				what = "a message of role '" + r + "'"
			}
		case "tool_calls", "function_call":
			if f.Value.Given() && string(f.Value.Raw) != "[]" {
				what = "tool calls"
			}
		case "content":
			if f.Value.Kind() == wire.Array {
				_ = f.Value.Elements(func(_ int, part wire.Value) bool {
					_ = part.Members(func(pm wire.Member) bool {
						if pm.Name == "type" && !pm.Value.Is("text") {
							t, _ := pm.Value.Str()
							what = "content parts of type '" + t + "'"
						}
						return what == ""
					})
					return what == ""
				})
			}
		}
		return what == ""
	})
	return what
}

func unsupported(protocol, member, what string) *Error {
	return &Error{Kind: KindUnsupported, Param: member,
		Message: "this model's replicas speak the " + protocol + " protocol, which cannot carry " + what +
			"; leave it out, or use a model served over the OpenAI-compatible protocol"}
}

// inert are members whose neutral values ask for nothing: a protocol
// that cannot carry the member accepts them (null always is).
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
	"n":                   isOne,
	"top_p":               isOneNumber,
	"stop":                isEmptyArray,
	// Identifiers and hints that change nothing in the answer.
	"user":              isString,
	"safety_identifier": isString,
	"prompt_cache_key":  isString,
}

func isZero(v wire.Value) bool {
	if v.Kind() != wire.Number {
		return false
	}
	f, err := strconv.ParseFloat(string(v.Raw), 64)
	return err == nil && f == 0
}

func isOne(v wire.Value) bool { return string(v.Raw) == "1" }

// isOneNumber accepts 1 however written (1, 1.0): top_p's default.
func isOneNumber(v wire.Value) bool {
	if v.Kind() != wire.Number {
		return false
	}
	f, err := strconv.ParseFloat(string(v.Raw), 64)
	return err == nil && f == 1
}

func isFalse(v wire.Value) bool { return v.Kind() == wire.False }

func isBool(v wire.Value) bool { return v.Kind() == wire.True || v.Kind() == wire.False }

func isString(v wire.Value) bool { return v.Kind() == wire.String }

func isObject(v wire.Value) bool { return v.Kind() == wire.Object }

func isEmptyObject(v wire.Value) bool {
	empty := true
	err := v.Members(func(wire.Member) bool { empty = false; return false })
	return v.Kind() == wire.Object && empty && err == nil
}

func isEmptyArray(v wire.Value) bool {
	empty := true
	err := v.Elements(func(int, wire.Value) bool { empty = false; return false })
	return v.Kind() == wire.Array && empty && err == nil
}

func oneOf(values ...string) func(wire.Value) bool {
	return func(v wire.Value) bool {
		s, ok := v.Str()
		return ok && slices.Contains(values, s)
	}
}

// isTextFormat accepts response_format {"type":"text"}, the default.
func isTextFormat(v wire.Value) bool {
	n, text := 0, false
	err := v.Members(func(m wire.Member) bool {
		n++
		text = m.Name == "type" && m.Value.Is("text")
		return true
	})
	return v.Kind() == wire.Object && err == nil && n == 1 && text
}

// isTextModality accepts modalities ["text"], the default.
func isTextModality(v wire.Value) bool {
	n, text := 0, false
	err := v.Elements(func(_ int, e wire.Value) bool {
		n++
		text = e.Is("text")
		return true
	})
	return v.Kind() == wire.Array && err == nil && n == 1 && text
}
