package wire

import (
	"bytes"
	"errors"
	"io"
	"slices"
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

// decoder is a jsontext.Decoder reading one body in place, or a copy of
// it with its long strings skimmed (skim.go).
type decoder struct {
	d    jsontext.Decoder
	lx   lexer // an answer's reader, in the fast mode (lexer.go)
	fast bool  // the lexer reads, not d
	in   bytes.Buffer
	body []byte // what jsontext reads: orig, or its skimmed copy
	orig []byte // the body
	cuts []cut  // where body lacks orig's bytes; none when it is orig
	cut  int    // how many cuts are at or before the offset at mapped last
	copy []byte // the skimmed copy's buffer, kept for the next body

	// What ReadAnswer saw of the members a stream's chunks repeat (see
	// AnswerReader): how many choices members and deltas in the first
	// choice, and where its content string is.
	choicesSeen, deltas    int
	contentFrom, contentTo int
}

var decoders = sync.Pool{New: func() any { return new(decoder) }}

// newDecoder returns a pooled decoder over body; lax selects the answers'
// mode.
func newDecoder(body []byte, lax bool) *decoder {
	dec := decoders.Get().(*decoder)
	dec.reset(body, lax)
	return dec
}

// reset starts reading body, an answer's through the lexer (see lexed), a
// request's through jsontext.
func (dec *decoder) reset(body []byte, lax bool) { dec.begin(body, lax, lax && lexAnswers) }

// begin starts reading body, through the lexer when fast. When jsontext
// reads a request, its long strings are skimmed (jsontext checks a string
// a byte at a time; the lexer, 64 at a time, reads them in place); an
// answer's are not (its reading is lenient, which skim does not know).
func (dec *decoder) begin(body []byte, lax, fast bool) {
	dec.orig, dec.body, dec.cuts, dec.cut = body, body, dec.cuts[:0], 0
	if !lax && !fast && len(body) >= skimFrom {
		dec.body, dec.cuts = skim(body, dec.copy, dec.cuts)
		if len(dec.cuts) > 0 {
			dec.copy = dec.body
		}
	}
	dec.fast = fast
	if fast {
		dec.in = bytes.Buffer{}
		dec.lx.reset(dec.body, !lax)
		return
	}
	dec.in = *bytes.NewBuffer(dec.body)
	if lax {
		dec.d.Reset(&dec.in, lenient...)
	} else {
		dec.d.Reset(&dec.in)
	}
}

// lexAnswers and lexRequests have answers and requests read by the lexer
// first. Variables so that the tests can read them through jsontext
// alone, and compare.
var lexAnswers, lexRequests = true, true

// lexed reads data with read, which reads from dec and sets its results
// from scratch: through the lexer first (strictly for a request), and
// when that fails, once more through jsontext, whose reading (or error,
// with its offset and path) is the one kept.
func (dec *decoder) lexed(data []byte, lax bool, read func() error) error {
	dec.begin(data, lax, lexes(lax))
	err := read()
	if err != nil && dec.fast {
		dec.begin(data, lax, false)
		err = read()
	}
	return err
}

// lexes reports whether the lexer reads answers (lax) or requests first.
func lexes(lax bool) bool {
	if lax {
		return lexAnswers
	}
	return lexRequests
}

// readLax reads an answer with read, on a pooled decoder (see lexed).
func readLax(data []byte, read func(dec *decoder) error) error {
	return readLexed(data, true, read)
}

// readStrict reads a request body with read, on a pooled decoder (see
// lexed).
func readStrict(body []byte, read func(dec *decoder) error) error {
	return readLexed(body, false, read)
}

func readLexed(data []byte, lax bool, read func(dec *decoder) error) error {
	dec := decoders.Get().(*decoder)
	defer dec.free()
	return dec.lexed(data, lax, func() error { return read(dec) })
}

// readToken reads the next token and returns its kind.
func (dec *decoder) readToken() (jsontext.Kind, error) {
	if dec.fast {
		return dec.lx.readToken()
	}
	t, err := dec.d.ReadToken()
	if err != nil {
		return 0, err
	}
	return t.Kind(), nil
}

// readValue reads the next value whole.
func (dec *decoder) readValue() ([]byte, error) {
	if dec.fast {
		return dec.lx.readValue()
	}
	return dec.d.ReadValue()
}

// free returns dec to the pool, keeping no reference to the body.
func (dec *decoder) free() {
	dec.in = bytes.Buffer{}
	dec.body, dec.orig, dec.lx.body = nil, nil, nil
	dec.d.Reset(&dec.in)
	if cap(dec.copy) > maxKeptCopy {
		dec.copy = nil // a rare huge body's copy is not kept pooled
	}
	decoders.Put(dec)
}

// maxKeptCopy bounds the skimmed copy a pooled decoder keeps: a copy
// holds what is not in long strings, usually a few hundred bytes.
const maxKeptCopy = 64 << 10

// at maps an offset in what jsontext reads to the body's.
func (dec *decoder) at(off int) int {
	// The last cut at or before off says how far the body is ahead. The
	// offsets asked for mostly follow the reading, so the search goes on
	// from the cut found last, a step or two; an offset before it (a
	// value read whole) is searched for.
	i := dec.cut
	if i > 0 && dec.cuts[i-1].at > off {
		i, _ = slices.BinarySearchFunc(dec.cuts[:i], off+1, func(c cut, off int) int { return c.at - off })
	}
	for i < len(dec.cuts) && dec.cuts[i].at <= off {
		i++
	}
	dec.cut = i
	if i == 0 {
		return off
	}
	return off + dec.cuts[i-1].skipped
}

// span is the value between two offsets in what jsontext reads, as the
// body has it.
func (dec *decoder) span(start, end int) Value {
	if len(dec.cuts) > 0 {
		start, end = dec.at(start), dec.at(end)
	}
	return Value{Raw: dec.orig[start:end:end], Start: start, End: end}
}

// offset is the offset just after the last token or value read.
func (dec *decoder) offset() int {
	if dec.fast {
		return dec.lx.pos
	}
	return int(dec.d.InputOffset())
}

// value reads the next value whole.
func (dec *decoder) value() (Value, error) {
	raw, err := dec.readValue()
	if err != nil {
		return Value{}, dec.fail(err)
	}
	end := dec.offset()
	return dec.span(end-len(raw), end), nil
}

// name reads the next member's name; more is false at the object's end,
// whose '}' it then reads. A name is read as a token (jsontext's cheapest
// read), its bytes found in the body from where it starts to the offset
// after it.
func (dec *decoder) name() (name Value, more bool, err error) {
	start := dec.start()
	k, err := dec.readToken()
	if err != nil {
		return Value{}, false, dec.fail(err)
	}
	switch k {
	case '}':
		return Value{}, false, nil
	case '"':
		return dec.span(start, dec.offset()), true, nil
	}
	return Value{}, false, &Error{Offset: dec.at(start), Err: errors.New("expected a member name")}
}

// open reads the '{' or '[' that peek announced and returns its offset.
func (dec *decoder) open() (int, error) {
	k, err := dec.readToken()
	if err != nil {
		return 0, dec.fail(err)
	}
	if k != '{' && k != '[' {
		return 0, &Error{Offset: dec.at(dec.offset()), Err: errors.New("expected an object or an array, got " + Kind(k).String())}
	}
	return dec.offset() - 1, nil
}

// close reads the ']' that ends an array, or reports false.
func (dec *decoder) close() (bool, error) {
	if dec.peek() != ']' {
		return false, nil
	}
	_, err := dec.readToken()
	return err == nil, dec.fail(err)
}

// peek is the kind of the next token, told by its first byte ('}' and
// ']' for the ends of objects and arrays; 0 when there is none). It only
// chooses which read comes next, and that read checks the input
// (jsontext's PeekKind would check it twice).
func (dec *decoder) peek() Kind {
	i := dec.start()
	if i >= len(dec.body) {
		return 0
	}
	switch c := dec.body[i]; c {
	case '"', '{', '[', 't', 'f', 'n', '}', ']':
		return Kind(c)
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return Number
	}
	return 0
}

// start is the offset in the body of the next token's first byte, past
// space and the ':' or ',' before it. The decoder reads the body in place
// (a bytes.Buffer is not copied), so its unread buffer is the rest of the
// body.
func (dec *decoder) start() int {
	if dec.fast {
		i := dec.lx.pos
		for i < len(dec.body) && between[dec.body[i]] {
			i++
		}
		return i
	}
	b := dec.d.UnreadBuffer()
	if len(b) == 0 {
		dec.d.PeekKind() // nothing taken from the input yet; the next read reuses the peek
		b = dec.d.UnreadBuffer()
	}
	i := 0
	for i < len(b) && between[b[i]] {
		i++
	}
	return dec.offset() + i
}

// between are the bytes that may come before a token: space, and the ':'
// or ',' that separate it from the one before.
var between = [256]bool{' ': true, '\t': true, '\r': true, '\n': true, ':': true, ',': true}

// end checks that nothing but space follows the top-level value.
func (dec *decoder) end() error {
	if dec.fast {
		return dec.lx.end()
	}
	if k := dec.d.PeekKind(); k != 0 {
		return &Error{Offset: dec.at(dec.offset()), Err: errors.New("invalid character " + strconv.QuoteRune(rune(k)) + " after top-level value")}
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
			return &Error{Offset: len(dec.orig), Err: errEOF}
		}
		return &Error{Offset: dec.at(dec.offset()), Err: err}
	}
	e := &Error{Offset: dec.at(int(se.ByteOffset)), Err: se.Err}
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
