package anthropic

import (
	"bytes"
	"encoding/json"
	"strconv"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/backends/protocols"
	"github.com/llmedge/llmedge/internal/jsonx"
	"github.com/llmedge/llmedge/wire"
)

// This file translates a Messages request into OpenAI's chat completions,
// for replicas that do not serve Anthropic's API (the model's mode
// translate, or auto for a replica found without /v1/messages, or one
// whose protocol speaks only OpenAI's chat: Ollama's /api/chat, another
// llmedge). Every member is mapped or refused, naming it; none is dropped
// silently but those that ask nothing of the model:
//
//	model, max_tokens, temperature, top_p, stream   the same members
//	top_k                                           top_k (vLLM's, llama.cpp's extra)
//	stop_sequences                                  stop
//	metadata.user_id                                user (other metadata is dropped: it asks nothing)
//	system (a string, or text blocks joined by
//	  newlines)                                     a first message of role system
//	tools [{name, description, input_schema}]       [{type: function, function: {name, description, parameters}}]
//	tool_choice auto | any | none | tool {name}     "auto" | "required" | "none" | {type: function, function: {name}}
//	tool_choice.disable_parallel_tool_use: true     parallel_tool_calls: false
//	thinking, output_config, output_format,
//	  chat_template_kwargs                          chat_template_kwargs.enable_thinking, reasoning_effort,
//	                                                response_format (controls.go)
//	context_management                              applied by the gateway to the messages (context.go)
//	service_tier, speed, container: null,
//	  cache_control (here and on every block,
//	  tool and system block)                        nothing (they ask nothing of a model)
//	priority, cache_salt                            nothing (the gateway sets its own)
//
// Messages: a string content stays a string; text blocks become text
// parts (one alone, a string); a system message (anywhere: Anthropic's API
// takes one after a user's turn) a message of role system at its place,
// its text blocks joined with newlines; an image block (a base64 source,
// or a url one) an image_url part (a data: URL for base64); an assistant's
// tool_use blocks its tool_calls (id, name, input as a JSON string); a
// user's tool_result blocks tool messages (tool_call_id, the text of its
// content; "Error: " before it when is_error), put before the rest of
// their message, as chat completions want a tool's result right after the
// call, its images (a tool message carries text alone) image_url parts of
// the rest of the user's message; thinking and redacted_thinking blocks of
// earlier turns are dropped (as Anthropic's API drops them from the
// prompt). Documents, server tools and their blocks, and any member the
// door does not know are refused.
//
// The anthropic-beta header asks for features of Anthropic's service; the
// door reads none and refuses none: what a feature adds to the body is
// translated as above, or refused by name.

// untranslatable names what a translation cannot carry, or (msg) what is
// malformed in a member only the translation reads.
type untranslatable struct {
	param, what, msg string
}

func (u *untranslatable) Error() string {
	if u.msg != "" {
		return u.msg
	}
	return u.what + " has no equivalent in OpenAI's chat completions, to which this model's requests are " +
		"translated for replicas that do not serve Anthropic's Messages API; leave it out"
}

// malformed is the error of a member of the wrong shape, at param.
func malformed(param, msg string) *untranslatable { return &untranslatable{param: param, msg: msg} }

// lazyTranslation is the request's translation, made when a replica first
// needs it.
func lazyTranslation(req *request) func() (*api.Wire, error) {
	return protocols.Lazy(func() (*api.Wire, error) {
		w, u := translate(req)
		if u != nil {
			return nil, &protocols.Error{Kind: protocols.KindUnsupported, Param: u.param, Message: u.Error()}
		}
		return w, nil
	})
}

// translate is req as a chat completions request, carried through in
// OpenAI's format (so that a protocol edits it as the OpenAI door's).
func translate(req *request) (*api.Wire, *untranslatable) {
	body, u := appendChat(make([]byte, 0, len(req.body)+256), req)
	if u != nil {
		return nil, u
	}
	w, err := protocols.ChatWire(body)
	if err != nil {
		return nil, &untranslatable{param: "messages", what: "this request (" + err.Error() + ")"}
	}
	return w, nil
}

