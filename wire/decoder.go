package wire

import (
	"bytes"
	"errors"
	"io"
	"strconv"
	"sync"

	"github.com/go-json-experiment/json/jsontext"
)

// Error is a body the reader refuses: not JSON, or JSON this package does
// not accept (see the package documentation's rules), or, for answers, a
// member of the wrong type.
type Error struct {
	// Offset is the byte offset in the body where the fault was found:
	// the body reads as JSON up to there.
	Offset int
	// Path locates the fault in the document, from the top: member names
	// (string) and element indexes (int). It may stop short of the fault
	// when a value could not be read far enough to tell.
	Path []any
	// Duplicate is true when the fault is a member name given twice in
	// one object; the name is Path's last element.
	Duplicate bool
	// Err is the underlying error.
	Err error
}

func (e *Error) Error() string {
	if e.Duplicate {
		return "duplicate member " + PathString(e.Path)
	}
	msg := "malformed JSON"
	if e.Err != nil {
		msg = e.Err.Error()
	}
	if len(e.Path) > 0 {
		msg += " in " + PathString(e.Path)
	}
	return msg + " at offset " + strconv.Itoa(e.Offset)
}

func (e *Error) Unwrap() error { return e.Err }

// PathString renders a path as dotted names and bracketed indexes:
// messages[2].content.
func PathString(path []any) string {
	var b []byte
	for _, p := range path {
		switch p := p.(type) {
		case int:
			b = append(b, '[')
			b = strconv.AppendInt(b, int64(p), 10)
			b = append(b, ']')
		case string:
			if len(b) > 0 {
				b = append(b, '.')
			}
			b = append(b, p...)
		}
	}
	return string(b)
}

// errEOF stands for io.ErrUnexpectedEOF with encoding/json's wording.
var errEOF = errors.New("unexpected end of JSON input")

// Options of the two modes: requests are read with jsontext's defaults
// (RFC 7493: valid UTF-8, unique names), answers as encoding/json reads.
var lenient = []jsontext.Options{jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true)}

// decoder is a pooled jsontext.Decoder reading one body in place.
type decoder struct {
	d    jsontext.Decoder
	in   bytes.Buffer
	body []byte
	lax  bool
}

var decoders = sync.Pool{New: func() any { return new(decoder) }}

// newDecoder returns a decoder over body; lax selects the answers' mode.
func newDecoder(body []byte, lax bool) *decoder {
	dec := decoders.Get().(*decoder)
	dec.in = *bytes.NewBuffer(body)
	dec.body, dec.lax = body, lax
	if lax {
		dec.d.Reset(&dec.in, lenient...)
	} else {
		dec.d.Reset(&dec.in)
	}
	return dec
}

// free returns dec to the pool, keeping no reference to the body.
func (dec *decoder) free() {
	dec.in = bytes.Buffer{}
	dec.body = nil
	dec.d.Reset(&dec.in)
	decoders.Put(dec)
}

// offset is the offset just after the last token or value read.
func (dec *decoder) offset() int { return int(dec.d.InputOffset()) }

// value reads the next value whole.
func (dec *decoder) value() (Value, error) {
	raw, err := dec.d.ReadValue()
	if err != nil {
		return Value{}, dec.fail(err)
	}
	end := dec.offset()
	start := end - len(raw)
	return Value{Raw: dec.body[start:end:end], Start: start, End: end}, nil
}

// open reads the '{' or '[' that PeekKind announced and returns its
// offset.
func (dec *decoder) open() (int, error) {
	if _, err := dec.d.ReadToken(); err != nil {
		return 0, dec.fail(err)
	}
	return dec.offset() - 1, nil
}

// name reads the next member's name; more is false at the object's end,
// whose '}' it then reads.
func (dec *decoder) name() (name Value, more bool, err error) {
	if dec.d.PeekKind() == '}' {
		_, err := dec.d.ReadToken()
		return Value{}, false, dec.fail(err)
	}
	v, err := dec.value()
	return v, err == nil, err
}

// close reads the ']' that ends an array, or reports false.
func (dec *decoder) close() (bool, error) {
	if dec.d.PeekKind() != ']' {
		return false, nil
	}
	_, err := dec.d.ReadToken()
	return err == nil, dec.fail(err)
}

// peek is the kind of the next value (0 when reading it will fail).
func (dec *decoder) peek() Kind { return Kind(dec.d.PeekKind()) }

// end checks that nothing but space follows the top-level value.
func (dec *decoder) end() error {
	if k := dec.d.PeekKind(); k != 0 {
		return &Error{Offset: dec.offset(), Err: errors.New("invalid character " + strconv.QuoteRune(rune(k)) + " after top-level value")}
	}
	if _, err := dec.d.ReadToken(); err != io.EOF {
		return dec.fail(err)
	}
	return nil
}

// fail converts a decoding error into an *Error.
func (dec *decoder) fail(err error) error {
	if err == nil {
		return nil
	}
	var se *jsontext.SyntacticError
	if !errors.As(err, &se) {
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return &Error{Offset: len(dec.body), Err: errEOF}
		}
		return &Error{Offset: dec.offset(), Err: err}
	}
	e := &Error{Offset: int(se.ByteOffset), Err: se.Err}
	switch {
	case se.Err == io.ErrUnexpectedEOF || se.Err == io.EOF:
		e.Err = errEOF
	case errors.Is(se.Err, jsontext.ErrDuplicateName):
		e.Duplicate = true
	}
	e.Path = resolve(dec.body, se.JSONPointer)
	return e
}

// resolve turns a JSON Pointer into a path, telling array indexes from
// member names by walking body (only when reporting an error: the
// pointer alone cannot tell "0" the index from "0" the name).
func resolve(body []byte, p jsontext.Pointer) []any {
	if p == "" {
		return nil
	}
	var path []any
	d := jsontext.NewDecoder(bytes.NewReader(body), lenient...)
	walking := true
	for tok := range p.Tokens() {
		if !walking {
			path = append(path, tok)
			continue
		}
		switch d.PeekKind() {
		case '[':
			i, err := strconv.Atoi(tok)
			if _, rerr := d.ReadToken(); err != nil || rerr != nil {
				walking = false
				path = append(path, tok)
				continue
			}
			for n := 0; n < i && walking; n++ {
				walking = d.SkipValue() == nil
			}
			path = append(path, i)
		case '{':
			_, _ = d.ReadToken()
			found := false
			for walking && !found {
				name, err := d.ReadToken()
				switch {
				case err != nil || name.Kind() != '"':
					walking = false
				case name.String() == tok:
					found = true
				default:
					walking = d.SkipValue() == nil
				}
			}
			path = append(path, tok)
		default:
			walking = false
			path = append(path, tok)
		}
	}
	return path
}
