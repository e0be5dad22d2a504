package openai

import (
	"bytes"
	"strconv"
	"strings"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/backends/protocols"
	"github.com/llmedge/llmedge/internal/jsonx"
	"github.com/llmedge/llmedge/wire"
)

// This file translates a Responses API request into OpenAI's chat
// completions, for replicas that do not serve /v1/responses (the model's
// mode translate, or auto for a replica found without it, or one whose
// protocol speaks only OpenAI's chat: Ollama's /api/chat, native). Every
// member is mapped or refused, naming it; none is dropped silently but
// those that ask nothing of the model:
//
//	model, temperature, top_p, stream, user,
//	  parallel_tool_calls                       the same members
//	max_output_tokens                           max_tokens
//	instructions                                the first message, of role system
//	tools [{type: function, name, description,
//	  parameters, strict}]                      [{type: function, function: {...}}]
//	tool_choice auto | none | required |
//	  {type: function, name}                    the same, {type: function, function: {name}}
//	tools [{type: namespace, name, tools}]      each of its functions, named namespace.name
//	                                            (a call of one answered with name and namespace)
//	tools of type web_search (and _preview)     nothing: an offer the engine cannot take up
//	                                            (see isWebSearch)
//	tools: [], and then tool_choice auto or
//	  none, parallel_tool_calls                 nothing (without a tool they ask nothing)
//	text.format json_schema | json_object       response_format
//	text.format text, text.verbosity            nothing (the default; a style hint)
//	reasoning.effort low | medium | high        reasoning_effort (xhigh: high), and
//	                                            chat_template_kwargs.enable_thinking true
//	reasoning.effort none | minimal             chat_template_kwargs.enable_thinking false
//	reasoning.summary                           nothing (the reasoning comes whole)
//	store: false, include, metadata,
//	  service_tier, prompt_cache_key,
//	  prompt_cache_retention, safety_identifier,
//	  truncation: disabled, background: false,
//	  stream_options, top_logprobs: 0          nothing (they ask nothing of the model)
//	priority, cache_salt                        nothing (the gateway sets its own)
//
// Input items: a string is one user message; a message item (roles user,
// assistant, system, developer: a system message) keeps its text
// (input_text, output_text, refusal parts, joined by newlines) and its
// images (input_image: an image_url part, a URL or a data: URL); the
// system messages before the first other one are one system message, as
// many chat templates take no other; function_call items are the
// tool_calls of one assistant message (with the text of the assistant
// message just before them), function_call_output items tool messages;
// reasoning items of earlier turns are dropped, as the engines drop
// reasoning from their prompts (encrypted_content with them). Files,
// hosted tools and their calls, and any member the door does not know are
// refused.
//
// Why reasoning.effort switches thinking: the open models that reason
// (Qwen3, GLM, DeepSeek's hybrids) take it on or off through their chat
// template's enable_thinking, and have no "less": "none" and "minimal"
// (OpenAI's barely-reasoning effort) turn it off; the others turn it on
// and pass reasoning_effort, which vLLM and SGLang hand to the templates
// that grade it (gpt-oss) and which takes low, medium and high.

// refusal names what a translation cannot carry: the member (param, in
// OpenAI's "input[2].content[0]" style) and what it is.
type refusal struct {
	param, what string
}

func (u *refusal) Error() string {
	return "'" + u.param + "': " + u.what + " has no equivalent in OpenAI's chat completions, to which this model's " +
		"requests are translated for replicas that do not serve the Responses API; leave it out"
}

// apiError is the refusal as the door's 400.
func (u *refusal) apiError() *api.Error {
	return invalid(codeUnsupported, u.param, "Unsupported parameter: "+u.Error()+".")
}

// lazyResponsesTranslation is the request's translation, made when a
// replica first needs it.
func lazyResponsesTranslation(body []byte, members []wire.Member) func() (*api.Wire, error) {
	return protocols.Lazy(func() (*api.Wire, error) {
		w, u := translateResponses(body, members)
		if u != nil {
			return nil, &protocols.Error{Kind: protocols.KindUnsupported, Param: u.param, Message: u.Error()}
		}
		return w, nil
	})
}

// translateResponses is a Responses request (validated by the door) as a
// chat completions request, carried through in OpenAI's chat format (so
// that a protocol edits it as the chat door's).
func translateResponses(body []byte, members []wire.Member) (*api.Wire, *refusal) {
	out, u := appendResponsesChat(make([]byte, 0, len(body)+256), members)
	if u != nil {
		return nil, u
	}
	w, err := protocols.ChatWire(out)
	if err != nil {
		return nil, &refusal{param: "input", what: "this request (" + err.Error() + ")"}
	}
	return w, nil
}

