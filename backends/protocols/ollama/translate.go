package ollama

import (
	"encoding/base64"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/backends/protocols"
	"github.com/llmedge/llmedge/wire"
)

// An OpenAI chat request carried through by its door (protocols.Request's
// Wire) is translated into what /api/chat can carry, member by member:
//
//	messages             roles system (and developer), user, assistant, tool;
//	                     text parts joined with newlines; image parts with a
//	                     base64 data: URL as the message's images; an
//	                     assistant's tool_calls with their arguments as an
//	                     object; a tool message's tool_call_id, and the name
//	                     of the function it answers as tool_name; reasoning
//	                     as thinking
//	tools                function tools as written (Ollama takes OpenAI's shape)
//	tool_choice          "auto" (tools sent), "none" (no tools sent)
//	response_format      json_object as format "json", json_schema as format:
//	                     the schema
//	temperature, top_p, seed, stop, max_tokens / max_completion_tokens
//	                     options (max_tokens as num_predict, capped by the model)
//	frequency_penalty, presence_penalty, and the vendor members top_k,
//	min_p, repeat_penalty (repetition_penalty, vLLM's name for it)
//	                     options
//	chat_template_kwargs.enable_thinking false, reasoning_effort "none"
//	                     think false; thinking asked for (enable_thinking
//	                     true, another effort) sends no think: Ollama
//	                     refuses think true for a model without thinking
//	                     (400 "does not support thinking", v0.17), and its
//	                     models with thinking think unless told not to; the
//	                     template's other kwargs are dropped: Ollama's
//	                     templates take none, and vLLM, whose they are,
//	                     ignores those a template does not use
//
// What /api/chat cannot carry is refused (KindUnsupported, naming the
// member and the protocol) before anything is sent: logprobs, n > 1,
// logit_bias, a forced tool choice (required, or a named function),
// tools of other types, legacy functions and function messages, image
// URLs that are not data: URLs (the gateway does not fetch a client's
// URLs: that would let clients make it reach into its own network),
// audio and file parts, and every member it does not know.

// wireRequest is the body of POST /api/chat for a request carried through.
type wireRequest struct {
	Model    string          `json:"model"`
	Messages []wireMessage   `json:"messages"`
	Stream   bool            `json:"stream"`
	Tools    json.RawMessage `json:"tools,omitempty"`
	Format   json.RawMessage `json:"format,omitempty"`
	Think    *bool           `json:"think,omitempty"`
	Options  wireOptions     `json:"options"`
}

// wireMessage is one of /api/chat's messages.
type wireMessage struct {
	Role       string         `json:"role"`
	Content    string         `json:"content"`
	Thinking   string         `json:"thinking,omitempty"`
	Images     []string       `json:"images,omitempty"`
	ToolCalls  []wireToolCall `json:"tool_calls,omitempty"`
	ToolName   string         `json:"tool_name,omitempty"`
	ToolCallID string         `json:"tool_call_id,omitempty"`
}