// appendChat appends the chat completions body of req.
func appendChat(b []byte, req *request) ([]byte, *untranslatable) {
	var edits *contextEdits
	for _, m := range req.members {
		if m.Name == "context_management" && m.Value.Given() {
			var u *untranslatable
			if edits, u = readContextManagement(req, m.Value); u != nil {
				return nil, u
			}
		}
	}
	b = append(b, `{"model":`...)
	b = append(b, req.model.Raw...)
	b = append(b, `,"messages":[`...)
	n := 0 // messages written
	if req.system.Given() {
		b = next(b, &n)
		b = append(b, `{"role":"system","content":`...)
		if req.system.Kind() == wire.String {
			b = append(b, req.system.Raw...)
		} else {
			sys, _ := systemMessage(req.system)
			b = jsonx.String(b, sys.Text()) // the blocks' texts joined
		}
		b = append(b, '}')
	}
	for i := range req.msgs {
		var u *untranslatable
		if b, u = appendMessage(b, req, i, &n, edits); u != nil {
			return nil, u
		}
	}
	b = append(b, ']')
	var ctl controls
	for _, m := range req.members {
		if !m.Value.Given() {
			continue
		}
		var u *untranslatable
		switch m.Name {
		case "model", "messages", "system", "context_management":
		case "max_tokens", "temperature", "top_p", "top_k", "stream":
			b = appendMember(b, m.Name, m.Value.Raw)
		case "stop_sequences":
			b = appendMember(b, "stop", m.Value.Raw)
		case "metadata":
			if user, _ := metadataUser(m.Value); user != "" {
				b = appendMember(b, "user", jsonx.String(nil, user))
			}
		case "tools":
			b, u = appendTools(b, m.Value)
		case "tool_choice":
			b = appendToolChoice(b, m.Value)
		case "thinking":
			u = ctl.readThinking(m.Value)
		case "output_config":
			u = ctl.readOutputConfig(m.Value)
		case "output_format":
			u = ctl.readFormat(m.Value, m.Name) // the structured outputs beta's name
		case "chat_template_kwargs":
			u = ctl.readKwargs(m.Value)
		case "service_tier", "cache_control", "container", "speed":
			// Hints about Anthropic's own service: they ask nothing of a
			// model.
		case "priority", "cache_salt":
			// The gateway's own (boundary/members): it sets its values on
			// the translation, never the client's.
		default:
			u = &untranslatable{param: m.Name, what: "'" + m.Name + "'"}
		}
		if u != nil {
			return nil, u
		}
	}
	b = ctl.append(b)
	return append(b, '}'), nil
}

// next appends the comma before an element of a list that has *n
// elements, and counts it.
func next(b []byte, n *int) []byte {
	if *n > 0 {
		b = append(b, ',')
	}
	*n++
	return b
}

// appendMember appends ,"name":value.
func appendMember(b []byte, name string, value []byte) []byte {
	b = append(b, ',')
	b = jsonx.String(b, name)
	b = append(b, ':')
	return append(b, value...)
}

