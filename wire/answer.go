package wire

import (
	"bytes"
	"errors"
	"strconv"
	"sync"

	"github.com/go-json-experiment/json/jsontext"
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
	// Model is the "model" member as written, with its span: a door
	// passing the answer through puts its own model name in its place.
	Model Value
}

// IsError reports an error report rather than an answer.
func (a *Answer) IsError() bool { return a.Error || a.Object == "error" }

// Choice is one element of choices. Chunks carry their text in delta,
// completions in message.
type Choice struct {
	// Delta and Message are the content of delta and of message; "" when
	// either, or its content, is absent or null. Text is a text
	// completion's "text".
	Delta, Message, Text string
	// FinishReason is "" when absent or null.
	FinishReason string
	// Output is true when the delta or message carries generated output
	// beside its content: tool calls, a refusal, reasoning (any member
	// but role and content that is neither null nor "").
	Output bool
}

// Usage is a replica's token accounting.
type Usage struct {
	// Given is true when usage was an object (neither absent nor null).
	Given bool
	// The counts; each is given only when sent, and not null.
	PromptTokens, CompletionTokens, TotalTokens Count
	// CachedTokens is prompt_tokens_details.cached_tokens (the Responses
	// API's input_tokens_details.cached_tokens): the prompt tokens the
	// engine found in its prefix cache. It is read leniently, since
	// engines differ in the details: anything but an integer there is not
	// given, never an error.
	CachedTokens Count
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
	r := NewAnswerReader()
	defer r.Release()
	return r.read(data, a)
}

var answerReaders = sync.Pool{New: func() any { return new(AnswerReader) }}

// NewAnswerReader returns an AnswerReader from a pool; Release returns it.
func NewAnswerReader() *AnswerReader { return answerReaders.Get().(*AnswerReader) }

// Release returns r to the pool NewAnswerReader takes it from, keeping no
// reference to what it read. r must not be used after.
func (r *AnswerReader) Release() {
	for _, dec := range []*decoder{&r.dec, &r.text} {
		dec.in, dec.body, dec.orig, dec.lx.body = bytes.Buffer{}, nil, nil, nil
		dec.d.Reset(&dec.in)
	}
	r.last, r.answer, r.choice = r.last[:0], Answer{}, Choice{}
	answerReaders.Put(r)
}

// An AnswerReader reads a stream's chunks one after another, with one
// decoder. The zero value is ready to use; NewAnswerReader takes one from
// a pool.
//
// A stream's chunks differ, as a rule, only in the text of their delta:
// the id, the model, the creation time and the shape repeat. When a chunk
// is the last one read in full with only its delta's content string
// changed, Read checks that string alone (a string read in the place of a
// string leaves the rest of a document as it was: valid, and meaning
// what it meant) and takes everything else from that chunk. FuzzAnswer
// holds the readings of a stream to encoding/json's, chunk by chunk.
type AnswerReader struct {
	dec decoder
	// last is a copy of the last chunk read in full when it can stand for
	// the next ones: one choice, whose delta has one content, a string,
	// at last[from:to]; answer is what it read.
	last     []byte
	from, to int
	answer   Answer
	choice   Choice
	text     decoder
}

// Read is ReadAnswer.
func (r *AnswerReader) Read(data []byte, a *Answer) error {
	if r.sameBut(data, a) {
		return nil
	}
	err := r.read(data, a)
	dec := &r.dec
	if err != nil || dec.choicesSeen != 1 || len(a.Choices) != 1 || dec.deltas != 1 || dec.contentTo == 0 {
		r.last = r.last[:0]
		return err
	}
	r.last = append(r.last[:0], data...)
	r.from, r.to = dec.contentFrom, dec.contentTo
	r.answer, r.choice = *a, a.Choices[0]
	r.answer.Choices = nil
	return nil
}

// read reads data in full.
func (r *AnswerReader) read(data []byte, a *Answer) error {
	choices := a.Choices[:0]
	dec := &r.dec
	return dec.lexed(data, true, func() error {
		*a = Answer{Choices: choices}
		dec.choicesSeen, dec.deltas, dec.contentFrom, dec.contentTo = 0, 0, 0, 0
		err := dec.answer(a)
		if err == nil {
			err = dec.end()
		}
		return err
	})
}

// sameBut reads data as the last chunk with another delta text, if it is
// one.
func (r *AnswerReader) sameBut(data []byte, a *Answer) bool {
	tail := len(r.last) - r.to
	if len(r.last) == 0 || len(data) < r.from+2+tail ||
		string(data[:r.from]) != string(r.last[:r.from]) || string(data[len(data)-tail:]) != string(r.last[r.to:]) {
		return false
	}
	// The new text must be one string, read as a whole document.
	s := data[r.from : len(data)-tail]
	if s[0] != '"' {
		return false
	}
	dec := &r.text
	dec.reset(s, true)
	k, err := dec.readToken()
	if err != nil || k != '"' || dec.end() != nil {
		return false
	}
	choices := append(a.Choices[:0], r.choice)
	*a = r.answer
	a.Choices = choices
	if m := r.answer.Model; m.Raw != nil {
		// The model member as this chunk holds it: after the text, it
		// moved by the text's change in length.
		start := m.Start
		if start >= r.to {
			start += len(data) - len(r.last)
		}
		a.Model = Value{Raw: data[start : start+len(m.Raw)], Start: start, End: start + len(m.Raw)}
	}
	a.Choices[0].Delta, _ = text(s)
	return true
}

