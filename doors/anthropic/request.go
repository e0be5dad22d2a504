package anthropic

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/boundary/reserve"
	"github.com/llmedge/llmedge/wire"
)

// Bounds of the request fields that have none in the shared limits.
const (
	// maxStop bounds stop_sequences: each is matched by the replica at
	// every token.
	maxStop = 32
	// maxTokensLimit bounds max_tokens to what every engine's integer
	// fields hold.
	maxTokensLimit = math.MaxInt32
)

// endpoint is what a codec of this door reads.
type endpoint uint8

const (
	endpointMessages    endpoint = iota // POST /v1/messages
	endpointCountTokens                 // POST /v1/messages/count_tokens
)

// request is what the door read of a body: its members, and the ones it
// reads.
type request struct {
	body    []byte
	object  wire.Value
	members []wire.Member

	model, maxTokens, messages, system, stream, temperature, topP, topK,
	stopSequences, tools, toolChoice, metadata wire.Value

	// msgs are messages' elements, as read.
	msgs []inMessage
}

// inMessage is an element of messages, as read: its role and content
// members, and its content blocks (nil for a string content).
type inMessage struct {
	role    string
	content wire.Value
	blocks  []block
}

// block is one content block of a message, with the members the door reads.
type block struct {
	value wire.Value
	typ   string
	text  wire.Value
}

// decode reads and validates a request of endpoint e. The first problem
// found is reported, with the field's path in Anthropic's style
// ("messages.2.content.0.text: Field required").
//
// The body is carried through to replicas that serve Anthropic's API: the
// door reads what the gateway needs (the model, the messages for routing
// and limits, stream, max_tokens) and checks the shapes of what it reads;
// every other member reaches the replica as the client wrote it.
func (d *Door) decode(r *http.Request, e endpoint) (api.Chat, []byte, *api.Error) {
	if ct := r.Header.Get("Content-Type"); !api.JSONType(ct) {
		return api.Chat{}, nil, invalid("Unsupported Content-Type '" + ct + "': send the request body as application/json.")
	}
	if v := r.Header.Values("Anthropic-Version"); len(v) > 1 || (len(v) == 1 && !isVersion(v[0])) {
		return api.Chat{}, nil, invalid("anthropic-version: '" + strings.Join(v, ", ") +
			"' is not a version of the API; send one date, such as 2023-06-01, or leave the header out.")
	}
	return api.DecodeLeased(r, d.limits.MaxBodyBytes, func(body []byte) (api.Chat, *api.Error) { return d.parse(body, e) })
}

// isVersion reports an anthropic-version value: a date, YYYY-MM-DD. The
// gateway serves one shape of the API whatever the date.
func isVersion(v string) bool {
	if len(v) != 10 || v[4] != '-' || v[7] != '-' {
		return false
	}
	for i, c := range []byte(v) {
		if i != 4 && i != 7 && (c < '0' || c > '9') {
			return false
		}
	}
	return true
}

// readers are reused between requests. A Messages body is read by the
// chat completions reader (wire.ReadChat), whose messages are Anthropic's
// in shape (a role, a content string or list of typed blocks): the body
// is read in one pass, each block's type and text with it, and only the
// other blocks are read again, for the members their type requires.
var readers = sync.Pool{New: func() any { return new(wire.Chat) }}