// appendMessage appends message i as chat messages: a user's tool results
// first, each a tool message, then the rest; edits clear tool results and
// inputs.
func appendMessage(b []byte, req *request, i int, n *int, edits *contextEdits) ([]byte, *untranslatable) {
	rm := &req.msgs[i]
	role, blocks := rm.role, rm.blocks
	path := "messages." + strconv.Itoa(i)
	if role == "system" && blocks != nil {
		return appendSystemMessage(b, blocks, path, n)
	}
	if blocks == nil {
		b = next(b, n)
		b = append(b, `{"role":`...)
		b = jsonx.String(b, role)
		b = append(b, `,"content":`...)
		b = append(b, rm.content.Raw...)
		return append(b, '}'), nil
	}
	var parts, calls [][]byte
	texts := 0
	for j, bl := range blocks {
		p := path + ".content." + strconv.Itoa(j)
		var f blockFields
		_ = bl.value.Members(func(m wire.Member) bool {
			if dst := f.field(m.Name); dst != nil {
				*dst = m.Value
			}
			return true
		})
		switch bl.typ {
		case "text":
			parts = append(parts, append(append([]byte(`{"type":"text","text":`), f.text.Raw...), '}'))
			texts++
		case "image":
			if role != "user" {
				return nil, &untranslatable{param: p, what: "an image in an assistant's message (" + p + ")"}
			}
			url, u := imageURL(f.source, p)
			if u != nil {
				return nil, u
			}
			part := append([]byte(`{"type":"image_url","image_url":{"url":`), url...)
			parts = append(parts, append(part, "}}"...))
		case "tool_use":
			if role != "assistant" {
				return nil, &untranslatable{param: p, what: "a tool_use block in a user's message (" + p + ")"}
			}
			call := append([]byte(`{"id":`), f.id.Raw...)
			call = append(call, `,"type":"function","function":{"name":`...)
			call = append(call, f.name.Raw...)
			call = append(call, `,"arguments":`...)
			if edits.clearsInput(f.id) {
				call = append(call, `"{}"`...)
			} else {
				call = jsonx.String(call, string(compact(f.input.Raw)))
			}
			calls = append(calls, append(call, "}}"...))
		case "tool_result":
			if role != "user" {
				return nil, &untranslatable{param: p, what: "a tool_result block in an assistant's message (" + p + ")"}
			}
			text := clearedResult
			if !edits.clearsResult(f.toolUseID) {
				var images [][]byte
				var u *untranslatable
				if text, images, u = toolResultText(f.content, p); u != nil {
					return nil, u
				}
				if f.isError.Kind() == wire.True {
					text = "Error: " + text
				}
				if len(images) > 0 {
					// A tool message carries text alone: its images
					// follow in the user's message, after the results.
					text += imagesFollow
					parts = append(parts, images...)
				}
			}
			b = next(b, n)
			b = append(b, `{"role":"tool","tool_call_id":`...)
			b = append(b, f.toolUseID.Raw...)
			b = append(b, `,"content":`...)
			b = jsonx.String(b, text)
			b = append(b, '}')
		case "thinking", "redacted_thinking":
			// An earlier turn's reasoning: not part of the prompt.
		default:
			return nil, &untranslatable{param: p, what: "a content block of type '" + bl.typ + "' (" + p + ")"}
		}
	}
	if len(parts) == 0 && len(calls) == 0 {
		if role == "user" {
			return b, nil // tool results alone
		}
		parts = append(parts, []byte(`{"type":"text","text":""}`))
		texts++
	}
	b = next(b, n)
	b = append(b, `{"role":`...)
	b = jsonx.String(b, role)
	b = append(b, `,"content":`...)
	switch {
	case len(parts) == 0:
		b = append(b, "null"...)
	case len(parts) == 1 && texts == 1:
		// One text: a string, which every engine's template takes.
		b = append(b, textOf(parts[0])...)
	default:
		b = append(b, '[')
		b = append(b, bytes.Join(parts, []byte{','})...)
		b = append(b, ']')
	}
	if len(calls) > 0 {
		b = append(b, `,"tool_calls":[`...)
		b = append(b, bytes.Join(calls, []byte{','})...)
		b = append(b, ']')
	}
	return append(b, '}'), nil
}

// appendSystemMessage appends a system message given as blocks: a
// system message of their texts, joined with newlines (their
// cache_control asks nothing of an engine).
func appendSystemMessage(b []byte, blocks []block, path string, n *int) ([]byte, *untranslatable) {
	var text []byte
	for j, bl := range blocks {
		if bl.typ != "text" {
			p := path + ".content." + strconv.Itoa(j)
			return nil, &untranslatable{param: p, what: "a block of type '" + bl.typ + "' in a system message (" + p + ")"}
		}
		if j > 0 {
			text = append(text, '\n')
		}
		text = append(text, bl.text.Text()...)
	}
	b = next(b, n)
	b = append(b, `{"role":"system","content":`...)
	b = jsonx.String(b, string(text))
	return append(b, '}'), nil
}

// textOf is the text value of a text part the door wrote:
// {"type":"text","text":<value>}.
func textOf(part []byte) []byte {
	const head = `{"type":"text","text":`
	return part[len(head) : len(part)-1]
}

// compact is a JSON value without insignificant space.
func compact(raw []byte) []byte {
	var c bytes.Buffer
	if json.Compact(&c, raw) != nil {
		return raw
	}
	return c.Bytes()
}

// imageURL is the url of an image_url part for an image block's source:
// a data: URL for a base64 source, the url of a url one.
func imageURL(source wire.Value, p string) ([]byte, *untranslatable) {
	var typ, mediaType, data, url wire.Value
	_ = source.Members(func(m wire.Member) bool {
		switch m.Name {
		case "type":
			typ = m.Value
		case "media_type":
			mediaType = m.Value
		case "data":
			data = m.Value
		case "url":
			url = m.Value
		}
		return true
	})
	switch {
	case typ.Is("base64") && mediaType.Kind() == wire.String && data.Kind() == wire.String:
		return jsonx.String(nil, "data:"+mediaType.Text()+";base64,"+data.Text()), nil
	case typ.Is("url") && url.Kind() == wire.String:
		return url.Raw, nil
	}
	t, _ := typ.Str()
	return nil, &untranslatable{param: p + ".source", what: "an image source of type '" + t + "' (" + p + ".source)"}
}