// The answer is read token by token, without a closure or a peek: a
// stream reads one chunk per token of the reply.

func (dec *decoder) answer(a *Answer) error {
	k, err := dec.readToken()
	if err != nil {
		return dec.fail(err)
	}
	switch k {
	case '{':
	case 'n':
		return nil
	default:
		return dec.kindErr(k, "an object")
	}
	for {
		n, ok, err := dec.member()
		if !ok {
			return err
		}
		decoded := false // a name is decoded once, when it matches none as written
	answerMember:
		switch string(n) {
		case "object":
			v, err := dec.raw()
			if err != nil {
				return err
			}
			var ok bool
			if a.Object, ok = text(v); !ok {
				return dec.valueErr(v, "a string", "object")
			}
		case "error":
			v, err := dec.raw()
			if err != nil {
				return err
			}
			a.Error = string(v) != "null"
		case "model":
			start := dec.start()
			v, err := dec.raw()
			if err != nil {
				return err
			}
			a.Model = Value{Raw: v, Start: start, End: start + len(v)}
		case "choices":
			dec.choicesSeen++
			err = dec.choices(a)
		case "usage":
			err = dec.usage(&a.Usage)
		default:
			if d, esc := unescaped(n); esc && !decoded {
				n, decoded = d, true
				goto answerMember
			}
			_, err = dec.raw()
		}
		if err != nil {
			return err
		}
	}
}

func (dec *decoder) choices(a *Answer) error {
	a.Choices = a.Choices[:0] // a repeated member replaces
	k, err := dec.readToken()
	if err != nil {
		return dec.fail(err)
	}
	switch k {
	case '[':
	case 'n':
		return nil
	default:
		return dec.kindErr(k, "an array", "choices")
	}
	for i := 0; ; i++ {
		k, err := dec.readToken()
		if err != nil {
			return dec.fail(err)
		}
		switch k {
		case ']':
			return nil
		case 'n':
			a.Choices = append(a.Choices, Choice{})
			continue
		case '{':
		default:
			return dec.kindErr(k, "an object", "choices", i)
		}
		var c Choice
		for {
			n, ok, err := dec.member()
			if err != nil {
				return err
			}
			if !ok {
				break
			}
			decoded := false // a name is decoded once, when it matches none as written
		choiceMember:
			switch string(n) {
			case "delta":
				if i == 0 {
					dec.deltas++
				}
				err = dec.content(&c, &c.Delta, i, "delta")
			case "message":
				err = dec.content(&c, &c.Message, i, "message")
			case "text":
				var v []byte
				if v, err = dec.raw(); err == nil {
					var ok bool
					if c.Text, ok = text(v); !ok {
						err = dec.valueErr(v, "a string", "choices", i, "text")
					}
				}
			case "finish_reason":
				var v []byte
				if v, err = dec.raw(); err == nil {
					var ok bool
					if c.FinishReason, ok = text(v); !ok {
						err = dec.valueErr(v, "a string", "choices", i, "finish_reason")
					}
				}
			default:
				if d, esc := unescaped(n); esc && !decoded {
					n, decoded = d, true
					goto choiceMember
				}
				_, err = dec.raw()
			}
			if err != nil {
				return err
			}
		}
		a.Choices = append(a.Choices, c)
	}
}

// content reads a delta or a message: its content, if any.
func (dec *decoder) content(c *Choice, s *string, i int, member string) error {
	*s = ""
	k, err := dec.readToken()
	if err != nil {
		return dec.fail(err)
	}
	switch k {
	case '{':
	case 'n':
		return nil
	default:
		return dec.kindErr(k, "an object", "choices", i, member)
	}
	for {
		n, ok, err := dec.member()
		if !ok {
			return err
		}
		isContent, isRole := string(n) == "content", string(n) == "role"
		if d, esc := unescaped(n); !isContent && !isRole && esc {
			isContent, isRole = string(d) == "content", string(d) == "role"
		}
		v, err := dec.raw()
		if err != nil {
			return err
		}
		if !isContent && !isRole && string(v) != "null" && string(v) != `""` {
			c.Output = true
			dec.deltas++ // more than text changes: no stand-in
		}
		if isContent {
			var ok bool
			if *s, ok = text(v); !ok {
				return dec.valueErr(v, "a string", "choices", i, member, "content")
			}
			// Where a delta's text is, for AnswerReader: the only one.
			switch {
			case i != 0 || member != "delta":
			case dec.contentTo == 0 && v[0] == '"':
				dec.contentTo = dec.offset()
				dec.contentFrom = dec.contentTo - len(v)
			default:
				dec.deltas++ // a second content, or a null one: no stand-in
			}
		}
	}
}