// parse validates a JSON body into a Chat whose Wire carries it through,
// as the model's mode says.
func (d *Door) parse(body []byte, e endpoint) (api.Chat, *api.Error) {
	wr := readers.Get().(*wire.Chat)
	defer func() {
		wr.Forget()
		readers.Put(wr)
	}()
	if err := wire.ReadChat(body, wr); err != nil {
		var we *wire.Error
		if errors.As(err, &we) && we.Duplicate {
			return api.Chat{}, invalid(dotted(we.Path) + ": given more than once in the request body; give each member once.")
		}
		return api.Chat{}, invalid("The request body is not valid JSON: " + err.Error() + ".")
	}
	if wr.Body.Kind() != wire.Object {
		return api.Chat{}, invalid("The request body must be a JSON object.")
	}
	req := &request{body: body, object: wr.Body, members: append([]wire.Member(nil), wr.Members...)}
	for i, m := range req.members {
		dst := req.field(m.Name)
		if dst != nil {
			*dst = m.Value
		}
		req.members[i].Known = dst != nil // this API's members, not chat's
	}
	chat, aerr := d.validate(req, wr, e)
	if aerr != nil {
		return chat, aerr
	}
	w := &api.Wire{Format: api.FormatAnthropicMessages, Body: body, Object: req.object, Members: req.members, ConvRead: true}
	w.ConvItems, w.ConvMedia = reserve.Read(wr)
	if e == endpointCountTokens {
		// Counted by the replica, not inferred: no messages to route on
		// or to reserve tokens for, one token of reply to reserve. The
		// request's own system prompt is kept as such, so that the model's
		// default is not put in its place: the count is of what
		// /v1/messages would send.
		w.Format = api.FormatAnthropicCountTokens
		if len(chat.Messages) > 0 && chat.Messages[0].Role == api.RoleSystem {
			sys := chat.Messages[0].Text()
			chat.SystemMessage = &sys
		}
		chat.Messages, chat.Sampling = nil, api.Sampling{MaxTokens: 1}
		// A replica without count_tokens counts with its tokenizer the
		// chat form of the request, as /v1/messages would translate it;
		// a model whose requests are translated, at once.
		w.Tokenize = lazyTranslation(req)
		w.TokenizeOnly = d.modes[chat.Model] == ModeTranslate
		chat.Wire = w
		return chat, nil
	}
	switch d.modes[chat.Model] {
	case ModeTranslate:
		tw, u := translate(req)
		if u != nil {
			return chat, invalid(u.Error() + ".")
		}
		w = tw
	case ModeAuto:
		w.Translate = lazyTranslation(req)
	}
	chat.Wire = w
	return chat, nil
}

// field is the member of req the door reads by that name.
func (req *request) field(name string) *wire.Value {
	switch name {
	case "model":
		return &req.model
	case "max_tokens":
		return &req.maxTokens
	case "messages":
		return &req.messages
	case "system":
		return &req.system
	case "stream":
		return &req.stream
	case "temperature":
		return &req.temperature
	case "top_p":
		return &req.topP
	case "top_k":
		return &req.topK
	case "stop_sequences":
		return &req.stopSequences
	case "tools":
		return &req.tools
	case "tool_choice":
		return &req.toolChoice
	case "metadata":
		return &req.metadata
	}
	return nil
}

// validate judges the members req holds, in a fixed order, so that the
// error reported is always the same one.
func (d *Door) validate(req *request, wr *wire.Chat, e endpoint) (api.Chat, *api.Error) {
	var chat api.Chat
	if !req.model.Given() {
		return chat, invalid("model: Field required")
	}
	model, aerr := d.model(req.model)
	if aerr != nil {
		return chat, aerr
	}
	chat.Model = model

	s := &chat.Sampling
	switch {
	case req.maxTokens.Given():
		n, aerr := integerIn(req.maxTokens, "max_tokens", 1, maxTokensLimit)
		if aerr != nil {
			return chat, aerr
		}
		s.MaxTokens = int(n)
	case e == endpointMessages:
		return chat, invalid("max_tokens: Field required")
	}

	if !req.messages.Given() {
		return chat, invalid("messages: Field required")
	}
	if aerr := d.readMessages(req, wr); aerr != nil {
		return chat, aerr
	}
	var sys api.Message
	if req.system.Given() {
		var aerr *api.Error
		if sys, aerr = systemMessage(req.system); aerr != nil {
			return chat, aerr
		}
	}
	msgs, aerr := d.routingMessages(req, sys)
	if aerr != nil {
		return chat, aerr
	}
	chat.Messages = msgs
	if len(msgs) != len(req.msgs) || e == endpointCountTokens {
		chat.Items = len(req.msgs) // the system prompt is not one of max_messages
	}

	if req.stream.Given() {
		b, ok := req.stream.Bool()
		if !ok {
			return chat, typeError("stream", "a valid boolean", req.stream)
		}
		if b && e == endpointCountTokens {
			return chat, invalid("stream: count_tokens does not stream; leave stream out.")
		}
		chat.Stream = b
	}
	if req.temperature.Given() {
		v, aerr := numberIn(req.temperature, "temperature", 0, 1)
		if aerr != nil {
			return chat, aerr
		}
		s.Temperature = &v
	}
	if req.topP.Given() {
		v, aerr := numberIn(req.topP, "top_p", 0, 1)
		if aerr != nil {
			return chat, aerr
		}
		s.TopP = &v
	}
	if req.topK.Given() {
		if _, aerr := integerIn(req.topK, "top_k", 0, maxTokensLimit); aerr != nil {
			return chat, aerr
		}
	}
	if req.stopSequences.Given() {
		stop, aerr := d.stopSequences(req.stopSequences)
		if aerr != nil {
			return chat, aerr
		}
		s.Stop = stop
	}
	if req.metadata.Given() {
		user, aerr := metadataUser(req.metadata)
		if aerr != nil {
			return chat, aerr
		}
		chat.User = user
	}
	if req.tools.Given() && req.tools.Kind() != wire.Array {
		return chat, typeError("tools", "a valid list", req.tools)
	}
	if req.toolChoice.Given() {
		if aerr := toolChoiceType(req.toolChoice); aerr != nil {
			return chat, aerr
		}
	}
	return chat, nil
}

