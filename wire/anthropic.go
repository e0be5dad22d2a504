package wire

import (
	"errors"
	"strconv"
)

// AnthropicMessage is what ReadAnthropicMessage read of a non-streamed
// answer in Anthropic's Messages format, or of count_tokens' answer.
type AnthropicMessage struct {
	// Model is the "model" member as written, with its span: a door
	// passing the answer through puts its own model name in its place.
	Model Value
	// Object and Error are what tell an error report (IsError): the
	// "object" member, and whether an "error" member other than null was
	// sent.
	Object string
	Error  bool
	// Type is the "type" member: "message" (or "error").
	Type string
	// Text is the text of the content's text blocks, joined.
	Text string
	// StopReason is "" when absent or null.
	StopReason string
	// Usage is the "usage" member.
	Usage AnthropicUsage
	// InputTokens is count_tokens' answer.
	InputTokens Count
}

// AnthropicUsage are the counts of Anthropic's usage object (of a
// message, or of a stream's message_start or message_delta). The input is
// the sum of three: new, written to the cache, read from it.
type AnthropicUsage struct {
	// Given is true when usage was an object (neither absent nor null).
	Given                                                                     bool
	InputTokens, OutputTokens, CacheCreationInputTokens, CacheReadInputTokens Count
}

// ReadAnthropicMessage reads data, a non-streamed answer, into m, in one
// pass, leniently, as the answer readers read (see the package
// documentation). Malformed JSON, or a body that is neither an object nor
// null, is an *Error. A member it reads of the wrong type (a number for
// "type", a string for a count) is another error, returned once the whole
// answer is read, so that m.IsError still tells an error report.
func ReadAnthropicMessage(data []byte, m *AnthropicMessage) error {
	*m = AnthropicMessage{}
	dec := newDecoder(data, true)
	defer dec.free()
	if dec.peek() == Null { // read as an empty answer, as ReadAnswer reads it
		if _, err := dec.d.ReadToken(); err != nil {
			return dec.fail(err)
		}
		return dec.end()
	}
	var bad error // the first member of the wrong type
	keep := func(err error) {
		if bad == nil {
			bad = err
		}
	}
	err := dec.eachMember(func(n []byte, v Value) error {
		mv := v.Raw
		switch string(n) {
		case "type":
			keep(laxString(mv, &m.Type, "type"))
		case "object":
			keep(laxString(mv, &m.Object, "object"))
		case "error":
			m.Error = string(mv) != "null"
		case "model":
			m.Model = v
		case "stop_reason":
			keep(laxString(mv, &m.StopReason, "stop_reason"))
		case "input_tokens":
			keep(laxCount(mv, &m.InputTokens, "input_tokens"))
		case "usage":
			keep(ReadAnthropicUsage(mv, &m.Usage))
		case "content":
			var err error
			m.Text, err = textBlocks(mv)
			keep(err)
		}
		return nil
	})
	if err == nil {
		err = dec.end()
	}
	if err != nil {
		return err
	}
	return bad
}

// IsError reports an error report rather than an answer, as Answer.IsError
// does.
func (m *AnthropicMessage) IsError() bool { return m.Error || m.Object == "error" }

// ReadAnthropicUsage reads v, a usage object or null, into u.
func ReadAnthropicUsage(v []byte, u *AnthropicUsage) error {
	*u = AnthropicUsage{Given: (Value{Raw: v}).Kind() == Object}
	return laxObject(v, "usage", func(n string, mv []byte) error {
		switch n {
		case "input_tokens":
			return laxCount(mv, &u.InputTokens, n)
		case "output_tokens":
			return laxCount(mv, &u.OutputTokens, n)
		case "cache_creation_input_tokens":
			return laxCount(mv, &u.CacheCreationInputTokens, n)
		case "cache_read_input_tokens":
			return laxCount(mv, &u.CacheReadInputTokens, n)
		}
		return nil
	})
}

