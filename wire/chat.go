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
	Role, Content, Name, Refusal, ToolCalls, FunctionCall Value
	// Other is the first member of any other name (Name "" when none).
	Other Member
	// PartsFrom and PartsTo delimit the elements of Content, when it is
	// an array, in Chat.Parts.
	PartsFrom, PartsTo int
}

// ChatPart is one element of a message's content array.
type ChatPart struct {
	// Value is the element as written.
	Value
	// Type and Text are its members when it is an object; others are
	// left alone.
	Type, Text Value
}

// PartsOf returns the content parts of m, one of c.Items.
func (c *Chat) PartsOf(m *ChatMessage) []ChatPart { return c.Parts[m.PartsFrom:m.PartsTo] }

// ReadChat reads body into c, reusing c's slices.
func ReadChat(body []byte, c *Chat) error {
	keep := Chat{Members: c.Members[:0], Items: c.Items[:0], Parts: c.Parts[:0], Stops: c.Stops[:0], Options: c.Options[:0]}
	*c = keep
	dec := newDecoder(body, false)
	defer dec.free()
	err := dec.chat(c)
	if err == nil {
		err = dec.end()
	}
	return err
}

// chatMembers are the members ReadChat reads, by name.
func (c *Chat) field(name []byte) (string, *Value) {
	switch string(name) {
	case "model":
		return "model", &c.Model
	case "messages":
		return "messages", &c.Messages
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

func (dec *decoder) chat(c *Chat) error {
	if dec.peek() != Object {
		v, err := dec.value()
		c.Body = v
		return err
	}
	v, err := dec.object(func(n []byte, start int) error {
		m := Member{Start: start}
		name, field := c.field(n)
		var err error
		switch {
		case name == "messages" && dec.peek() == Array:
			m.Value, err = dec.array(func(int) error { return dec.chatMessage(c) })
		case name == "stop" && dec.peek() == Array:
			m.Value, err = dec.array(func(int) error {
				v, err := dec.value()
				c.Stops = append(c.Stops, v)
				return err
			})
		case name == "stream_options" && dec.peek() == Object:
			m.Value, err = dec.object(func(n []byte, start int) error {
				o := Member{Start: start, Known: true}
				switch string(n) {
				case "include_usage":
					o.Name = "include_usage"
				case "include_obfuscation":
					o.Name = "include_obfuscation"
				default:
					o.Name, o.Known = string(n), false
				}
				var err error
				o.Value, err = dec.value()
				o.End = o.Value.End
				c.Options = append(c.Options, o)
				return err
			})
		default:
			m.Value, err = dec.value()
		}
		if err != nil {
			return err
		}
		m.End = m.Value.End
		if field != nil {
			m.Name, m.Known, *field = name, true, m.Value
		} else {
			m.Name = string(n)
		}
		c.Members = append(c.Members, m)
		return nil
	})
	c.Body = v
	return err
}

func (dec *decoder) chatMessage(c *Chat) error {
	var m ChatMessage
	var err error
	if dec.peek() != Object {
		m.Value, err = dec.value()
		c.Items = append(c.Items, m)
		return err
	}
	m.Value, err = dec.object(func(n []byte, start int) error {
		var field *Value
		switch string(n) {
		case "role":
			field = &m.Role
		case "content":
			field = &m.Content
		case "name":
			field = &m.Name
		case "refusal":
			field = &m.Refusal
		case "tool_calls":
			field = &m.ToolCalls
		case "function_call":
			field = &m.FunctionCall
		}
		var v Value
		var err error
		if field == &m.Content && dec.peek() == Array {
			m.PartsFrom = len(c.Parts)
			v, err = dec.array(func(int) error { return dec.chatPart(c) })
			m.PartsTo = len(c.Parts)
		} else {
			v, err = dec.value()
		}
		switch {
		case field != nil:
			*field = v
		case m.Other.Name == "":
			m.Other = Member{Name: string(n), Start: start, End: v.End, Value: v}
		}
		return err
	})
	c.Items = append(c.Items, m)
	return err
}

func (dec *decoder) chatPart(c *Chat) error {
	var p ChatPart
	var err error
	if dec.peek() != Object {
		p.Value, err = dec.value()
	} else {
		p.Value, err = dec.object(func(n []byte, _ int) error {
			v, err := dec.value()
			switch string(n) {
			case "type":
				p.Type = v
			case "text":
				p.Text = v
			}
			return err
		})
	}
	c.Parts = append(c.Parts, p)
	return err
}

// object reads an object whose '{' is next: fn is called with each
// member's name (decoded) and the offset of its opening quote, and must
// read the member's value.
func (dec *decoder) object(fn func(name []byte, start int) error) (Value, error) {
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
		if err := fn(key(n.Raw), n.Start); err != nil {
			return Value{}, err
		}
	}
	end := dec.offset()
	return Value{Raw: dec.body[start:end:end], Start: start, End: end}, nil
}

// array reads an array whose '[' is next: fn is called for each element,
// which it must read.
func (dec *decoder) array(fn func(i int) error) (Value, error) {
	start, err := dec.open()
	if err != nil {
		return Value{}, err
	}
	for i := 0; ; i++ {
		end, err := dec.close()
		if err != nil {
			return Value{}, err
		}
		if end {
			break
		}
		if err := fn(i); err != nil {
			return Value{}, err
		}
	}
	end := dec.offset()
	return Value{Raw: dec.body[start:end:end], Start: start, End: end}, nil
}