// model is the configured model v names; another is Anthropic's 404.
func (d *Door) model(v wire.Value) (string, *api.Error) {
	for _, m := range d.models {
		if v.Is(m) {
			return m, nil // the usual spelling, compared without a copy
		}
	}
	model, ok := v.Str()
	if !ok {
		return "", typeError("model", "a valid string", v)
	}
	if i := slices.Index(d.models, model); i >= 0 {
		return d.models[i], nil
	}
	if d.names != nil && d.names(model) {
		return model, nil
	}
	return "", &api.Error{Status: http.StatusNotFound, Detail: "model: " + model +
		" is not a model of this gateway (its models are " + strings.Join(d.models, ", ") + ")"}
}

// readMessages reads the shape of every message, as wr read them: an
// object with a role, user, assistant or system, and a content, a string
// or a list of content blocks, each an object with a type and the members
// its type requires.
func (d *Door) readMessages(req *request, wr *wire.Chat) *api.Error {
	v := req.messages
	if v.Kind() != wire.Array {
		return typeError("messages", "a valid list", v)
	}
	n := len(wr.Items)
	if n == 0 {
		return invalid("messages: at least one message is required")
	}
	if max := d.limits.MaxMessages; n > max {
		return invalid(fmt.Sprintf("messages: at most %d messages are accepted, got %d", max, n))
	}
	req.msgs = make([]inMessage, n)
	for i := range wr.Items {
		m := &wr.Items[i]
		rm := &req.msgs[i]
		path := func() string { return "messages." + strconv.Itoa(i) } // built only for an error
		if m.Kind() != wire.Object {
			return typeError(path(), "a valid dictionary", m.Value)
		}
		// A system message may come anywhere: Anthropic's API takes one
		// after a user's turn (Claude Code sends one in the first request
		// of each conversation), and the gateway carries it at its place.
		if !m.Role.Given() {
			return invalid(path() + ".role: Field required")
		}
		r, ok := m.Role.StrOf(api.RoleUser, api.RoleAssistant, api.RoleSystem)
		if !ok || (r != api.RoleUser && r != api.RoleAssistant && r != api.RoleSystem) {
			return invalid(path() + ".role: Input should be 'user', 'assistant' or 'system'" + butGot(m.Role))
		}
		rm.role, rm.content = r, m.Content
		switch m.Content.Kind() {
		case wire.String:
		case wire.Array:
			blocks, aerr := readBlocks(wr, wr.PartsOf(m), func() string { return path() + ".content" })
			if aerr != nil {
				return aerr
			}
			rm.blocks = blocks
		default:
			if !m.Content.Given() {
				return invalid(path() + ".content: Field required")
			}
			return typeError(path()+".content", "a valid string or a list of content blocks", m.Content)
		}
	}
	return nil
}