// wireToolCall is a tool call, in a message sent or in an answer; its
// arguments are a JSON object.
type wireToolCall struct {
	ID       string `json:"id,omitempty"`
	Function struct {
		Index     int             `json:"index"`
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"function"`
}

// wireOptions are /api/chat's options a translated request sets; numbers
// the client wrote are sent as written.
type wireOptions struct {
	Temperature      *float64        `json:"temperature,omitempty"`
	TopP             *float64        `json:"top_p,omitempty"`
	Seed             *int64          `json:"seed,omitempty"`
	Stop             []string        `json:"stop,omitempty"`
	NumPredict       int             `json:"num_predict,omitempty"`
	FrequencyPenalty json.RawMessage `json:"frequency_penalty,omitempty"`
	PresencePenalty  json.RawMessage `json:"presence_penalty,omitempty"`
	TopK             json.RawMessage `json:"top_k,omitempty"`
	MinP             json.RawMessage `json:"min_p,omitempty"`
	RepeatPenalty    json.RawMessage `json:"repeat_penalty,omitempty"`
}

// translated are the members of an OpenAI chat request that /api/chat
// carries (translated), or that only shape the door's answer
// (stream_options).
var translated = protocols.Carried{"model": true, "messages": true, "stream": true, "stream_options": true,
	"temperature": true, "top_p": true, "max_tokens": true, "max_completion_tokens": true, "stop": true, "seed": true,
	"tools": true, "tool_choice": true, "response_format": true, "frequency_penalty": true, "presence_penalty": true,
	"top_k": true, "min_p": true, "repeat_penalty": true, "repetition_penalty": true,
	"chat_template_kwargs": true, "reasoning_effort": true}

// protocolName names the protocol in refusals.
const protocolName = "ollama"

func refuse(param, what string) *protocols.Error {
	return protocols.Unsupported(protocolName, param, what)
}

// translate makes the /api/chat body of req, which its door carries
// through, or refuses what /api/chat cannot carry of it.
func translate(req *protocols.Request) (*wireRequest, *protocols.Error) {
	if err := protocols.Refuse(req, protocolName, translated, nil); err != nil {
		return nil, err
	}
	w := req.Wire
	body := &wireRequest{Model: req.Model, Stream: true, Messages: make([]wireMessage, 0, len(w.Messages)+1),
		Options: wireOptions{Temperature: req.Temperature, TopP: req.TopP, Seed: req.Seed, Stop: req.Stop,
			NumPredict: max(req.MaxTokens, 0)}}
	toolsOff := false
	for _, m := range w.Members {
		v := m.Value
		if !v.Given() {
			continue
		}
		var err *protocols.Error
		switch m.Name {
		case "tools":
			body.Tools, err = tools(v)
		case "tool_choice":
			switch {
			case v.Is("none"):
				toolsOff = true
			case !v.Is("auto"):
				err = refuse("tool_choice", "a tool_choice other than \"auto\" or \"none\" (Ollama cannot force a call)")
			}
		case "response_format":
			body.Format, err = format(v)
		case "frequency_penalty":
			body.Options.FrequencyPenalty, err = number(m.Name, v)
		case "presence_penalty":
			body.Options.PresencePenalty, err = number(m.Name, v)
		case "top_k":
			body.Options.TopK, err = number(m.Name, v)
		case "min_p":
			body.Options.MinP, err = number(m.Name, v)
		case "repeat_penalty", "repetition_penalty":
			body.Options.RepeatPenalty, err = number(m.Name, v)
		case "chat_template_kwargs":
			err = thinkKwarg(&body.Think, v)
		case "reasoning_effort":
			if e, ok := v.Str(); !ok {
				err = refuse(m.Name, "a 'reasoning_effort' that is not a string")
			} else if e == "none" && !kwargsThink(w) {
				body.Think = &thinkOff
			}
		}
		if err != nil {
			return nil, err
		}
	}
	if toolsOff || string(body.Tools) == "[]" {
		body.Tools = nil
	}
	if req.AddSystem != "" {
		body.Messages = append(body.Messages, wireMessage{Role: api.RoleSystem, Content: req.AddSystem})
	}
	names := map[string]string{} // the function each tool call id calls
	for i, mv := range w.Messages {
		msg, err := message(mv, i, names)
		if err != nil {
			return nil, err
		}
		body.Messages = append(body.Messages, msg)
	}
	if req.Continue != "" {
		body.Messages = append(body.Messages, wireMessage{Role: api.RoleAssistant, Content: req.Continue})
	}
	return body, nil
}

// thinkOff is /api/chat's think: false.
var thinkOff = false

// thinkKwarg turns thinking off when chat_template_kwargs' enable_thinking
// is false; true leaves think out (see translate's comment).
func thinkKwarg(think **bool, v wire.Value) *protocols.Error {
	if v.Kind() != wire.Object {
		return refuse("chat_template_kwargs", "a 'chat_template_kwargs' that is not an object")
	}
	var bad *protocols.Error
	_ = v.Members(func(m wire.Member) bool {
		if m.Name != "enable_thinking" || !m.Value.Given() {
			return true
		}
		if k := m.Value.Kind(); k != wire.True && k != wire.False {
			bad = refuse("chat_template_kwargs.enable_thinking", "an 'enable_thinking' that is not a boolean")
			return false
		}
		if m.Value.Kind() == wire.False {
			*think = &thinkOff
		} else {
			*think = nil
		}
		return true
	})
	return bad
}

// kwargsThink reports a request whose chat_template_kwargs set
// enable_thinking: it wins over reasoning_effort, which it is more
// precise than.
func kwargsThink(w *api.Wire) bool {
	m, ok := w.Member("chat_template_kwargs")
	if !ok {
		return false
	}
	set := false
	_ = m.Value.Members(func(k wire.Member) bool {
		set = set || (k.Name == "enable_thinking" && k.Value.Given())
		return !set
	})
	return set
}

// number is a numeric option as written.
func number(name string, v wire.Value) (json.RawMessage, *protocols.Error) {
	if v.Kind() != wire.Number {
		return nil, refuse(name, "a '"+name+"' that is not a number")
	}
	return json.RawMessage(v.Raw), nil
}

// tools checks that every tool is a function tool, which Ollama takes in
// OpenAI's shape, and returns them as written.
func tools(v wire.Value) (json.RawMessage, *protocols.Error) {
	if v.Kind() != wire.Array {
		return nil, refuse("tools", "'tools' that is not an array")
	}
	var bad *protocols.Error
	_ = v.Elements(func(i int, t wire.Value) bool {
		p := "tools[" + strconv.Itoa(i) + "]"
		var typ, fn wire.Value
		_ = t.Members(func(m wire.Member) bool {
			switch m.Name {
			case "type":
				typ = m.Value
			case "function":
				fn = m.Value
			}
			return true
		})
		switch {
		case !typ.Is("function"):
			s, _ := typ.Str()
			bad = refuse(p+".type", "tools of type '"+s+"' (only function tools)")
		case fn.Kind() != wire.Object:
			bad = refuse(p+".function", "a function tool without its function")
		}
		return bad == nil
	})
	if bad != nil {
		return nil, bad
	}
	return json.RawMessage(v.Raw), nil
}

// format translates response_format into /api/chat's format.
func format(v wire.Value) (json.RawMessage, *protocols.Error) {
	var typ, schema wire.Value
	_ = v.Members(func(m wire.Member) bool {
		switch m.Name {
		case "type":
			typ = m.Value
		case "json_schema":
			_ = m.Value.Members(func(s wire.Member) bool {
				if s.Name == "schema" {
					schema = s.Value
				}
				return true
			})
		}
		return true
	})
	switch {
	case typ.Is("text"):
		return nil, nil
	case typ.Is("json_object"):
		return json.RawMessage(`"json"`), nil
	case typ.Is("json_schema") && schema.Kind() == wire.Object:
		return json.RawMessage(schema.Raw), nil
	case typ.Is("json_schema") && !schema.Given():
		return json.RawMessage(`"json"`), nil // any JSON object
	}
	s, _ := typ.Str()
	return nil, refuse("response_format", "a response_format of type '"+s+"'")
}

// message translates message i.
func message(mv wire.Value, i int, names map[string]string) (wireMessage, *protocols.Error) {
	param := func(name string) string {
		p := "messages[" + strconv.Itoa(i) + "]"
		if name != "" {
			p += "." + name
		}
		return p
	}
	var msg wireMessage
	var bad *protocols.Error
	var content, calls, name wire.Value
	_ = mv.Members(func(f wire.Member) bool {
		v := f.Value
		switch f.Name {
		case "role":
			r, _ := v.Str()
			switch r {
			case api.RoleSystem, "developer":
				msg.Role = api.RoleSystem
			case api.RoleUser, api.RoleAssistant, api.RoleTool:
				msg.Role = r
			default:
				bad = refuse(param("role"), "a message of role '"+r+"'")
			}
		case "content":
			content = v
		case "tool_calls":
			calls = v
		case "tool_call_id":
			msg.ToolCallID, _ = v.Str()
		case "name":
			name = v
		case "reasoning_content", "reasoning":
			if s, ok := v.Str(); ok {
				msg.Thinking = s
			}
		case "function_call", "audio":
			if v.Given() {
				bad = refuse(param(f.Name), "an assistant's "+f.Name)
			}
		}
		return bad == nil
	})
	if bad != nil {
		return msg, bad
	}
	if err := messageContent(&msg, content, param("content")); err != nil {
		return msg, err
	}
	if calls.Given() {
		if err := toolCalls(&msg, calls, param("tool_calls"), names); err != nil {
			return msg, err
		}
	}
	if msg.Role == api.RoleTool {
		msg.ToolName = names[msg.ToolCallID]
		if s, ok := name.Str(); ok && msg.ToolName == "" {
			msg.ToolName = s
		}
	}
	return msg, nil
}

// messageContent translates content, a string or an array of parts.
func messageContent(msg *wireMessage, content wire.Value, param string) *protocols.Error {
	if content.Kind() != wire.Array {
		msg.Content = content.Text()
		return nil
	}
	var b strings.Builder
	var bad *protocols.Error
	texts := 0
	_ = content.Elements(func(j int, part wire.Value) bool {
		p := param + "[" + strconv.Itoa(j) + "]"
		var typ, text, image wire.Value
		_ = part.Members(func(m wire.Member) bool {
			switch m.Name {
			case "type":
				typ = m.Value
			case "text":
				text = m.Value
			case "image_url":
				image = m.Value
			}
			return true
		})
		switch {
		case typ.Is("text"):
			if texts > 0 {
				b.WriteByte('\n')
			}
			texts++
			b.WriteString(text.Text())
		case typ.Is("image_url"):
			img, err := imageData(image, p)
			if err != nil {
				bad = err
				return false
			}
			msg.Images = append(msg.Images, img)
		default:
			t, _ := typ.Str()
			bad = refuse(p, "content parts of type '"+t+"'")
		}
		return bad == nil
	})
	msg.Content = b.String()
	return bad
}

// imageData is the base64 data of an image part's data: URL. Ollama takes
// images inline only; a URL to fetch is refused: the gateway does not
// fetch URLs on a client's behalf (it would reach into the gateway's own
// network for whoever asks).
func imageData(image wire.Value, param string) (string, *protocols.Error) {
	url, ok := image.Str()
	if !ok {
		_ = image.Members(func(m wire.Member) bool {
			if m.Name == "url" {
				url, ok = m.Value.Str()
			}
			return true
		})
	}
	if !ok {
		return "", refuse(param, "an image part without its url")
	}
	rest, isData := strings.CutPrefix(url, "data:")
	meta, data, hasComma := strings.Cut(rest, ",")
	if !isData || !hasComma {
		return "", refuse(param, "an image by URL (Ollama takes images inline: send it as a base64 data: URL; the gateway does not fetch URLs)")
	}
	if !strings.HasSuffix(meta, ";base64") {
		return "", refuse(param, "an image data: URL that is not base64")
	}
	if _, err := base64.StdEncoding.DecodeString(data); err != nil {
		return "", refuse(param, "an image data: URL whose base64 is malformed")
	}
	return data, nil
}

// toolCalls translates an assistant's tool calls; their arguments, a JSON
// string in OpenAI's API, are an object in Ollama's.
func toolCalls(msg *wireMessage, calls wire.Value, param string, names map[string]string) *protocols.Error {
	if calls.Kind() != wire.Array {
		return refuse(param, "tool_calls that are not an array")
	}
	var bad *protocols.Error
	_ = calls.Elements(func(k int, c wire.Value) bool {
		p := param + "[" + strconv.Itoa(k) + "]"
		var tc wireToolCall
		var typ, fn wire.Value
		_ = c.Members(func(m wire.Member) bool {
			switch m.Name {
			case "id":
				tc.ID, _ = m.Value.Str()
			case "type":
				typ = m.Value
			case "function":
				fn = m.Value
			}
			return true
		})
		if typ.Given() && !typ.Is("function") {
			s, _ := typ.Str()
			bad = refuse(p+".type", "tool calls of type '"+s+"'")
			return false
		}
		args := "{}"
		_ = fn.Members(func(m wire.Member) bool {
			switch m.Name {
			case "name":
				tc.Function.Name, _ = m.Value.Str()
			case "arguments":
				args = m.Value.Text()
			}
			return true
		})
		var obj map[string]json.RawMessage
		if args = strings.TrimSpace(args); args == "" {
			args = "{}"
		}
		if json.Unmarshal([]byte(args), &obj) != nil || obj == nil {
			bad = refuse(p+".function.arguments", "tool call arguments that are not a JSON object")
			return false
		}
		tc.Function.Index, tc.Function.Arguments = k, json.RawMessage(args)
		if tc.ID != "" {
			names[tc.ID] = tc.Function.Name
		}
		msg.ToolCalls = append(msg.ToolCalls, tc)
		return true
	})
	return bad
}