// appendResponsesChat appends the chat completions body of a Responses
// request's members.
func appendResponsesChat(b []byte, members []wire.Member) ([]byte, *refusal) {
	var model, instructions, input wire.Value
	tools := false // a tool is offered
	for _, m := range members {
		switch m.Name {
		case "model":
			model = m.Value
		case "instructions":
			instructions = m.Value
		case "input":
			input = m.Value
		case "tools":
			_ = m.Value.Elements(func(_ int, t wire.Value) bool {
				tools = !isWebSearch(t)
				return !tools
			})
		}
	}
	b = append(b, `{"model":`...)
	b = append(b, model.Raw...)
	b = append(b, `,"messages":[`...)
	cw := chatWriter{b: b}
	if s, ok := instructions.Str(); ok {
		cw.system = append(cw.system, s)
	}
	if u := cw.input(input); u != nil {
		return nil, u
	}
	b = append(cw.end(), ']')
	for _, m := range members {
		v := m.Value
		if !v.Given() {
			continue
		}
		var u *refusal
		switch m.Name {
		case "model", "instructions", "input":
		case "temperature", "top_p", "stream", "user":
			b = appendMember(b, m.Name, v.Raw)
		case "tools", "tool_choice", "parallel_tool_calls":
			// Without a tool they ask nothing (Codex sends tool_choice
			// "auto" whatever its tools), and an engine not started for
			// tool calls refuses tool_choice "auto" (vLLM).
			if !tools && (m.Name != "tool_choice" || v.Is("auto") || v.Is("none")) {
				continue
			}
			b, u = appendToolMember(b, m.Name, v)
		case "max_output_tokens":
			b = appendMember(b, "max_tokens", v.Raw)
		case "text":
			b, u = appendTextFormat(b, v)
		case "reasoning":
			b, u = appendReasoning(b, v)
		case "truncation":
			if !v.Is("disabled") {
				u = &refusal{param: "truncation", what: "truncation '" + valueText(v) + "' (dropping the oldest input to fit the context)"}
			}
		case "top_logprobs":
			if string(v.Raw) != "0" {
				u = &refusal{param: "top_logprobs", what: "top_logprobs"}
			}
		case "store", "background", "include", "metadata", "service_tier", "prompt_cache_key",
			"prompt_cache_retention", "safety_identifier", "stream_options", "client_metadata":
			// Asked of OpenAI's service (the door refused store and
			// background true): nothing of the model.
		case "priority", "cache_salt":
			// The gateway's own (boundary/members): it sets its values on
			// the translation, never the client's.
		default:
			u = &refusal{param: m.Name, what: "'" + m.Name + "'"}
		}
		if u != nil {
			return nil, u
		}
	}
	return append(b, '}'), nil
}

// appendMember appends ,"name":value.
func appendMember(b []byte, name string, value []byte) []byte {
	b = append(b, ',')
	b = jsonx.String(b, name)
	b = append(b, ':')
	return append(b, value...)
}

// chatWriter writes the chat messages of the input items, gathering what
// becomes one message: the system messages before any other, and an
// assistant's text and tool calls.
type chatWriter struct {
	b []byte
	n int // messages written
	// system are the leading system texts, until another message comes.
	system []string
	// text and calls are the assistant message being gathered (open).
	open  bool
	text  []string
	calls [][]byte
}

// next appends the comma before a message, and counts it.
func (cw *chatWriter) next() {
	if cw.n > 0 {
		cw.b = append(cw.b, ',')
	}
	cw.n++
}

// flush writes the gathered messages.
func (cw *chatWriter) flush() {
	if cw.system != nil {
		cw.next()
		cw.b = append(cw.b, `{"role":"system","content":`...)
		cw.b = jsonx.String(cw.b, strings.Join(cw.system, "\n\n"))
		cw.b = append(cw.b, '}')
		cw.system = nil
	}
	if !cw.open {
		return
	}
	cw.open = false
	cw.next()
	cw.b = append(cw.b, `{"role":"assistant","content":`...)
	if len(cw.text) == 0 {
		cw.b = append(cw.b, "null"...)
	} else {
		cw.b = jsonx.String(cw.b, strings.Join(cw.text, "\n"))
	}
	if len(cw.calls) > 0 {
		cw.b = append(cw.b, `,"tool_calls":[`...)
		cw.b = append(cw.b, bytes.Join(cw.calls, []byte{','})...)
		cw.b = append(cw.b, ']')
	}
	cw.b = append(cw.b, '}')
	cw.text, cw.calls = nil, nil
}