// readBlocks reads a list of content blocks, at the path path returns: a
// text block as read, any other block's members, the few its type
// requires, as wr recorded them when it read the body (a tool_result's
// content, often most of an agent's context, is read once); with no wr,
// each block's members are read again. The list returned is never nil
// (an empty list is not a string).
func readBlocks(wr *wire.Chat, parts []wire.ChatPart, path func() string) ([]block, *api.Error) {
	blocks := make([]block, 0, len(parts))
	for j, part := range parts {
		p := func() string { return path() + "." + strconv.Itoa(j) } // built only for an error
		if part.Kind() != wire.Object {
			return nil, typeError(p(), "a valid dictionary", part.Value)
		}
		t, ok := part.Type.StrOf(blockTypes...)
		switch {
		case !part.Type.Given():
			return nil, invalid(p() + ".type: Field required")
		case !ok:
			return nil, typeError(p()+".type", "a valid string", part.Type)
		}
		b := block{value: part.Value, typ: t}
		if t == "text" {
			switch {
			case !part.Text.Given():
				return nil, invalid(p() + ".text: Field required")
			case part.Text.Kind() != wire.String:
				return nil, typeError(p()+".text", "a valid string", part.Text)
			}
			b.text = part.Text
			blocks = append(blocks, b)
			continue
		}
		var fields blockFields
		set := func(f wire.Member) bool {
			if dst := fields.field(f.Name); dst != nil && f.Name != "text" {
				*dst = f.Value
			}
			return true
		}
		if wr != nil {
			for _, f := range wr.MembersOf(&parts[j]) {
				set(f)
			}
		} else {
			_ = part.Value.Members(set)
		}
		// The members each type of the API requires, of their type; other
		// types (documents, server tools' blocks) are the replica's to
		// judge.
		var need []struct{ name, kind string }
		switch t {
		case "image":
			need = []struct{ name, kind string }{{"source", "dictionary"}}
		case "tool_use":
			need = []struct{ name, kind string }{{"id", "string"}, {"name", "string"}, {"input", "dictionary"}}
		case "tool_result":
			need = []struct{ name, kind string }{{"tool_use_id", "string"}}
			if c := fields.content; c.Given() && c.Kind() != wire.String && c.Kind() != wire.Array {
				return nil, typeError(p()+".content", "a valid string or a list of content blocks", c)
			}
			if c := fields.isError; c.Given() && c.Kind() != wire.True && c.Kind() != wire.False {
				return nil, typeError(p()+".is_error", "a valid boolean", c)
			}
		}
		for _, n := range need {
			f := *fields.field(n.name)
			kind := wire.String
			if n.kind == "dictionary" {
				kind = wire.Object
			}
			if !f.Given() {
				return nil, invalid(p() + "." + n.name + ": Field required")
			}
			if f.Kind() != kind {
				return nil, typeError(p()+"."+n.name, "a valid "+n.kind, f)
			}
		}
		blocks = append(blocks, b)
	}
	return blocks, nil
}

// partsOf reads the list v as ReadChat reads a content list: each
// element with its type and text.
func partsOf(v wire.Value) []wire.ChatPart {
	var parts []wire.ChatPart
	_ = v.Elements(func(_ int, e wire.Value) bool {
		p := wire.ChatPart{Value: e}
		_ = e.Members(func(m wire.Member) bool {
			switch m.Name {
			case "type":
				p.Type = m.Value
			case "text":
				p.Text = m.Value
			}
			return true
		})
		parts = append(parts, p)
		return true
	})
	return parts
}

// blockTypes are the types of content blocks clients send, which a
// block's type is compared with as written, without a copy.
var blockTypes = []string{"text", "tool_use", "tool_result", "image", "thinking", "redacted_thinking", "document"}

// blockFields are the members of a content block the door checks.
type blockFields struct {
	text, source, id, name, input, toolUseID, content, isError wire.Value
}

