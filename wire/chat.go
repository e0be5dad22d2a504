package wire

// Chat is what ReadChat read of an OpenAI chat completions request: the
// members the gateway uses, as written, and every top-level member with
// its span, so that the body can be passed on with a member replaced or
// added without encoding the rest again.
type Chat struct {
	// Body is the whole top-level value; the members below are read only
	// when it is an object.
	Body Value
	// Members are the body's members in order. Those the reader reads
	// are Known; the others are recorded, not read.
	Members []Member

	Model, Messages, Stream, StreamOptions, Temperature, TopP, MaxTokens,
	MaxCompletionTokens, Stop, Seed, User, N Value

	// Items are the elements of Messages when it is an array.
	Items []ChatMessage
	// Parts are the elements of the messages' contents that are arrays,
	// message after message (ChatMessage.Parts says which are whose).
	Parts []ChatPart
	// PartMembers are the members of the parts other than type and text,
	// part after part (MembersOf says which are whose): an Anthropic
	// block's tool_use_id, content or input, read with the rest rather
	// than again by the door that needs them.
	PartMembers []Member
	// Stops are the elements of Stop when it is an array.
	Stops []Value
	// Options are the members of StreamOptions when it is an object.
	Options []Member
}

// ChatMessage is one element of messages.
type ChatMessage struct {
	// Value is the element as written.
	Value
	// The members the gateway reads, when the element is an object.
	// Type is an item's type in a Responses API input (ReadInput).
	Role, Content, Name, Refusal, ToolCalls, FunctionCall, Type Value
	// Other is the first member of any other name; its Value.Raw is nil
	// when there is none (a name may be "").
	Other Member
	// PartsFrom and PartsTo delimit the elements of Content, when it is
	// an array, in Chat.Parts.
	PartsFrom, PartsTo int
}

// ChatPart is one element of a message's content array.
type ChatPart struct {
	// Value is the element as written.
	Value
	// Type and Text are its members when it is an object; the others
	// are in Chat.PartMembers, from MembersFrom to MembersTo.
	Type, Text             Value
	MembersFrom, MembersTo int
}

// field is the member of m ReadChat reads by that name.
func (m *ChatMessage) field(name []byte) *Value {
	switch string(name) {
	case "role":
		return &m.Role
	case "content":
		return &m.Content
	case "name":
		return &m.Name
	case "refusal":
		return &m.Refusal
	case "tool_calls":
		return &m.ToolCalls
	case "function_call":
		return &m.FunctionCall
	case "type":
		return &m.Type
	}
	return nil
}

// PartsOf returns the content parts of m, one of c.Items.
func (c *Chat) PartsOf(m *ChatMessage) []ChatPart { return c.Parts[m.PartsFrom:m.PartsTo] }

// MembersOf returns the members of p, one of c.Parts, other than type
// and text, in order, with their spans in the body.
func (c *Chat) MembersOf(p *ChatPart) []Member { return c.PartMembers[p.MembersFrom:p.MembersTo] }

// ReadChat reads body into c, reusing c's slices. The values in c point
// into body.
func ReadChat(body []byte, c *Chat) error { return readChat(body, c, "messages") }

// ReadInput reads the body of an OpenAI Responses API request into c as
// ReadChat reads a chat's, its "input" in the place of "messages": an
// array of items is read as messages are, each item's role, content and
// type (Items) and a content array's elements with their type and text
// (Parts), in one pass; a "messages" member is recorded, not read.
func ReadInput(body []byte, c *Chat) error { return readChat(body, c, "input") }

func readChat(body []byte, c *Chat, messages string) error {
	return readStrict(body, func(dec *decoder) error {
		c.reset()
		err := dec.chat(c, messages)
		if err == nil {
			err = dec.end()
		}
		return err
	})
}

// reset empties c, keeping its slices' room for the next read.
func (c *Chat) reset() {
	*c = Chat{Members: c.Members[:0], Items: c.Items[:0], Parts: c.Parts[:0], PartMembers: c.PartMembers[:0],
		Stops: c.Stops[:0], Options: c.Options[:0]}
}