// imagesFollow ends the text of a tool's result whose images follow it.
const imagesFollow = "\n[the images of this result follow]"

// toolResultText is a tool_result's content as text: a string, or its
// text blocks joined with newlines; and its images, as image_url parts
// (a tool message cannot carry them: Claude Code's Read tool answers with
// one for an image file). Another block in it is refused.
func toolResultText(content wire.Value, p string) (string, [][]byte, *untranslatable) {
	switch content.Kind() {
	case wire.String:
		return content.Text(), nil, nil
	case wire.Array:
		var texts []byte
		var images [][]byte
		var u *untranslatable
		_ = content.Elements(func(k int, e wire.Value) bool {
			var typ, text, source wire.Value
			_ = e.Members(func(m wire.Member) bool {
				switch m.Name {
				case "type":
					typ = m.Value
				case "text":
					text = m.Value
				case "source":
					source = m.Value
				}
				return true
			})
			q := p + ".content." + strconv.Itoa(k)
			switch {
			case typ.Is("image"):
				var url []byte
				if url, u = imageURL(source, q); u == nil {
					part := append([]byte(`{"type":"image_url","image_url":{"url":`), url...)
					images = append(images, append(part, "}}"...))
				}
				return u == nil
			case !typ.Is("text") || text.Kind() != wire.String:
				t, _ := typ.Str()
				u = &untranslatable{param: q, what: "a block of type '" + t + "' in a tool's result (" + q + ")"}
				return false
			}
			if len(texts) > 0 {
				texts = append(texts, '\n')
			}
			texts = append(texts, text.Text()...)
			return true
		})
		return string(texts), images, u
	}
	return "", nil, nil
}

// appendTools appends tools as OpenAI's function tools.
func appendTools(b []byte, tools wire.Value) ([]byte, *untranslatable) {
	b = append(b, `,"tools":[`...)
	var u *untranslatable
	_ = tools.Elements(func(i int, t wire.Value) bool {
		p := "tools." + strconv.Itoa(i)
		var typ, name, description, schema wire.Value
		_ = t.Members(func(m wire.Member) bool {
			switch m.Name {
			case "type":
				typ = m.Value
			case "name":
				name = m.Value
			case "description":
				description = m.Value
			case "input_schema":
				schema = m.Value
			}
			return true
		})
		if typ.Given() && !typ.Is("custom") {
			ts, _ := typ.Str()
			u = &untranslatable{param: p, what: "the server tool '" + ts + "' (" + p + ")"}
			return false
		}
		if name.Kind() != wire.String || schema.Kind() != wire.Object {
			u = &untranslatable{param: p, what: "a tool without a name and an input_schema object (" + p + ")"}
			return false
		}
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"type":"function","function":{"name":`...)
		b = append(b, name.Raw...)
		if description.Kind() == wire.String {
			b = append(b, `,"description":`...)
			b = append(b, description.Raw...)
		}
		b = append(b, `,"parameters":`...)
		b = append(b, schema.Raw...)
		b = append(b, "}}"...)
		return true
	})
	return append(b, ']'), u
}

// appendToolChoice appends tool_choice (validated by the door) and, when
// it turns parallel calls off, parallel_tool_calls.
func appendToolChoice(b []byte, v wire.Value) []byte {
	var typ, name wire.Value
	serial := false
	_ = v.Members(func(m wire.Member) bool {
		switch m.Name {
		case "type":
			typ = m.Value
		case "name":
			name = m.Value
		case "disable_parallel_tool_use":
			serial = m.Value.Kind() == wire.True
		}
		return true
	})
	b = append(b, `,"tool_choice":`...)
	switch t, _ := typ.Str(); t {
	case "any":
		b = append(b, `"required"`...)
	case "none":
		b = append(b, `"none"`...)
	case "tool":
		b = append(b, `{"type":"function","function":{"name":`...)
		b = append(b, name.Raw...)
		b = append(b, "}}"...)
	default:
		b = append(b, `"auto"`...)
	}
	if serial {
		b = append(b, `,"parallel_tool_calls":false`...)
	}
	return b
}