func (f *blockFields) field(name string) *wire.Value {
	switch name {
	case "text":
		return &f.text
	case "source":
		return &f.source
	case "id":
		return &f.id
	case "name":
		return &f.name
	case "input":
		return &f.input
	case "tool_use_id":
		return &f.toolUseID
	case "content":
		return &f.content
	case "is_error":
		return &f.isError
	}
	return nil
}

// systemMessage reads system, a string or a list of text blocks, as the
// system message routing and the limits read: left as written
// (api.Message.Quoted, or Parts of the blocks' texts), neither decoded
// nor joined.
func systemMessage(v wire.Value) (api.Message, *api.Error) {
	switch v.Kind() {
	case wire.String:
		return api.Message{Role: api.RoleSystem, Quoted: v.Raw}, nil
	case wire.Array:
		blocks, aerr := readBlocks(nil, partsOf(v), func() string { return "system" })
		if aerr != nil {
			return api.Message{}, aerr
		}
		parts := make([][]byte, len(blocks))
		for j, b := range blocks {
			if b.typ != "text" {
				return api.Message{}, invalid("system." + strconv.Itoa(j) + ".type: Input should be 'text'" + butGot(wire.Value{Raw: []byte(strconv.Quote(b.typ))}))
			}
			parts[j] = b.text.Raw
		}
		return api.Message{Role: api.RoleSystem, Parts: parts}, nil
	}
	return api.Message{}, typeError("system", "a valid string or a list of text blocks", v)
}

// routingMessages are the messages the gateway routes on and limits: the
// system prompt first, then each message as written, neither decoded nor
// joined (api.Message): a string content quoted, a list of blocks as
// Parts, a text block's text and any other block whole (a tool call, a
// tool's result, an image are part of the conversation a replica
// caches). Text is bounded by max_content_chars per message, counted as
// the OpenAI door counts it (api.Message.CharsOver).
func (d *Door) routingMessages(req *request, sys api.Message) ([]api.Message, *api.Error) {
	max := d.limits.MaxContentChars
	msgs := make([]api.Message, 0, len(req.msgs)+1)
	if req.system.Given() {
		if n, over := sys.CharsOver(max); over {
			return nil, invalid(fmt.Sprintf("system: the text is too long: at most %d characters are accepted, got %d", max, n))
		}
		msgs = append(msgs, sys)
	}
	for i := range req.msgs {
		rm := &req.msgs[i]
		m := api.Message{Role: rm.role}
		if blocks := rm.blocks; blocks == nil {
			m.Quoted = rm.content.Raw
		} else {
			m.Parts = make([][]byte, len(blocks))
			for j, bl := range blocks {
				if bl.typ == "text" {
					m.Parts[j] = bl.text.Raw
				} else {
					m.Parts[j] = bl.value.Raw
				}
			}
		}
		if n, over := m.CharsOver(max); over {
			return nil, invalid(fmt.Sprintf("messages.%d.content: the text is too long: at most %d characters are accepted, got %d", i, max, n))
		}
		msgs = append(msgs, m)
	}
	return msgs, nil
}

// stopSequences reads a list of non-empty strings.
func (d *Door) stopSequences(v wire.Value) ([]string, *api.Error) {
	if v.Kind() != wire.Array {
		return nil, typeError("stop_sequences", "a valid list", v)
	}
	var stop []string
	var aerr *api.Error
	_ = v.Elements(func(i int, e wire.Value) bool {
		p := "stop_sequences." + strconv.Itoa(i)
		s, ok := e.Str()
		switch {
		case !ok:
			aerr = typeError(p, "a valid string", e)
		case s == "":
			aerr = invalid(p + ": a stop sequence must not be empty")
		case utf8.RuneCountInString(s) > d.limits.MaxContentChars:
			aerr = invalid(p + ": the stop sequence is too long")
		}
		stop = append(stop, s)
		return aerr == nil
	})
	if aerr != nil {
		return nil, aerr
	}
	if len(stop) > maxStop {
		return nil, invalid(fmt.Sprintf("stop_sequences: at most %d stop sequences are accepted, got %d", maxStop, len(stop)))
	}
	return stop, nil
}