// end writes what is gathered and returns the messages.
func (cw *chatWriter) end() []byte {
	cw.flush()
	return cw.b
}

// input writes the messages of input (validated by the door).
func (cw *chatWriter) input(v wire.Value) *refusal {
	if v.Kind() == wire.String {
		cw.flush()
		cw.next()
		cw.b = append(cw.b, `{"role":"user","content":`...)
		cw.b = append(cw.b, v.Raw...)
		cw.b = append(cw.b, '}')
		return nil
	}
	var u *refusal
	_ = v.Elements(func(i int, item wire.Value) bool {
		u = cw.item(item, "input["+strconv.Itoa(i)+"]")
		return u == nil
	})
	return u
}

// itemFields are the members of an input item the translation reads.
type itemFields struct {
	typ, role, content, callID, name, namespace, arguments, output wire.Value
}

func (f *itemFields) field(name string) *wire.Value {
	switch name {
	case "type":
		return &f.typ
	case "role":
		return &f.role
	case "content":
		return &f.content
	case "call_id":
		return &f.callID
	case "name":
		return &f.name
	case "namespace":
		return &f.namespace
	case "arguments":
		return &f.arguments
	case "output":
		return &f.output
	}
	return nil
}

// item writes input item p.
func (cw *chatWriter) item(item wire.Value, p string) *refusal {
	var f itemFields
	_ = item.Members(func(m wire.Member) bool {
		if dst := f.field(m.Name); dst != nil {
			*dst = m.Value
		}
		return true
	})
	t := "message"
	if s, ok := f.typ.Str(); ok {
		t = s
	}
	switch t {
	case "message":
		return cw.message(f, p)
	case "function_call":
		if f.callID.Kind() != wire.String || f.name.Kind() != wire.String || f.arguments.Kind() != wire.String {
			return &refusal{param: p, what: "a function_call item without a call_id, name and arguments string (" + p + ")"}
		}
		if !cw.open {
			cw.flush()
			cw.open = true
		}
		call := append([]byte(`{"id":`), f.callID.Raw...)
		call = append(call, `,"type":"function","function":{"name":`...)
		if ns, ok := f.namespace.Str(); ok && ns != "" {
			// A call of a namespace tool's function, named as the
			// translation named it (appendChatTools).
			fn, _ := f.name.Str()
			call = jsonx.String(call, ns+"."+fn)
		} else {
			call = append(call, f.name.Raw...)
		}
		call = append(call, `,"arguments":`...)
		call = append(call, f.arguments.Raw...)
		cw.calls = append(cw.calls, append(call, "}}"...))
		return nil
	case "function_call_output":
		if f.callID.Kind() != wire.String {
			return &refusal{param: p + ".call_id", what: "a function_call_output without a call_id (" + p + ")"}
		}
		text, u := outputText(f.output, p+".output")
		if u != nil {
			return u
		}
		cw.flush()
		cw.next()
		cw.b = append(cw.b, `{"role":"tool","tool_call_id":`...)
		cw.b = append(cw.b, f.callID.Raw...)
		cw.b = append(cw.b, `,"content":`...)
		cw.b = jsonx.String(cw.b, text)
		cw.b = append(cw.b, '}')
		return nil
	case "reasoning":
		// An earlier turn's reasoning: not part of the prompt.
		return nil
	}
	return &refusal{param: p + ".type", what: "an input item of type '" + t + "' (" + p + ")"}
}

// message writes a message item.
func (cw *chatWriter) message(f itemFields, p string) *refusal {
	role, _ := f.role.Str()
	if role == "developer" {
		role = api.RoleSystem
	}
	text, parts, u := messageContent(f.content, role, p+".content")
	if u != nil {
		return u
	}
	switch {
	case role == api.RoleSystem && cw.n == 0 && !cw.open && parts == nil:
		cw.system = append(cw.system, text)
		return nil
	case role == api.RoleAssistant:
		if cw.open && len(cw.calls) > 0 {
			cw.flush() // a new turn: text after calls
		}
		if !cw.open {
			cw.flush()
			cw.open = true
		}
		cw.text = append(cw.text, text)
		return nil
	}
	cw.flush()
	cw.next()
	cw.b = append(cw.b, `{"role":`...)
	cw.b = jsonx.String(cw.b, role)
	cw.b = append(cw.b, `,"content":`...)
	if parts != nil {
		cw.b = append(cw.b, '[')
		cw.b = append(cw.b, bytes.Join(parts, []byte{','})...)
		cw.b = append(cw.b, ']')
	} else {
		cw.b = jsonx.String(cw.b, text)
	}
	cw.b = append(cw.b, '}')
	return nil
}

