package api

import (
	"strings"
	"unicode/utf8"
	"unsafe"

	"github.com/llmedge/llmedge/internal/jsonx"
	"github.com/llmedge/llmedge/wire"
)

// Text is the message's text: Content, or Quoted decoded, or Parts
// decoded and joined.
func (m *Message) Text() string {
	switch {
	case m.Parts != nil:
		var b strings.Builder
		for i, p := range m.Parts {
			if i > 0 {
				b.WriteByte('\n')
			}
			if isQuoted(p) {
				b.WriteString(wire.Value{Raw: p}.Text())
			} else {
				b.Write(p)
			}
		}
		return b.String()
	case m.Quoted != nil:
		return wire.Value{Raw: m.Quoted}.Text()
	}
	return m.Content
}

// Written is the content as routing sees it: Content, or the inside of
// Quoted as the client wrote it, escapes and all, without a copy. One
// client spells one text alike on every turn of a conversation, which is
// what prefix affinity needs; the same text sent once escaped and once
// not is two prompts to it (the replica's cache holds tokens, not JSON,
// so that costs a prediction, never a wrong answer). The string shares
// Quoted's bytes, which nothing changes: it must not outlive the request.
// A message of Parts is their pieces joined, a copy: the request path
// reads Pieces instead.
func (m *Message) Written() string {
	switch {
	case m.Parts != nil:
		var b strings.Builder
		for s := range m.Pieces {
			b.WriteString(s)
		}
		return b.String()
	case len(m.Quoted) >= 2:
		return unsafe.String(&m.Quoted[1], len(m.Quoted)-2)
	}
	return m.Content
}

// Pieces yields Written in pieces, without a copy: the content, or each
// part as written (a text part's inside of its quotes) and the newlines
// between them. The strings share the message's bytes: they must not
// outlive the request.
func (m *Message) Pieces(yield func(string) bool) {
	if m.Parts == nil {
		yield(m.Written())
		return
	}
	for i, p := range m.Parts {
		if i > 0 && !yield("\n") {
			return
		}
		if isQuoted(p) {
			p = p[1 : len(p)-1]
		}
		if len(p) > 0 && !yield(unsafe.String(&p[0], len(p))) {
			return
		}
	}
}

// Size is the content's length in bytes, as Written has it: for Quoted
// and Parts, at least the text's length (an escape is longer than what
// it stands for), which is what the estimates of a prompt's tokens need.
func (m *Message) Size() int {
	switch {
	case m.Parts != nil:
		n := max(len(m.Parts)-1, 0) // the newlines
		for _, p := range m.Parts {
			if isQuoted(p) {
				n += len(p) - 2
			} else {
				n += len(p)
			}
		}
		return n
	case m.Quoted != nil:
		return max(len(m.Quoted)-2, 0)
	}
	return len(m.Content)
}

// CharsOver reports whether the message's text has more than limit
// characters, as the limit on a message's text (max_content_chars) counts
// them, and then how many: Content's, Quoted's or the text parts'
// characters decoded, and the newlines that join the parts. A part that
// is not text (an image, a tool call) counts nothing: its bytes are
// bounded by the body's. A text is decoded only when its bytes exceed
// limit (a character is at least one byte, and an escape is longer than
// what it stands for), so a text within the limit costs nothing.
func (m *Message) CharsOver(limit int) (n int, over bool) {
	switch {
	case m.Parts != nil:
		n = max(len(m.Parts)-1, 0) // the newlines
		for _, p := range m.Parts {
			if isQuoted(p) {
				n += len(p) - 2
			}
		}
		if n <= limit {
			return 0, false
		}
		n = max(len(m.Parts)-1, 0)
		for _, p := range m.Parts {
			if isQuoted(p) {
				n += utf8.RuneCountInString(wire.Value{Raw: p}.Text())
			}
		}
	case m.Quoted != nil:
		if len(m.Quoted)-2 <= limit {
			return 0, false
		}
		n = utf8.RuneCountInString(wire.Value{Raw: m.Quoted}.Text())
	default:
		if len(m.Content) <= limit {
			return 0, false
		}
		n = utf8.RuneCountInString(m.Content)
	}
	if n <= limit {
		return 0, false
	}
	return n, true
}

// isQuoted: part p of Parts is a text part's text, a JSON string.
func isQuoted(p []byte) bool { return len(p) >= 2 && p[0] == '"' }

// MarshalJSON writes the message as the replicas' chat APIs take it;
// Quoted is written as it came, already JSON.
func (m Message) MarshalJSON() ([]byte, error) {
	return AppendMessage(make([]byte, 0, 32+len(m.Role)+m.Size()+m.Size()/8), &m), nil
}

// AppendMessage appends m as {"role":…,"content":…} to b.
func AppendMessage(b []byte, m *Message) []byte {
	b = append(b, `{"role":`...)
	b = jsonx.String(b, m.Role)
	b = append(b, `,"content":`...)
	switch {
	case m.Parts != nil:
		b = jsonx.String(b, m.Text()) // translated: one string, as vLLM reads the parts
	case m.Quoted != nil:
		b = append(b, m.Quoted...)
	default:
		b = jsonx.String(b, m.Content)
	}
	return append(b, '}')
}