func (dec *decoder) usage(u *Usage) error {
	*u = Usage{}
	k, err := dec.readToken()
	if err != nil {
		return dec.fail(err)
	}
	switch k {
	case '{':
	case 'n':
		return nil
	default:
		return dec.kindErr(k, "an object", "usage")
	}
	u.Given = true
	for {
		n, ok, err := dec.member()
		if !ok {
			return err
		}
		var c *Count
		var name string
		decoded := false // a name is decoded once, when it matches none as written
	usageMember:
		switch string(n) {
		case "prompt_tokens":
			c, name = &u.PromptTokens, "prompt_tokens"
		case "completion_tokens":
			c, name = &u.CompletionTokens, "completion_tokens"
		case "total_tokens":
			c, name = &u.TotalTokens, "total_tokens"
		case "prompt_tokens_details":
			v, err := dec.raw()
			if err != nil {
				return err
			}
			u.CachedTokens = cachedTokens(v)
			continue
		default:
			if d, esc := unescaped(n); esc && !decoded {
				n, decoded = d, true
				goto usageMember
			}
		}
		v, err := dec.raw()
		if err != nil {
			return err
		}
		if c == nil {
			continue
		}
		*c = Count{}
		if string(v) == "null" {
			continue
		}
		// An integer within int, as encoding/json decodes into an int.
		x, perr := strconv.ParseInt(string(v), 10, strconv.IntSize)
		if perr != nil {
			return dec.valueErr(v, "an integer", "usage", name)
		}
		*c = Count{N: int(x), Given: true}
	}
}

// member reads the next member's name: its bytes between the quotes, as
// written (see unescaped); ok is false at the object's end, whose '}' it
// reads.
func (dec *decoder) member() ([]byte, bool, error) {
	start := dec.start()
	k, err := dec.readToken()
	if err != nil {
		return nil, false, dec.fail(err)
	}
	if k != '"' { // the '}': jsontext reads nothing else where a name is due
		return nil, false, nil
	}
	return dec.body[start+1 : dec.offset()-1], true, nil
}

// memberName is member with the name decoded (see unescaped), for the
// readers that match every name they meet.
func (dec *decoder) memberName() ([]byte, bool, error) {
	n, ok, err := dec.member()
	if d, esc := unescaped(n); ok && esc {
		n = d
	}
	return n, ok, err
}

// eachName reads the members of the object dec has opened, to its end,
// calling fn with each member's decoded name; fn reads the member's
// value. The first error, fn's or the body's, ends it.
func (dec *decoder) eachName(fn func(name []byte) error) error {
	for {
		n, ok, err := dec.memberName()
		if err != nil || !ok {
			return err
		}
		if err := fn(n); err != nil {
			return err
		}
	}
}

// object reads the '{' of the object the value dec is at must be.
func (dec *decoder) object() error {
	k, err := dec.readToken()
	if err != nil {
		return dec.fail(err)
	}
	if k != '{' {
		return dec.kindErr(k, "an object")
	}
	return nil
}

// raw reads the next value whole: a view of the input, valid until the
// next read.
func (dec *decoder) raw() ([]byte, error) {
	v, err := dec.readValue()
	if err != nil {
		return nil, dec.fail(err)
	}
	return v, nil
}

// common are the strings answers repeat: returned as constants, they cost
// no allocation per chunk.
var common = []string{"chat.completion.chunk", "chat.completion", "stop", "length", "", "message", "text", "end_turn"}

// text is the string the raw value v holds, "" for null; false for other
// kinds.
func text(v []byte) (string, bool) {
	switch v[0] {
	case 'n':
		return "", true
	case '"':
		for _, s := range common {
			if len(v) == len(s)+2 && string(v[1:len(v)-1]) == s {
				return s, true
			}
		}
		return unquote(v), true
	}
	return "", false
}

// valueErr is the error for the value v just read, at path, not being
// what the reader wants.
func (dec *decoder) valueErr(v []byte, want string, path ...any) error {
	return &Error{Offset: dec.offset() - len(v), Path: path,
		Err: errors.New("expected " + want + ", got " + Value{Raw: v}.Kind().String())}
}

// kindErr is the error for the token of kind k just read.
func (dec *decoder) kindErr(k jsontext.Kind, want string, path ...any) error {
	got := Kind(k)
	if k == '0' {
		got = Number
	}
	return &Error{Offset: dec.offset(), Path: path, Err: errors.New("expected " + want + ", got " + got.String())}
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

// cachedTokens reads cached_tokens of a details object leniently: the
// last occurrence counts; anything but an integer is not given.
func cachedTokens(v []byte) Count {
	var c Count
	_ = Value{Raw: v}.membersLax(func(n string, mv []byte) bool {
		if n == "cached_tokens" {
			c = Count{}
			if x, err := strconv.ParseInt(string(mv), 10, strconv.IntSize); err == nil {
				c = Count{N: int(x), Given: true}
			}
		}
		return true
	})
	return c
}