// messageContent reads a message's content: its text (the text parts
// joined by newlines), or, when it has an image, its chat content parts.
func messageContent(content wire.Value, role, p string) (string, [][]byte, *refusal) {
	if s, ok := content.Str(); ok {
		return s, nil, nil
	}
	var texts []string
	var parts [][]byte
	images := false
	var u *refusal
	_ = content.Elements(func(j int, part wire.Value) bool {
		q := p + "[" + strconv.Itoa(j) + "]"
		var typ, text, refusalText, imageURL, fileID, detail wire.Value
		_ = part.Members(func(m wire.Member) bool {
			switch m.Name {
			case "type":
				typ = m.Value
			case "text":
				text = m.Value
			case "refusal":
				refusalText = m.Value
			case "image_url":
				imageURL = m.Value
			case "file_id":
				fileID = m.Value
			case "detail":
				detail = m.Value
			}
			return true
		})
		t, _ := typ.Str()
		switch {
		case (t == "input_text" || t == "output_text" || t == "text") && text.Kind() == wire.String:
			texts = append(texts, text.Text())
			parts = append(parts, append(append([]byte(`{"type":"text","text":`), text.Raw...), '}'))
		case t == "refusal" && refusalText.Kind() == wire.String:
			texts = append(texts, refusalText.Text())
			parts = append(parts, append(append([]byte(`{"type":"text","text":`), refusalText.Raw...), '}'))
		case t == "input_image" && role == api.RoleUser && imageURL.Kind() == wire.String && !fileID.Given():
			images = true
			img := append([]byte(`{"type":"image_url","image_url":{"url":`), imageURL.Raw...)
			if detail.Kind() == wire.String {
				img = append(img, `,"detail":`...)
				img = append(img, detail.Raw...)
			}
			parts = append(parts, append(img, "}}"...))
		case t == "input_image" && role != api.RoleUser:
			u = &refusal{param: q, what: "an image in a message of role '" + role + "' (" + q + ")"}
		case t == "input_image":
			u = &refusal{param: q, what: "an image by file_id, or without an image_url (" + q + "): send it as a URL or a data: URL"}
		default:
			u = &refusal{param: q, what: "a content part of type '" + t + "' (" + q + ")"}
		}
		return u == nil
	})
	if u != nil {
		return "", nil, u
	}
	if images {
		return "", parts, nil
	}
	return strings.Join(texts, "\n"), nil, nil
}

// outputText is a function_call_output's output as a tool message's text:
// a string, or its text parts joined by newlines.
func outputText(v wire.Value, p string) (string, *refusal) {
	if s, ok := v.Str(); ok {
		return s, nil
	}
	if v.Kind() != wire.Array {
		return "", &refusal{param: p, what: "a function_call_output whose output is neither a string nor content parts (" + p + ")"}
	}
	var texts []string
	var u *refusal
	_ = v.Elements(func(j int, part wire.Value) bool {
		var typ, text wire.Value
		_ = part.Members(func(m wire.Member) bool {
			switch m.Name {
			case "type":
				typ = m.Value
			case "text":
				text = m.Value
			}
			return true
		})
		if (typ.Is("input_text") || typ.Is("output_text")) && text.Kind() == wire.String {
			texts = append(texts, text.Text())
			return true
		}
		t, _ := typ.Str()
		q := p + "[" + strconv.Itoa(j) + "]"
		u = &refusal{param: q, what: "a part of type '" + t + "' in a tool's output (" + q + ")"}
		return false
	})
	return strings.Join(texts, "\n"), u
}

// appendToolMember appends tools, tool_choice or parallel_tool_calls.
func appendToolMember(b []byte, name string, v wire.Value) ([]byte, *refusal) {
	switch name {
	case "tools":
		return appendChatTools(b, v)
	case "tool_choice":
		return appendChatToolChoice(b, v)
	}
	return appendMember(b, name, v.Raw), nil
}

