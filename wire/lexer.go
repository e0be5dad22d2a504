package wire

import (
	"bytes"
	"errors"
	"io"

	"github.com/go-json-experiment/json/jsontext"
)

// An answer (a replica's JSON, a stream's event) is read leniently, and
// almost always it is plain valid JSON. jsontext reads it a token at a
// time and checks each string a byte at a time, which made reading a
// Responses answer of a kilobyte cost more than the rest of its request's
// handling in the gateway. The lexer reads the same tokens in place, its
// strings checked by stringEnd 64 bytes at a time, but only valid JSON
// with valid UTF-8: at anything else (what the lenient options let
// through, such as invalid UTF-8, and every fault) it fails with errSlow,
// and the answer is read again from the start through jsontext (lexed),
// whose reading and wording are then the ones kept. Valid JSON reads the
// same both ways (FuzzLexer and the readers' fuzzers hold the two to each
// other).

// A request is read the same way, strictly: the lexer's strings are
// already held to a request's rules (stringEnd), and in strict mode it
// also gives up at a member name given twice in one object, at a name
// with an escape (whose duplicate may be spelt otherwise) and at an
// object of more than maxLexNames members, each of which jsontext then
// reads and, for a duplicate, refuses (readStrict).

// errSlow is the lexer's one failure: read this through jsontext.
var errSlow = errors.New("wire: not for the lexer")

// lexer reads tokens as jsontext.Decoder.ReadToken and ReadValue do, and
// tells the offset after the last one (InputOffset).
type lexer struct {
	body  []byte
	pos   int      // the offset after the last token read
	state lexState // what may come next
	open  []byte   // the containers open, innermost last: '{' or '['

	// In strict mode, the names of the objects open: each object's
	// from its frame's start, innermost last.
	strict bool
	names  []lexName
	frames []int
}

// lexName is a member name's inside, body[from:to].
type lexName struct{ from, to int }

// maxLexNames is the most members of one object the lexer checks for
// duplicates, each name against those before it: a request's objects
// have a few, and an object of thousands is jsontext's to read, with its
// set of names, rather than the lexer's in quadratic time.
const maxLexNames = 32

// lexState is where the lexer is in the grammar.
type lexState uint8

const (
	lexTop      lexState = iota // a top-level value is due
	lexTopDone                  // after it: the end, or space
	lexObjFirst                 // after '{': a name or '}'
	lexObjName                  // after ',' in an object: a name
	lexObjColon                 // after a name: ':' then its value
	lexObjNext                  // after a member's value: ',' or '}'
	lexArrFirst                 // after '[': a value or ']'
	lexArrValue                 // after ',' in an array: a value
	lexArrNext                  // after an element: ',' or ']'
)

// maxLexDepth is jsontext's bound on nesting: deeper is jsontext's to
// refuse.
const maxLexDepth = 10000

// reset starts reading body; strict for a request.
func (l *lexer) reset(body []byte, strict bool) {
	l.body, l.pos, l.state, l.open = body, 0, lexTop, l.open[:0]
	l.strict, l.names, l.frames = strict, l.names[:0], l.frames[:0]
}

// unique adds the name body[from:to] to the innermost object's, or
// reports false when the lexer cannot tell that it is not a duplicate.
func (l *lexer) unique(from, to int) bool {
	name := l.body[from:to]
	frame := l.frames[len(l.frames)-1]
	if len(l.names)-frame >= maxLexNames || bytes.IndexByte(name, '\\') >= 0 {
		return false
	}
	for _, n := range l.names[frame:] {
		if bytes.Equal(l.body[n.from:n.to], name) {
			return false
		}
	}
	l.names = append(l.names, lexName{from, to})
	return true
}

// space is JSON's whitespace.
var space = [256]bool{' ': true, '\t': true, '\r': true, '\n': true}

func (l *lexer) skipSpace(i int) int {
	for i < len(l.body) && space[l.body[i]] {
		i++
	}
	return i
}

// What may come at the next token: a value, a name, or the end of the
// container open; one of the first two with or without the end.
type lexWant uint8

const (
	wantValue lexWant = 1 << iota
	wantName
	wantClose
)

// next finds the next token's first byte past space and the separator
// the state requires, and tells what may come there.
func (l *lexer) next() (int, lexWant, error) {
	i := l.skipSpace(l.pos)
	switch l.state {
	case lexTop:
		return i, wantValue, nil
	case lexTopDone:
		if i < len(l.body) {
			return i, 0, errSlow // more than one value
		}
		return i, 0, io.EOF
	case lexObjColon:
		if i >= len(l.body) || l.body[i] != ':' {
			return i, 0, errSlow
		}
		return l.skipSpace(i + 1), wantValue, nil
	case lexObjNext, lexArrNext:
		if i >= len(l.body) || l.body[i] != ',' {
			return i, wantClose, nil
		}
		i = l.skipSpace(i + 1)
		if l.state == lexObjNext {
			return i, wantName, nil
		}
		return i, wantValue, nil
	case lexObjFirst:
		return i, wantName | wantClose, nil
	case lexObjName:
		return i, wantName, nil
	case lexArrFirst:
		return i, wantValue | wantClose, nil
	}
	return i, wantValue, nil // lexArrValue
}