// textBlocks joins the text of the text blocks of content, an array of
// blocks or null.
func textBlocks(content []byte) (string, error) {
	switch (Value{Raw: content}).Kind() {
	case Array:
	case Null:
		return "", nil
	default:
		return "", errors.New("content is not an array")
	}
	var joined []byte
	var bad error
	_ = Value{Raw: content}.elementsLax(func(block []byte) bool {
		var typ, txt string
		bad = laxObject(block, "a content block", func(n string, mv []byte) error {
			switch n {
			case "type":
				return laxString(mv, &typ, n)
			case "text":
				return laxString(mv, &txt, n)
			}
			return nil
		})
		if typ == "text" {
			joined = append(joined, txt...)
		}
		return bad == nil
	})
	return string(joined), bad
}

// laxString reads a string member (null leaves s as it was).
func laxString(v []byte, s *string, name string) error {
	if string(v) == "null" {
		return nil
	}
	t, ok := text(v)
	if !ok {
		return errors.New(name + " is not a string")
	}
	*s = t
	return nil
}

// laxCount reads a count member, a whole number or null.
func laxCount(v []byte, c *Count, name string) error {
	*c = Count{}
	if string(v) == "null" {
		return nil
	}
	x, err := strconv.ParseInt(string(v), 10, strconv.IntSize)
	if err != nil {
		return errors.New(name + " is not a whole number")
	}
	*c = Count{N: int(x), Given: true}
	return nil
}

// AnthropicEvent is what ReadAnthropicEvent read of one event of an
// Anthropic Messages stream (the data of a server-sent event).
type AnthropicEvent struct {
	// Type is the "type" member ("content_block_delta").
	Type string
	// MessageUsage is message.usage (message_start).
	MessageUsage AnthropicUsage
	// DeltaType, DeltaText and StopReason are delta.type, delta.text and
	// delta.stop_reason; StopGiven is true when stop_reason was a string.
	DeltaType, DeltaText, StopReason string
	StopGiven                        bool
	// Usage is the "usage" member (message_delta).
	Usage AnthropicUsage
	// ErrorType is error.type ("overloaded_error").
	ErrorType string
}

// ReadAnthropicEvent reads one event of an Anthropic stream into e,
// leniently, as the answer readers read (see the package documentation):
// malformed JSON, or a member it reads of the wrong type, is an error.
func ReadAnthropicEvent(data []byte, e *AnthropicEvent) error {
	*e = AnthropicEvent{}
	dec := newDecoder(data, true)
	defer dec.free()
	err := dec.eachMember(func(n []byte, v Value) error {
		mv := v.Raw
		switch string(n) {
		case "type":
			return laxString(mv, &e.Type, "type")
		case "usage":
			return ReadAnthropicUsage(mv, &e.Usage)
		case "message":
			return laxObject(mv, "message", func(n string, v []byte) error {
				if n == "usage" {
					return ReadAnthropicUsage(v, &e.MessageUsage)
				}
				return nil
			})
		case "delta":
			return laxObject(mv, "delta", func(n string, v []byte) error {
				switch n {
				case "type":
					return laxString(v, &e.DeltaType, n)
				case "text":
					return laxString(v, &e.DeltaText, n)
				case "stop_reason":
					e.StopGiven = string(v) != "null"
					return laxString(v, &e.StopReason, n)
				}
				return nil
			})
		case "error":
			return laxObject(mv, "error", func(n string, v []byte) error {
				if n == "type" {
					return laxString(v, &e.ErrorType, n)
				}
				return nil
			})
		}
		return nil
	})
	if err != nil {
		return err
	}
	return dec.end()
}

// laxObject calls fn with each member of v, an object or null, until fn
// returns an error.
func laxObject(v []byte, name string, fn func(n string, v []byte) error) error {
	switch (Value{Raw: v}).Kind() {
	case Object:
	case Null:
		return nil
	default:
		return errors.New(name + " is not an object")
	}
	var bad error
	_ = Value{Raw: v}.membersLax(func(n string, mv []byte) bool {
		bad = fn(n, mv)
		return bad == nil
	})
	return bad
}