// appendChatTools appends tools as chat's function tools: a function tool
// as one, a namespace tool (a group of functions, as Codex CLI sends its
// subagent tools) as one function per member, named namespace.name (see
// splitNamespaced).
func appendChatTools(b []byte, tools wire.Value) ([]byte, *refusal) {
	b = append(b, `,"tools":[`...)
	var u *refusal
	n := 0 // tools written
	_ = tools.Elements(func(i int, t wire.Value) bool {
		p := "tools[" + strconv.Itoa(i) + "]"
		if isWebSearch(t) {
			return true // an offer the engine cannot take up: see isWebSearch
		}
		namespace, inner, isNamespace := namespaceOf(t)
		if !isNamespace {
			b, u = appendFunctionTool(b, &n, t, "", p)
			return u == nil
		}
		if namespace == "" || strings.Contains(namespace, ".") {
			u = &refusal{param: p + ".name", what: "a namespace tool without a name of letters, digits, _ and - (" + p + ")"}
			return false
		}
		_ = inner.Elements(func(j int, f wire.Value) bool {
			b, u = appendFunctionTool(b, &n, f, namespace, p+".tools["+strconv.Itoa(j)+"]")
			return u == nil
		})
		return u == nil
	})
	return append(b, ']'), u
}

// namespaceOf reads tool t as a namespace tool: its name and its
// functions; isNamespace is false for a tool of another type.
func namespaceOf(t wire.Value) (name string, tools wire.Value, isNamespace bool) {
	_ = t.Members(func(m wire.Member) bool {
		switch m.Name {
		case "type":
			isNamespace = m.Value.Is("namespace")
		case "name":
			name, _ = m.Value.Str()
		case "tools":
			tools = m.Value
		}
		return true
	})
	return name, tools, isNamespace
}

// splitNamespaced splits a chat function's name made by the translation
// from a namespace tool's function (namespace.name) into the two. Names
// of the Responses API's functions and namespaces have no dots (OpenAI
// takes letters, digits, _ and -), so a dot can only be the translation's.
func splitNamespaced(name string) (namespace, fn string) {
	if i := strings.IndexByte(name, '.'); i > 0 && i < len(name)-1 {
		return name[:i], name[i+1:]
	}
	return "", name
}

// appendFunctionTool appends function tool t (at path p) as chat's, its
// name prefixed with namespace and a dot when it belongs to one.
func appendFunctionTool(b []byte, n *int, t wire.Value, namespace, p string) ([]byte, *refusal) {
	var typ, name, description, parameters, strict wire.Value
	_ = t.Members(func(m wire.Member) bool {
		switch m.Name {
		case "type":
			typ = m.Value
		case "name":
			name = m.Value
		case "description":
			description = m.Value
		case "parameters":
			parameters = m.Value
		case "strict":
			strict = m.Value
		}
		return true
	})
	if !typ.Is("function") {
		ts, _ := typ.Str()
		return b, &refusal{param: p + ".type", what: "a tool of type '" + ts + "' (" + p + "): only function tools (alone or in a namespace) are carried"}
	}
	fn, ok := name.Str()
	if !ok || fn == "" {
		return b, &refusal{param: p + ".name", what: "a function tool without a name (" + p + ")"}
	}
	if *n > 0 {
		b = append(b, ',')
	}
	*n++
	b = append(b, `{"type":"function","function":{"name":`...)
	if namespace != "" {
		b = jsonx.String(b, namespace+"."+fn)
	} else {
		b = append(b, name.Raw...)
	}
	if description.Kind() == wire.String {
		b = append(b, `,"description":`...)
		b = append(b, description.Raw...)
	}
	if parameters.Kind() == wire.Object {
		b = append(b, `,"parameters":`...)
		b = append(b, parameters.Raw...)
	}
	if k := strict.Kind(); k == wire.True || k == wire.False {
		b = append(b, `,"strict":`...)
		b = append(b, strict.Raw...)
	}
	return append(b, "}}"...), nil
}

// isWebSearch reports OpenAI's hosted web search tool (web_search,
// web_search_preview and their dated versions), which Codex CLI offers the
// model by default (since early 2026, "cached" mode) to every provider. A
// tool is an offer, not a demand: the engine has no web search to run, so
// the offer is left out of the translation, as if the model chose not to
// search, rather than refused (which would fail every Codex request). A
// tool_choice that demands it is refused.
func isWebSearch(t wire.Value) bool {
	web := false
	_ = t.Members(func(m wire.Member) bool {
		if m.Name == "type" {
			s, _ := m.Value.Str()
			web = strings.HasPrefix(s, "web_search")
		}
		return true
	})
	return web
}

