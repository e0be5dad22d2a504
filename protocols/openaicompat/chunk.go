package openaicompat

import (
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf8"
	"unsafe"
)

// decodeChunk decodes one streamed chunk into c. Every answer a replica
// streams passes through here once per token, so the common shapes (a
// content delta, a finishing chunk) are read by a small scanner instead of
// encoding/json's reflection; anything else — errors, usage, several
// choices, escapes in keys, unexpected types — goes to encoding/json,
// whose behaviour defines the result (FuzzDecodeChunk checks they agree).
//
// c is reset first; its Choices array is reused, so a caller that decodes
// chunk after chunk into one wireResponse allocates it once.
func decodeChunk(data []byte, c *wireResponse) error {
	choices := c.Choices[:0]
	*c = wireResponse{Choices: choices}
	var s chunkScanner
	if s.decode(data, c) {
		return nil
	}
	*c = wireResponse{}
	return json.Unmarshal(data, c)
}

// chunkScanner reads a chunk, validating what it reads and what it skips,
// so that it accepts only JSON that encoding/json accepts. Each method
// reports false to hand the chunk to encoding/json.
type chunkScanner struct {
	b []byte
	i int
}

func (s *chunkScanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// peek returns the next non-space byte.
func (s *chunkScanner) peek() byte {
	s.ws()
	if s.i >= len(s.b) {
		return 0
	}
	return s.b[s.i]
}

// str reads a string token; ok is false when it has escapes or invalid
// UTF-8 (its value then needs a real decoder) or is not a string.
func (s *chunkScanner) str() (string, bool) {
	raw, ok := s.rawStr()
	if !ok {
		return "", false
	}
	return intern(raw), true
}

// rawStr is str without the copy: the bytes of the string's value, valid
// until the scanner's input changes.
func (s *chunkScanner) rawStr() ([]byte, bool) {
	if s.peek() != '"' {
		return nil, false
	}
	start := s.i + 1
	ascii := true
	for j := start; j < len(s.b); j++ {
		switch c := s.b[j]; {
		case c == '\\', c < 0x20:
			return nil, false
		case c == '"':
			if !ascii && !utf8.Valid(s.b[start:j]) {
				return nil, false // encoding/json substitutes U+FFFD
			}
			s.i = j + 1
			return s.b[start:j], true
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	return nil, false
}

// interned are the values every chunk repeats: returned as constants,
// they cost no allocation per token.
var interned = []string{"chat.completion.chunk", "chat.completion", "stop", "length", ""}

func intern(raw []byte) string {
	for _, v := range interned {
		if string(raw) == v {
			return v
		}
	}
	return string(raw)
}

// strOrEscaped reads a string token, decoding escapes when there are any.
func (s *chunkScanner) strOrEscaped() (string, bool) {
	if v, ok := s.str(); ok {
		return v, true
	}
	if s.peek() != '"' {
		return "", false
	}
	start := s.i
	if !s.skip() {
		return "", false
	}
	var v string
	return v, json.Unmarshal(s.b[start:s.i], &v) == nil
}

// null consumes a null literal if one is next.
func (s *chunkScanner) null() bool {
	return s.peek() == 'n' && s.literal("null")
}

// maxSkipDepth bounds the nesting skip follows; deeper values go to
// encoding/json.
const maxSkipDepth = 64

// skip passes over one value, checking it is valid JSON; false gives up.
func (s *chunkScanner) skip() bool { return s.skipDepth(0) }

func (s *chunkScanner) skipDepth(depth int) bool {
	if depth > maxSkipDepth {
		return false
	}
	switch c := s.peek(); {
	case c == '"':
		return s.skipString()
	case c == '{':
		s.i++
		if s.peek() == '}' {
			s.i++
			return true
		}
		for {
			if s.peek() != '"' || !s.skipString() || s.peek() != ':' {
				return false
			}
			s.i++
			if !s.skipDepth(depth + 1) {
				return false
			}
			switch s.peek() {
			case ',':
				s.i++
			case '}':
				s.i++
				return true
			default:
				return false
			}
		}
	case c == '[':
		s.i++
		if s.peek() == ']' {
			s.i++
			return true
		}
		for {
			if !s.skipDepth(depth + 1) {
				return false
			}
			switch s.peek() {
			case ',':
				s.i++
			case ']':
				s.i++
				return true
			default:
				return false
			}
		}
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	case c == '-' || ('0' <= c && c <= '9'):
		return s.skipNumber()
	}
	return false
}

func (s *chunkScanner) literal(word string) bool {
	if len(s.b)-s.i < len(word) || string(s.b[s.i:s.i+len(word)]) != word {
		return false
	}
	s.i += len(word)
	return true
}

// skipString passes over a string token, checking its escapes and that it
// has no raw control characters.
func (s *chunkScanner) skipString() bool {
	for j := s.i + 1; j < len(s.b); j++ {
		switch c := s.b[j]; {
		case c == '"':
			s.i = j + 1
			return true
		case c < 0x20:
			return false
		case c == '\\':
			j++
			if j >= len(s.b) {
				return false
			}
			switch s.b[j] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if j+4 >= len(s.b) {
					return false
				}
				for _, h := range s.b[j+1 : j+5] {
					if !isHex(h) {
						return false
					}
				}
				j += 4
			default:
				return false
			}
		}
	}
	return false
}

func isHex(c byte) bool {
	return ('0' <= c && c <= '9') || ('a' <= c && c <= 'f') || ('A' <= c && c <= 'F')
}

// skipNumber passes over a number: -? (0 | [1-9][0-9]*) (.[0-9]+)? ([eE][+-]?[0-9]+)?
func (s *chunkScanner) skipNumber() bool {
	b, i := s.b, s.i
	digits := func() bool {
		n := i
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
		return i > n
	}
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case !digits():
		return false
	}
	if i < len(b) && b[i] == '.' {
		i++
		if !digits() {
			return false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if !digits() {
			return false
		}
	}
	s.i = i
	return true
}

// object calls field for each wanted key of an object; field reports
// false to give up. Keys with escapes, a wanted key given twice, and keys
// that match a wanted name only case-insensitively (encoding/json would
// take them) give up too.
func (s *chunkScanner) object(wanted []string, field func(key string) bool) bool {
	var seen uint32
	if s.peek() != '{' {
		return false
	}
	s.i++
	if s.peek() == '}' {
		s.i++
		return true
	}
	for {
		raw, ok := s.rawStr()
		if !ok || s.peek() != ':' {
			return false
		}
		// A view of the key, not a copy: field callbacks only compare it.
		key := unsafe.String(unsafe.SliceData(raw), len(raw))
		s.i++
		known := false
		for n, w := range wanted {
			if key == w {
				if seen&(1<<n) != 0 {
					return false
				}
				seen |= 1 << n
				known = true
			} else if strings.EqualFold(key, w) {
				return false
			}
		}
		if known {
			if !field(key) {
				return false
			}
		} else if !s.skip() {
			return false
		}
		switch s.peek() {
		case ',':
			s.i++
		case '}':
			s.i++
			return true
		default:
			return false
		}
	}
}

var (
	chunkKeys   = []string{"object", "error", "choices", "usage"}
	choiceKeys  = []string{"delta", "message", "finish_reason"}
	messageKeys = []string{"content"}
	usageKeys   = []string{"prompt_tokens", "completion_tokens", "total_tokens"}
)

// usage reads a usage object of plain integer counts; anything else (a
// fraction, an exponent, a number beyond int) goes to encoding/json.
func (s *chunkScanner) usage(c *wireResponse) bool {
	u := &wireUsage{}
	ok := s.object(usageKeys, func(key string) bool {
		if s.null() {
			return true
		}
		n, ok := s.int()
		if !ok {
			return false
		}
		switch key {
		case "prompt_tokens":
			u.PromptTokens = &n
		case "completion_tokens":
			u.CompletionTokens = &n
		case "total_tokens":
			u.TotalTokens = &n
		}
		return true
	})
	c.Usage = u
	return ok
}

// int reads an integer token: -?(0|[1-9][0-9]*), within int's range.
func (s *chunkScanner) int() (int, bool) {
	s.ws()
	start := s.i
	if !s.skipNumber() {
		return 0, false
	}
	raw := s.b[start:s.i]
	n, err := strconv.Atoi(unsafe.String(unsafe.SliceData(raw), len(raw)))
	return n, err == nil
}

func (s *chunkScanner) decode(data []byte, c *wireResponse) bool {
	s.b, s.i = data, 0
	ok := s.object(chunkKeys, func(key string) bool {
		switch key {
		case "object":
			if s.null() {
				return true
			}
			v, ok := s.strOrEscaped()
			c.Object = v
			return ok
		case "error":
			if s.null() {
				c.Error = json.RawMessage("null")
				return true
			}
			return false // an error report: the rare path
		case "choices":
			return s.choices(c)
		case "usage":
			if s.null() {
				return true
			}
			return s.usage(c)
		}
		return false
	})
	if !ok {
		return false
	}
	s.ws()
	return s.i == len(s.b)
}

func (s *chunkScanner) choices(c *wireResponse) bool {
	if s.null() {
		c.Choices = nil
		return true
	}
	if s.peek() != '[' {
		return false
	}
	s.i++
	if c.Choices == nil {
		c.Choices = []wireChoice{}
	}
	if s.peek() == ']' {
		s.i++
		return true
	}
	var ch wireChoice
	ok := s.object(choiceKeys, func(key string) bool {
		switch key {
		case "delta":
			return s.message(&ch.Delta)
		case "message":
			return s.message(&ch.Message)
		case "finish_reason":
			if s.null() {
				return true
			}
			v, ok := s.strOrEscaped()
			ch.FinishReason = &v
			return ok
		}
		return false
	})
	if !ok || s.peek() != ']' { // several choices: the rare path
		return false
	}
	s.i++
	c.Choices = append(c.Choices, ch)
	return true
}

func (s *chunkScanner) message(m *wireMessage) bool {
	if s.null() {
		return true
	}
	return s.object(messageKeys, func(string) bool {
		if s.null() {
			return true
		}
		v, ok := s.strOrEscaped()
		m.Content = v
		return ok
	})
}
