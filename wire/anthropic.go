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
	return readLax(data, func(dec *decoder) error {
		*m = AnthropicMessage{}
		if dec.peek() == Null { // read as an empty answer, as ReadAnswer reads it
			if _, err := dec.readToken(); err != nil {
				return dec.fail(err)
			}
			return dec.end()
		}
		if err := dec.object(); err != nil {
			return err
		}
		var bad error // the first member of the wrong type
		err := dec.eachName(func(n []byte) error {
			var wrong, err error
			switch string(n) {
			case "content": // read in place, neither copied nor read again
				var joined []byte
				joined, wrong, err = dec.textBlocks(nil)
				m.Text = string(joined)
			case "usage":
				wrong, err = dec.anthropicUsage(&m.Usage)
			default:
				var v Value
				if v, err = dec.value(); err != nil {
					break
				}
				mv := v.Raw
				switch string(n) {
				case "type":
					wrong = laxString(mv, &m.Type, "type")
				case "object":
					wrong = laxString(mv, &m.Object, "object")
				case "error":
					m.Error = string(mv) != "null"
				case "model":
					m.Model = v
				case "stop_reason":
					wrong = laxString(mv, &m.StopReason, "stop_reason")
				case "input_tokens":
					wrong = laxCount(mv, &m.InputTokens, "input_tokens")
				}
			}
			if bad == nil {
				bad = wrong
			}
			return err
		})
		if err == nil {
			err = dec.end()
		}
		if err != nil {
			return err
		}
		return bad
	})
}

// IsError reports an error report rather than an answer, as Answer.IsError
// does.
func (m *AnthropicMessage) IsError() bool { return m.Error || m.Object == "error" }

// anthropicUsage reads the usage object (or null) dec is at into u. bad
// is a member of the wrong type (the first; the counts after it are not
// read), err a body that is not JSON.
func (dec *decoder) anthropicUsage(u *AnthropicUsage) (bad, err error) {
	*u = AnthropicUsage{Given: dec.peek() == Object}
	return dec.objectIn("usage", func(n []byte) (error, error) {
		v, err := dec.raw()
		if err != nil {
			return nil, err
		}
		switch string(n) {
		case "input_tokens":
			return laxCount(v, &u.InputTokens, "input_tokens"), nil
		case "output_tokens":
			return laxCount(v, &u.OutputTokens, "output_tokens"), nil
		case "cache_creation_input_tokens":
			return laxCount(v, &u.CacheCreationInputTokens, "cache_creation_input_tokens"), nil
		case "cache_read_input_tokens":
			return laxCount(v, &u.CacheReadInputTokens, "cache_read_input_tokens"), nil
		}
		return nil, nil
	})
}

// textBlocks reads the content dec is at, an array of blocks or null,
// appending the text of its text blocks to joined. bad is what is of
// the wrong type (the first; no text is joined after it), err a body
// that is not JSON.
func (dec *decoder) textBlocks(joined []byte) (_ []byte, bad, err error) {
	switch dec.peek() {
	case Array:
	case Null:
		_, err = dec.raw()
		return joined, nil, err
	default:
		_, err = dec.raw()
		return joined, errors.New("content is not an array"), err
	}
	joined, err = dec.eachLax(joined, func(joined []byte) ([]byte, error) {
		if bad != nil {
			_, err := dec.raw()
			return joined, err
		}
		var typ, txt string
		var err error
		bad, err = dec.objectIn("a content block", func(n []byte) (error, error) {
			v, err := dec.raw()
			switch {
			case err != nil:
				return nil, err
			case string(n) == "type":
				return laxString(v, &typ, "type"), nil
			case string(n) == "text":
				return laxString(v, &txt, "text"), nil
			}
			return nil, nil
		})
		if typ == "text" && bad == nil {
			joined = append(joined, txt...)
		}
		return joined, err
	})
	return joined, bad, err
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
	return readLax(data, func(dec *decoder) error {
		*e = AnthropicEvent{}
		if err := dec.object(); err != nil {
			return err
		}
		err := dec.eachName(func(n []byte) error {
			var bad, err error
			switch string(n) {
			case "type":
				var v []byte
				if v, err = dec.raw(); err == nil {
					bad = laxString(v, &e.Type, "type")
				}
			case "usage":
				bad, err = dec.anthropicUsage(&e.Usage)
			case "message":
				bad, err = dec.objectIn("message", func(n []byte) (error, error) {
					if string(n) == "usage" {
						return dec.anthropicUsage(&e.MessageUsage)
					}
					_, err := dec.raw()
					return nil, err
				})
			case "delta":
				bad, err = dec.objectIn("delta", func(n []byte) (error, error) {
					v, err := dec.raw()
					switch {
					case err != nil:
						return nil, err
					case string(n) == "type":
						return laxString(v, &e.DeltaType, "type"), nil
					case string(n) == "text":
						return laxString(v, &e.DeltaText, "text"), nil
					case string(n) == "stop_reason":
						e.StopGiven = string(v) != "null"
						return laxString(v, &e.StopReason, "stop_reason"), nil
					}
					return nil, nil
				})
			case "error":
				bad, err = dec.objectIn("error", func(n []byte) (error, error) {
					v, err := dec.raw()
					if err == nil && string(n) == "type" {
						return laxString(v, &e.ErrorType, "type"), nil
					}
					return nil, err
				})
			default:
				_, err = dec.raw()
			}
			if err != nil {
				return err
			}
			return bad // a member of the wrong type ends the reading
		})
		if err != nil {
			return err
		}
		return dec.end()
	})
}

// objectIn reads the value dec is at, an object or null, calling fn with
// each member's decoded name; fn reads the member's value and returns
// what is wrong with it (bad), if anything, and a body that is not JSON
// (err). After the first fault the rest is read without fn. A value that
// is neither an object nor null is bad, named by name.
func (dec *decoder) objectIn(name string, fn func(n []byte) (bad, err error)) (bad, err error) {
	switch dec.peek() {
	case Object:
	case Null:
		_, err = dec.raw()
		return nil, err
	default:
		_, err = dec.raw()
		return errors.New(name + " is not an object"), err
	}
	if _, err = dec.open(); err != nil {
		return nil, err
	}
	err = dec.eachName(func(n []byte) error {
		if bad != nil {
			_, err := dec.raw()
			return err
		}
		var err error
		bad, err = fn(n)
		return err
	})
	return bad, err
}