// appendChatToolChoice appends tool_choice in chat's shape.
func appendChatToolChoice(b []byte, v wire.Value) ([]byte, *refusal) {
	if s, ok := v.Str(); ok {
		switch s {
		case "auto", "none", "required":
			return appendMember(b, "tool_choice", v.Raw), nil
		}
		return nil, &refusal{param: "tool_choice", what: "tool_choice '" + valueText(v) + "'"}
	}
	var typ, name wire.Value
	_ = v.Members(func(m wire.Member) bool {
		switch m.Name {
		case "type":
			typ = m.Value
		case "name":
			name = m.Value
		}
		return true
	})
	if !typ.Is("function") || name.Kind() != wire.String {
		t, _ := typ.Str()
		return nil, &refusal{param: "tool_choice", what: "a tool_choice of type '" + t + "'"}
	}
	b = append(b, `,"tool_choice":{"type":"function","function":{"name":`...)
	b = append(b, name.Raw...)
	return append(b, "}}"...), nil
}

// appendTextFormat appends text.format (checked by the door) as
// response_format; text.verbosity asks nothing an engine does.
func appendTextFormat(b []byte, text wire.Value) ([]byte, *refusal) {
	var u *refusal
	_ = text.Members(func(m wire.Member) bool {
		switch m.Name {
		case "verbosity":
		case "format":
			b, u = appendResponseFormat(b, m.Value)
		default:
			if m.Value.Given() {
				u = &refusal{param: "text." + m.Name, what: "'text." + m.Name + "'"}
			}
		}
		return u == nil
	})
	return b, u
}

// appendResponseFormat appends response_format for text.format.
func appendResponseFormat(b []byte, format wire.Value) ([]byte, *refusal) {
	var typ wire.Value
	var rest [][]byte // the json_schema's members: name, schema, description, strict
	_ = format.Members(func(m wire.Member) bool {
		switch m.Name {
		case "type":
			typ = m.Value
		case "name", "schema", "description", "strict":
			if m.Value.Given() {
				rest = append(rest, appendMember(nil, m.Name, m.Value.Raw)[1:])
			}
		}
		return true
	})
	switch t, _ := typ.Str(); t {
	case "", "text":
		return b, nil
	case "json_object":
		return append(b, `,"response_format":{"type":"json_object"}`...), nil
	case "json_schema":
		b = append(b, `,"response_format":{"type":"json_schema","json_schema":{`...)
		b = append(b, bytes.Join(rest, []byte{','})...)
		return append(b, "}}"...), nil
	default:
		return nil, &refusal{param: "text.format.type", what: "text.format of type '" + t + "'"}
	}
}

// appendReasoning appends the engines' reasoning controls for
// reasoning.effort (see the head of this file).
func appendReasoning(b []byte, v wire.Value) ([]byte, *refusal) {
	if v.Kind() != wire.Object {
		return nil, &refusal{param: "reasoning", what: "reasoning that is not an object"}
	}
	var effort wire.Value
	var u *refusal
	_ = v.Members(func(m wire.Member) bool {
		switch m.Name {
		case "effort":
			effort = m.Value
		case "summary", "generate_summary":
			// The reasoning comes whole, as the engine gives it.
		default:
			if m.Value.Given() {
				u = &refusal{param: "reasoning." + m.Name, what: "'reasoning." + m.Name + "'"}
			}
		}
		return u == nil
	})
	if u != nil || !effort.Given() {
		return b, u
	}
	switch e, _ := effort.Str(); e {
	case "none", "minimal":
		return append(b, `,"chat_template_kwargs":{"enable_thinking":false}`...), nil
	case "low", "medium", "high":
		b = appendMember(b, "reasoning_effort", effort.Raw)
	case "xhigh":
		b = append(b, `,"reasoning_effort":"high"`...)
	default:
		return nil, &refusal{param: "reasoning.effort", what: "reasoning.effort '" + valueText(effort) + "'"}
	}
	return append(b, `,"chat_template_kwargs":{"enable_thinking":true}`...), nil
}

// valueText is v in a message: a string's text, another value as written
// (clipped).
func valueText(v wire.Value) string {
	if s, ok := v.Str(); ok && len(s) <= 40 {
		return s
	}
	return v.Clip(40)
}
