package wire

import (
	"errors"
	"strconv"
)

// ResponsesEvent is what ReadResponsesEvent read of one event of an
// OpenAI Responses API stream (the data of a server-sent event): its
// type, its text, and the response object that several events carry
// (response.created, response.in_progress, response.completed,
// response.incomplete, response.failed).
type ResponsesEvent struct {
	// Type is the "type" member ("response.output_text.delta").
	Type string
	// Delta is the "delta" member when it is a string: the new text of an
	// output_text, a refusal, a function call's arguments or reasoning.
	Delta string
	// Message is the "message" member: an error event's text.
	Message string
	// Error is true when an "error" member other than null was sent (an
	// error in the place of an event, as vLLM and llama.cpp write one).
	Error bool
	// Response is the "response" member.
	Response Response
}

// Response is what the readers read of a Responses API response object.
type Response struct {
	// Given is true when the response was an object.
	Given bool
	// Span is the object as written, with its span in the data read.
	Span Value
	// Model is the "model" member as written, with its span in the data
	// read: a door passing the response on puts its own name in its place.
	Model Value
	// Status is "completed", "incomplete", "failed", "in_progress"...
	Status string
	// IncompleteReason is incomplete_details.reason ("max_output_tokens").
	IncompleteReason string
	// Error is true when "error" is not null; ErrorMessage is its message.
	Error        bool
	ErrorMessage string
	// Object is the "object" member: "response", or "error" in old vLLM's
	// flat error shape.
	Object string
	// Usage are the counts of "usage" (input_tokens, output_tokens,
	// total_tokens), in the chat answer's terms.
	Usage Usage
	// Text is the text of the output's messages: their output_text parts,
	// joined.
	Text string
}

// ReadResponsesEvent reads one event of a Responses stream into e,
// leniently, as the answer readers read (see the package documentation):
// a repeated member's last occurrence counts, invalid UTF-8 becomes
// U+FFFD, members the gateway does not read may hold anything. A member it
// reads of the wrong type (a number for "type") is an *Error.
func ReadResponsesEvent(data []byte, e *ResponsesEvent) error {
	return readLax(data, func(dec *decoder) error {
		*e = ResponsesEvent{}
		if err := dec.responsesEvent(e); err != nil {
			return err
		}
		return dec.end()
	})
}

// ReadResponse reads a whole Responses API response object (a
// non-streamed answer) into r, as ReadResponsesEvent reads.
func ReadResponse(data []byte, r *Response) error {
	return readLax(data, func(dec *decoder) error {
		*r = Response{}
		if err := dec.response(r); err != nil {
			return err
		}
		return dec.end()
	})
}

func (dec *decoder) responsesEvent(e *ResponsesEvent) error {
	k, err := dec.readToken()
	if err != nil {
		return dec.fail(err)
	}
	if k != '{' {
		return dec.kindErr(k, "an object")
	}
	for {
		n, ok, err := dec.member()
		if !ok {
			return err
		}
		if d, esc := unescaped(n); esc {
			n = d
		}
		switch string(n) {
		case "type", "message":
			v, err := dec.raw()
			if err != nil {
				return err
			}
			s, ok := text(v)
			if !ok {
				return dec.valueErr(v, "a string", string(n))
			}
			if string(n) == "type" {
				e.Type = s
			} else {
				e.Message = s
			}
		case "delta":
			v, err := dec.raw()
			if err != nil {
				return err
			}
			e.Delta, _ = text(v) // an object delta (a hosted tool's) carries no text
		case "error":
			v, err := dec.raw()
			if err != nil {
				return err
			}
			e.Error = string(v) != "null"
		case "response":
			if err := dec.response(&e.Response); err != nil {
				return err
			}
		default:
			if _, err := dec.raw(); err != nil {
				return err
			}
		}
	}
}

// response reads a response object, or null.
func (dec *decoder) response(r *Response) error {
	*r = Response{}
	start := dec.start()
	k, err := dec.readToken()
	if err != nil {
		return dec.fail(err)
	}
	switch k {
	case '{':
	case 'n':
		return nil
	default:
		return dec.kindErr(k, "an object", "response")
	}
	r.Given = true
	for {
		n, ok, err := dec.member()
		if err != nil {
			return err
		}
		if !ok {
			break
		}
		if d, esc := unescaped(n); esc {
			n = d
		}
		at := dec.start()
		if string(n) == "output" { // read in place, not copied and read again
			var joined []byte
			if joined, err = dec.outputText(joined); err != nil {
				return err
			}
			r.Text = string(joined)
			continue
		}
		v, err := dec.raw()
		if err != nil {
			return err
		}
		switch string(n) {
		case "model":
			end := at + len(v)
			r.Model = dec.span(at, end)
		case "status", "object":
			s, ok := text(v)
			if !ok {
				return dec.valueErr(v, "a string", "response", string(n))
			}
			if string(n) == "status" {
				r.Status = s
			} else {
				r.Object = s
			}
		case "error":
			r.Error = string(v) != "null"
			if r.Error {
				r.ErrorMessage = lookupString(v, "message")
				if r.ErrorMessage == "" {
					r.ErrorMessage, _ = text(v) // {"error":"..."}
				}
			}
		case "incomplete_details":
			r.IncompleteReason = lookupString(v, "reason")
		case "usage":
			if err := readResponsesUsage(v, &r.Usage); err != nil {
				return &Error{Offset: at, Path: []any{"response", "usage"}, Err: err}
			}
		}
	}
	end := dec.offset()
	r.Span = dec.span(start, end)
	return nil
}