// after sets the state for what follows a value that ended at i.
func (l *lexer) after(i int) {
	l.pos = i
	switch {
	case len(l.open) == 0:
		l.state = lexTopDone
	case l.open[len(l.open)-1] == '{':
		l.state = lexObjNext
	default:
		l.state = lexArrNext
	}
}

// readToken reads the next token and returns its kind, as
// jsontext.Decoder.ReadToken does; io.EOF after the top-level value.
func (l *lexer) readToken() (jsontext.Kind, error) {
	i, want, err := l.next()
	if err != nil {
		return 0, err
	}
	if i >= len(l.body) {
		return 0, errSlow
	}
	c := l.body[i]
	switch {
	case c == '}' || c == ']':
		top := len(l.open) - 1
		if want&wantClose == 0 || top < 0 || l.open[top] != c-2 { // '{'+2 is '}', '['+2 is ']'
			return 0, errSlow
		}
		l.open = l.open[:top]
		if l.strict && c == '}' {
			f := len(l.frames) - 1
			l.names, l.frames = l.names[:l.frames[f]], l.frames[:f]
		}
		l.after(i + 1)
		return jsontext.Kind(c), nil
	case want&wantName != 0:
		if c != '"' {
			return 0, errSlow
		}
		end := stringEnd(l.body, i+1)
		if end < 0 || l.strict && !l.unique(i+1, end) {
			return 0, errSlow
		}
		l.pos, l.state = end+1, lexObjColon
		return '"', nil
	case want&wantValue == 0:
		return 0, errSlow
	case c == '{' || c == '[':
		if len(l.open) >= maxLexDepth {
			return 0, errSlow
		}
		l.open = append(l.open, c)
		l.pos = i + 1
		if c == '{' {
			if l.strict {
				l.frames = append(l.frames, len(l.names))
			}
			l.state = lexObjFirst
		} else {
			l.state = lexArrFirst
		}
		return jsontext.Kind(c), nil
	}
	end, k := scalarEnd(l.body, i)
	if end < 0 {
		return 0, errSlow
	}
	l.after(end)
	return k, nil
}

// readValue reads the next value whole and returns its bytes, as
// jsontext.Decoder.ReadValue does.
func (l *lexer) readValue() ([]byte, error) {
	i, _, err := l.next()
	if err != nil {
		return nil, err
	}
	depth := len(l.open)
	k, err := l.readToken()
	if err != nil {
		return nil, err
	}
	if k == '}' || k == ']' {
		return nil, errSlow // an end, not a value
	}
	for len(l.open) > depth {
		if _, err := l.readToken(); err != nil {
			return nil, err
		}
	}
	return l.body[i:l.pos], nil
}

// end reports whether nothing but space follows the top-level value.
func (l *lexer) end() error {
	if l.state != lexTopDone || l.skipSpace(l.pos) != len(l.body) {
		return errSlow
	}
	return nil
}

// scalarEnd returns the offset after the string, number or literal at
// body[i] and its kind, or -1 when there is none there (or one the lexer
// leaves to jsontext).
func scalarEnd(body []byte, i int) (int, jsontext.Kind) {
	switch c := body[i]; c {
	case '"':
		end := stringEnd(body, i+1)
		if end < 0 {
			return -1, 0
		}
		return end + 1, '"'
	case 't':
		return literalEnd(body, i, "true"), 't'
	case 'f':
		return literalEnd(body, i, "false"), 'f'
	case 'n':
		return literalEnd(body, i, "null"), 'n'
	}
	return numberEnd(body, i), '0'
}

func literalEnd(body []byte, i int, lit string) int {
	if len(body)-i < len(lit) || string(body[i:i+len(lit)]) != lit {
		return -1
	}
	return i + len(lit)
}

// numberEnd returns the offset after the number at body[i] in JSON's
// grammar, -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?, or -1. What
// follows it is the next token's business: a letter or a digit after
// "0" is no separator, and fails there.
func numberEnd(body []byte, i int) int {
	n := len(body)
	if i < n && body[i] == '-' {
		i++
	}
	switch {
	case i < n && body[i] == '0':
		i++
	case i < n && '1' <= body[i] && body[i] <= '9':
		i = digits(body, i+1)
	default:
		return -1
	}
	if i < n && body[i] == '.' {
		j := digits(body, i+1)
		if j == i+1 {
			return -1
		}
		i = j
	}
	if i < n && (body[i] == 'e' || body[i] == 'E') {
		i++
		if i < n && (body[i] == '+' || body[i] == '-') {
			i++
		}
		j := digits(body, i)
		if j == i {
			return -1
		}
		i = j
	}
	return i
}

func digits(body []byte, i int) int {
	for i < len(body) && '0' <= body[i] && body[i] <= '9' {
		i++
	}
	return i
}