// metadataUser reads metadata: an object whose user_id, when given, is a
// string (the end user, passed on; never trusted for authorization).
func metadataUser(v wire.Value) (string, *api.Error) {
	if v.Kind() != wire.Object {
		return "", typeError("metadata", "a valid dictionary", v)
	}
	var user string
	var aerr *api.Error
	_ = v.Members(func(m wire.Member) bool {
		if m.Name == "user_id" && m.Value.Given() {
			s, ok := m.Value.Str()
			if !ok {
				aerr = typeError("metadata.user_id", "a valid string", m.Value)
				return false
			}
			user = s
		}
		return true
	})
	return user, aerr
}

// toolChoiceType checks that tool_choice is an object with a type of the
// API's, and the name the type tool needs.
func toolChoiceType(v wire.Value) *api.Error {
	if v.Kind() != wire.Object {
		return typeError("tool_choice", "a valid dictionary", v)
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
	t, _ := typ.Str()
	switch t {
	case "auto", "any", "none":
		return nil
	case "tool":
		if _, ok := name.Str(); !ok {
			return invalid("tool_choice.name: Field required when tool_choice.type is 'tool'")
		}
		return nil
	}
	if !typ.Given() {
		return invalid("tool_choice.type: Field required")
	}
	return invalid("tool_choice.type: Input should be 'auto', 'any', 'tool' or 'none'" + butGot(typ))
}

// numberIn reads a number in [min, max].
func numberIn(raw wire.Value, param string, min, max float64) (float64, *api.Error) {
	if raw.Kind() != wire.Number {
		return 0, typeError(param, "a valid number", raw)
	}
	v, err := strconv.ParseFloat(string(raw.Raw), 64)
	if err != nil || v < min || v > max {
		return 0, invalid(fmt.Sprintf("%s: Input should be between %s and %s, got %s", param, fmtNum(min), fmtNum(max), raw.Clip(32)))
	}
	return v, nil
}

// integerIn reads a whole number in [min, max].
func integerIn(raw wire.Value, param string, min, max int64) (int64, *api.Error) {
	if raw.Kind() != wire.Number {
		return 0, typeError(param, "a valid integer", raw)
	}
	n, err := strconv.ParseInt(string(raw.Raw), 10, 64)
	switch {
	case errors.Is(err, strconv.ErrRange):
		return 0, invalid(param + ": the integer " + raw.Clip(32) + " is out of range")
	case err != nil:
		return 0, typeError(param, "a valid integer", raw)
	}
	if n < min {
		return 0, invalid(fmt.Sprintf("%s: Input should be greater than or equal to %d, got %d", param, min, n))
	}
	if n > max {
		return 0, invalid(fmt.Sprintf("%s: Input should be less than or equal to %d, got %d", param, max, n))
	}
	return n, nil
}

// typeError is a 400 naming the field, what it should be and what it was.
func typeError(param, want string, raw wire.Value) *api.Error {
	return invalid(param + ": Input should be " + want + butGot(raw))
}

// butGot names what a value was, for a message.
func butGot(raw wire.Value) string {
	switch raw.Kind() {
	case wire.String:
		return ", got the string " + raw.Clip(32)
	case wire.Object:
		return ", got an object"
	case wire.Array:
		return ", got a list"
	case wire.True, wire.False:
		return ", got a boolean"
	case wire.Null:
		return ", got null"
	case wire.Number:
		return ", got the number " + raw.Clip(32)
	}
	return ""
}

func fmtNum(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

// dotted renders a JSON path as Anthropic's messages do: messages.2.role.
func dotted(path []any) string {
	parts := make([]string, 0, len(path))
	for _, p := range path {
		switch p := p.(type) {
		case int:
			parts = append(parts, strconv.Itoa(p))
		case string:
			parts = append(parts, p)
		}
	}
	if len(parts) == 0 {
		return "body"
	}
	return strings.Join(parts, ".")
}