// Forget drops every reference into the body c read last, keeping its
// slices' room: a Chat kept in a pool between requests must not hold the
// body of the last one.
func (c *Chat) Forget() {
	clear(c.Members)
	clear(c.Items)
	clear(c.Parts)
	clear(c.PartMembers)
	clear(c.Stops)
	clear(c.Options)
	c.reset()
}

// Member returns the top-level member of c named name, or an absent
// Value.
func (c *Chat) Member(name string) Value {
	for _, m := range c.Members {
		if m.Name == name {
			return m.Value
		}
	}
	return Value{}
}

// field is the member of c the reader reads by that name, and the name;
// messages names the member read as the messages.
func (c *Chat) field(name []byte, messages string) (string, *Value) {
	switch string(name) {
	case messages:
		return messages, &c.Messages
	case "model":
		return "model", &c.Model
	case "stream":
		return "stream", &c.Stream
	case "stream_options":
		return "stream_options", &c.StreamOptions
	case "temperature":
		return "temperature", &c.Temperature
	case "top_p":
		return "top_p", &c.TopP
	case "max_tokens":
		return "max_tokens", &c.MaxTokens
	case "max_completion_tokens":
		return "max_completion_tokens", &c.MaxCompletionTokens
	case "stop":
		return "stop", &c.Stop
	case "seed":
		return "seed", &c.Seed
	case "user":
		return "user", &c.User
	case "n":
		return "n", &c.N
	}
	return "", nil
}

// The readers below are loops rather than callbacks, and fill results in
// place: a request is read once per call, but every call counts.

func (dec *decoder) chat(c *Chat, messages string) error {
	if dec.peek() != Object {
		v, err := dec.value()
		c.Body = v
		return err
	}
	start, err := dec.open()
	if err != nil {
		return err
	}
	for {
		n, more, err := dec.name()
		if err != nil {
			return err
		}
		if !more {
			break
		}
		k := n.Raw[1 : len(n.Raw)-1]
		name, field := c.field(k, messages)
		if field == nil {
			if d, esc := unescaped(k); esc {
				k = d
				name, field = c.field(k, messages)
			}
		}
		var v Value
		switch {
		case field == &c.Messages && dec.peek() == Array:
			v, err = dec.chatMessages(c)
		case name == "stop" && dec.peek() == Array:
			v, err = dec.stops(c)
		case name == "stream_options" && dec.peek() == Object:
			v, err = dec.streamOptions(c)
		default:
			v, err = dec.value()
		}
		if err != nil {
			return err
		}
		m := Member{Name: name, Start: n.Start, End: v.End, Value: v, Known: field != nil}
		if field != nil {
			*field = v
		} else {
			m.Name = string(k)
		}
		c.Members = append(c.Members, m)
	}
	end := dec.offset()
	c.Body = dec.span(start, end)
	return nil
}

func (dec *decoder) chatMessages(c *Chat) (Value, error) {
	start, err := dec.open()
	if err != nil {
		return Value{}, err
	}
	for {
		if end, err := dec.close(); end || err != nil {
			e := dec.offset()
			return dec.span(start, e), err
		}
		c.Items = append(c.Items, ChatMessage{})
		m := &c.Items[len(c.Items)-1]
		if dec.peek() != Object {
			if m.Value, err = dec.value(); err != nil {
				return Value{}, err
			}
			m.PartsFrom, m.PartsTo = len(c.Parts), len(c.Parts)
			continue
		}
		if err := dec.chatMessage(c, m); err != nil {
			return Value{}, err
		}
	}
}

