package wire

import (
	"errors"
	"strconv"
)

// Answer is what ReadAnswer read of a replica's chat.completion (a whole
// answer), chat.completion.chunk (one event of a stream), or the error
// payload a replica sends in their place.
type Answer struct {
	// Object is the "object" member: "error" in old vLLM's and SGLang's
	// flat error shape. "" when absent or null.
	Object string
	// Error is true when an "error" member other than null was sent (the
	// error shapes of vLLM, llama.cpp and TGI).
	Error bool
	// Choices are the elements of "choices".
	Choices []Choice
	// Usage is the "usage" member.
	Usage Usage
}

// IsError reports an error report rather than an answer.
func (a *Answer) IsError() bool { return a.Error || a.Object == "error" }

// Choice is one element of choices. Chunks carry their text in delta,
// completions in message.
type Choice struct {
	// Delta and Message are the content of delta and of message; "" when
	// either, or its content, is absent or null.
	Delta, Message string
	// FinishReason is "" when absent or null.
	FinishReason string
}

// Usage is a replica's token accounting.
type Usage struct {
	// Given is true when usage was an object (neither absent nor null).
	Given bool
	// The counts; each is given only when sent, and not null.
	PromptTokens, CompletionTokens, TotalTokens Count
}

// Count is one token count.
type Count struct {
	N     int
	Given bool
}

// ReadAnswer reads data into a, reusing a's Choices, so that a stream
// read chunk after chunk into one Answer allocates only the text.
//
// It reads as encoding/json would decode the answer into a struct of the
// members above, with two differences: names are matched exactly (not
// case-insensitively), and a member given twice is replaced by its last
// occurrence rather than merged with it. Invalid UTF-8 becomes U+FFFD.
// A member of the wrong type (a string for choices, 1.5 for a token
// count) is an *Error, as it was an error for encoding/json; members the
// gateway does not read may hold anything.
func ReadAnswer(data []byte, a *Answer) error {
	*a = Answer{Choices: a.Choices[:0]}
	dec := newDecoder(data, true)
	defer dec.free()
	err := dec.answer(a)
	if err == nil {
		err = dec.end()
	}
	return err
}

func (dec *decoder) answer(a *Answer) error {
	switch dec.peek() {
	case Null:
		_, err := dec.value()
		return err
	case Object:
	default:
		v, err := dec.value()
		if err != nil {
			return err
		}
		return typeErr(v, "an object")
	}
	_, err := dec.object(func(n []byte, _ int) error {
		switch string(n) {
		case "object":
			v, err := dec.value()
			if err != nil {
				return err
			}
			var ok bool
			if a.Object, ok = text(v); !ok {
				return typeErr(v, "a string", "object")
			}
			return nil
		case "error":
			v, err := dec.value()
			a.Error = !v.IsNull()
			return err
		case "choices":
			return dec.choices(a)
		case "usage":
			return dec.usage(&a.Usage)
		}
		_, err := dec.value()
		return err
	})
	return err
}

func (dec *decoder) choices(a *Answer) error {
	a.Choices = a.Choices[:0] // a repeated member replaces
	if dec.peek() != Array {
		v, err := dec.value()
		if err != nil || v.IsNull() {
			return err
		}
		return typeErr(v, "an array", "choices")
	}
	_, err := dec.array(func(i int) error {
		var c Choice
		if dec.peek() != Object {
			v, err := dec.value()
			if err != nil {
				return err
			}
			if !v.IsNull() {
				return typeErr(v, "an object", "choices", i)
			}
		} else if _, err := dec.object(func(n []byte, _ int) error {
			switch string(n) {
			case "delta":
				return dec.content(&c.Delta, i, "delta")
			case "message":
				return dec.content(&c.Message, i, "message")
			case "finish_reason":
				v, err := dec.value()
				if err != nil {
					return err
				}
				var ok bool
				if c.FinishReason, ok = text(v); !ok {
					return typeErr(v, "a string", "choices", i, "finish_reason")
				}
				return nil
			}
			_, err := dec.value()
			return err
		}); err != nil {
			return err
		}
		a.Choices = append(a.Choices, c)
		return nil
	})
	return err
}

// content reads a delta or a message: its content, if any.
func (dec *decoder) content(s *string, i int, member string) error {
	*s = ""
	if dec.peek() != Object {
		v, err := dec.value()
		if err != nil || v.IsNull() {
			return err
		}
		return typeErr(v, "an object", "choices", i, member)
	}
	_, err := dec.object(func(n []byte, _ int) error {
		v, err := dec.value()
		if err != nil || string(n) != "content" {
			return err
		}
		var ok bool
		if *s, ok = text(v); !ok {
			return typeErr(v, "a string", "choices", i, member, "content")
		}
		return nil
	})
	return err
}

func (dec *decoder) usage(u *Usage) error {
	*u = Usage{}
	if dec.peek() != Object {
		v, err := dec.value()
		if err != nil || v.IsNull() {
			return err
		}
		return typeErr(v, "an object", "usage")
	}
	u.Given = true
	_, err := dec.object(func(n []byte, _ int) error {
		v, err := dec.value()
		if err != nil {
			return err
		}
		var c *Count
		switch string(n) {
		case "prompt_tokens":
			c = &u.PromptTokens
		case "completion_tokens":
			c = &u.CompletionTokens
		case "total_tokens":
			c = &u.TotalTokens
		default:
			return nil
		}
		*c = Count{}
		if v.IsNull() {
			return nil
		}
		if v.Kind() != Number {
			return typeErr(v, "an integer", "usage", string(n))
		}
		// An integer within int, as encoding/json decodes into an int.
		x, perr := strconv.ParseInt(string(v.Raw), 10, strconv.IntSize)
		if perr != nil {
			return typeErr(v, "an integer", "usage", string(n))
		}
		*c = Count{N: int(x), Given: true}
		return nil
	})
	return err
}

// common are the strings answers repeat: returned as constants, they cost
// no allocation per chunk.
var common = []string{"chat.completion.chunk", "chat.completion", "stop", "length", ""}

// text is the string v holds, "" for null; false for other kinds.
func text(v Value) (string, bool) {
	switch v.Kind() {
	case Null:
		return "", true
	case String:
		for _, s := range common {
			if v.Is(s) {
				return s, true
			}
		}
		return unquote(v.Raw), true
	}
	return "", false
}

// typeErr is the error for v, at path, not being what the reader wants.
func typeErr(v Value, want string, path ...any) error {
	return &Error{Offset: v.Start, Path: path, Err: errors.New("expected " + want + ", got " + v.Kind().String())}
}

// String names the kind.
func (k Kind) String() string {
	switch k {
	case Absent:
		return "absent"
	case Null:
		return "null"
	case True, False:
		return "a boolean"
	case String:
		return "a string"
	case Number:
		return "a number"
	case Object:
		return "an object"
	case Array:
		return "an array"
	}
	return "invalid"
}