// lookupString is the string member name of the object v ("" when v is
// not an object, or has none).
func lookupString(v []byte, name string) string {
	var s string
	_ = Value{Raw: v}.membersLax(func(n string, mv []byte) bool {
		if n == name {
			s, _ = text(mv)
		}
		return true
	})
	return s
}

// readResponsesUsage reads the Responses API's counts into u, in the chat
// answer's terms (input_tokens as PromptTokens, output_tokens as
// CompletionTokens).
func readResponsesUsage(v []byte, u *Usage) error {
	*u = Usage{}
	if (Value{Raw: v}).Kind() != Object {
		return nil // null, or what no count can be read of
	}
	u.Given = true
	var bad error
	_ = Value{Raw: v}.membersLax(func(n string, mv []byte) bool {
		var c *Count
		switch n {
		case "input_tokens":
			c = &u.PromptTokens
		case "output_tokens":
			c = &u.CompletionTokens
		case "total_tokens":
			c = &u.TotalTokens
		case "input_tokens_details":
			u.CachedTokens = cachedTokens(mv)
			return true
		default:
			return true
		}
		*c = Count{}
		if string(mv) == "null" {
			return true
		}
		x, err := strconv.ParseInt(string(mv), 10, strconv.IntSize)
		if err != nil {
			bad = err
			return false
		}
		*c = Count{N: int(x), Given: true}
		return true
	})
	return bad
}

// outputText reads the output array dec is at and appends to joined the
// text of the output_text parts of its message items, in one pass (an
// answer's output was read whole, then each level of it again). Read
// leniently: what is not of the kind looked for (an item that is not an
// object, a type that is not a string, ...) is passed over as absent;
// the last of a repeated member counts.
func (dec *decoder) outputText(joined []byte) ([]byte, error) {
	return dec.eachLax(joined, func(joined []byte) ([]byte, error) {
		from := len(joined) // this item's text, kept if it is a message
		var typ string
		// What is not an object is passed over: objectIn's complaint of it
		// is not kept.
		_, err := dec.objectIn("an output item", func(name []byte) (error, error) {
			var err error
			switch string(name) {
			case "type":
				var v []byte
				if v, err = dec.raw(); err == nil {
					typ, _ = text(v)
				}
			case "content":
				joined, err = dec.eachLax(joined[:from], dec.outputPart)
			default:
				_, err = dec.raw()
			}
			return nil, err
		})
		if typ != "message" {
			joined = joined[:from]
		}
		return joined, err
	})
}

// outputPart reads one element of a message item's content and appends
// its text when it is an output_text part.
func (dec *decoder) outputPart(joined []byte) ([]byte, error) {
	var typ, txt string
	_, err := dec.objectIn("a content part", func(name []byte) (error, error) {
		v, err := dec.raw()
		switch {
		case err != nil:
		case string(name) == "type":
			typ, _ = text(v)
		case string(name) == "text":
			txt, _ = text(v)
		}
		return nil, err
	})
	if typ == "output_text" {
		joined = append(joined, txt...)
	}
	return joined, err
}

// eachLax reads the value dec is at: when it is an array, each element
// with fn (which must read it whole); anything else is passed over.
func (dec *decoder) eachLax(joined []byte, fn func([]byte) ([]byte, error)) ([]byte, error) {
	if dec.peek() != Array {
		_, err := dec.raw()
		return joined, err
	}
	if _, err := dec.open(); err != nil {
		return joined, err
	}
	for {
		end, err := dec.close()
		if end || err != nil {
			return joined, err
		}
		if joined, err = fn(joined); err != nil {
			return joined, err
		}
	}
}

// membersLax calls fn with the decoded name and raw value of each member
// of the object v, read leniently, until fn returns false.
func (v Value) membersLax(fn func(name string, raw []byte) bool) error {
	return readLax(v.Raw, func(dec *decoder) error {
		if v.Kind() != Object {
			return nil
		}
		err := dec.eachMember(func(n []byte, v Value) error {
			if !fn(string(n), v.Raw) {
				return errStop
			}
			return nil
		})
		if err == errStop {
			return nil
		}
		return err
	})
}

// errStop ends eachMember's walk early, without a fault.
var errStop = errors.New("stop")

// eachMember reads the object dec is at, calling fn with the decoded name
// and the value (with its span) of each member until fn returns an error.
// Anything but an object is an *Error.
func (dec *decoder) eachMember(fn func(name []byte, v Value) error) error {
	if err := dec.object(); err != nil {
		return err
	}
	return dec.eachName(func(n []byte) error {
		raw, err := dec.raw()
		if err != nil {
			return err
		}
		end := dec.offset()
		return fn(n, Value{Raw: raw, Start: end - len(raw), End: end})
	})
}
