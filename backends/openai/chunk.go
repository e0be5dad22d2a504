package openai

import (
	"encoding/json"
	"strings"
	"unicode/utf8"
)

// decodeChunk decodes one streamed chunk into c. Every answer a replica
// streams passes through here once per token, so the common shapes (a
// content delta, a finishing chunk) are read by a small scanner instead of
// encoding/json's reflection; anything else — errors, usage, several
// choices, escapes in keys, unexpected types — goes to encoding/json,
// whose behaviour defines the result (FuzzDecodeChunk checks they agree).
func decodeChunk(data []byte, c *wireResponse) error {
	if json.Valid(data) {
		var s chunkScanner
		if s.decode(data, c) {
			return nil
		}
		*c = wireResponse{}
	}
	return json.Unmarshal(data, c)
}

// chunkScanner reads a chunk known to be valid JSON. Each method reports
// false to hand the chunk to encoding/json.
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
	if s.peek() != '"' {
		return "", false
	}
	start := s.i + 1
	ascii := true
	for j := start; j < len(s.b); j++ {
		switch c := s.b[j]; {
		case c == '\\':
			return "", false
		case c == '"':
			if !ascii && !utf8.Valid(s.b[start:j]) {
				return "", false // encoding/json substitutes U+FFFD
			}
			s.i = j + 1
			return string(s.b[start:j]), true
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	return "", false
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
	if s.peek() == 'n' && strings.HasPrefix(string(s.b[s.i:min(s.i+4, len(s.b))]), "null") {
		s.i += 4
		return true
	}
	return false
}

// skip passes over one value (valid JSON assumed).
func (s *chunkScanner) skip() bool {
	switch s.peek() {
	case '"':
		for j := s.i + 1; j < len(s.b); j++ {
			switch s.b[j] {
			case '\\':
				j++
			case '"':
				s.i = j + 1
				return true
			}
		}
		return false
	case '{', '[':
		depth := 0
		for s.i < len(s.b) {
			switch s.b[s.i] {
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					s.i++
					return true
				}
			case '"':
				if !s.skip() {
					return false
				}
				continue
			}
			s.i++
		}
		return false
	default: // number, true, false, null
		for s.i < len(s.b) {
			switch s.b[s.i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return true
			}
			s.i++
		}
		return true
	}
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
		key, ok := s.str()
		if !ok || s.peek() != ':' {
			return false
		}
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
)

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
			return s.null() // usage counts: the rare path
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
	c.Choices = []wireChoice{}
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