func (dec *decoder) chatMessage(c *Chat, m *ChatMessage) error {
	start, err := dec.open()
	if err != nil {
		return err
	}
	m.PartsFrom, m.PartsTo = len(c.Parts), len(c.Parts)
	for {
		n, more, err := dec.name()
		if err != nil {
			return err
		}
		if !more {
			break
		}
		k := n.Raw[1 : len(n.Raw)-1]
		field := m.field(k)
		if field == nil {
			if d, esc := unescaped(k); esc {
				k = d
				field = m.field(k)
			}
		}
		var v Value
		if field == &m.Content && dec.peek() == Array {
			v, err = dec.chatParts(c)
			m.PartsTo = len(c.Parts)
		} else {
			v, err = dec.value()
		}
		if err != nil {
			return err
		}
		switch {
		case field != nil:
			*field = v
		case m.Other.Value.Raw == nil:
			m.Other = Member{Name: string(k), Start: n.Start, End: v.End, Value: v}
		}
	}
	end := dec.offset()
	m.Value = dec.span(start, end)
	return nil
}

func (dec *decoder) chatParts(c *Chat) (Value, error) {
	start, err := dec.open()
	if err != nil {
		return Value{}, err
	}
	for {
		if end, err := dec.close(); end || err != nil {
			e := dec.offset()
			return dec.span(start, e), err
		}
		c.Parts = append(c.Parts, ChatPart{})
		p := &c.Parts[len(c.Parts)-1]
		if dec.peek() != Object {
			if p.Value, err = dec.value(); err != nil {
				return Value{}, err
			}
			continue
		}
		pstart, err := dec.open()
		if err != nil {
			return Value{}, err
		}
		p.MembersFrom = len(c.PartMembers)
		for {
			n, more, err := dec.name()
			if err != nil {
				return Value{}, err
			}
			if !more {
				break
			}
			v, err := dec.value()
			if err != nil {
				return Value{}, err
			}
			k := n.Raw[1 : len(n.Raw)-1]
			if string(k) != "type" && string(k) != "text" {
				k, _ = unescaped(k)
			}
			switch string(k) {
			case "type":
				p.Type = v
			case "text":
				p.Text = v
			default:
				c.PartMembers = append(c.PartMembers, Member{Name: partName(k), Start: n.Start, End: v.End, Value: v})
			}
		}
		p.MembersTo = len(c.PartMembers)
		e := dec.offset()
		p.Value = dec.span(pstart, e)
	}
}

// partName is a part's member name as a string: the names content parts
// usually have without an allocation each.
func partName(k []byte) string {
	switch string(k) {
	case "cache_control":
		return "cache_control"
	case "tool_use_id":
		return "tool_use_id"
	case "content":
		return "content"
	case "is_error":
		return "is_error"
	case "id":
		return "id"
	case "name":
		return "name"
	case "input":
		return "input"
	case "source":
		return "source"
	case "image_url":
		return "image_url"
	case "input_audio":
		return "input_audio"
	case "file":
		return "file"
	case "thinking":
		return "thinking"
	case "signature":
		return "signature"
	case "data":
		return "data"
	case "citations":
		return "citations"
	}
	return string(k)
}

func (dec *decoder) stops(c *Chat) (Value, error) {
	start, err := dec.open()
	if err != nil {
		return Value{}, err
	}
	for {
		if end, err := dec.close(); end || err != nil {
			e := dec.offset()
			return dec.span(start, e), err
		}
		v, err := dec.value()
		if err != nil {
			return Value{}, err
		}
		c.Stops = append(c.Stops, v)
	}
}

func (dec *decoder) streamOptions(c *Chat) (Value, error) {
	start, err := dec.open()
	if err != nil {
		return Value{}, err
	}
	for {
		n, more, err := dec.name()
		if err != nil {
			return Value{}, err
		}
		if !more {
			break
		}
		v, err := dec.value()
		if err != nil {
			return Value{}, err
		}
		o := Member{Start: n.Start, End: v.End, Value: v, Known: true}
		switch k := key(n.Raw); string(k) {
		case "include_usage":
			o.Name = "include_usage"
		case "include_obfuscation":
			o.Name = "include_obfuscation"
		default:
			o.Name, o.Known = string(k), false
		}
		c.Options = append(c.Options, o)
	}
	e := dec.offset()
	return dec.span(start, e), nil
}
