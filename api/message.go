package api

import (
	"unsafe"

	"github.com/llmedge/llmedge/internal/jsonx"
	"github.com/llmedge/llmedge/wire"
)

// Text is the message's text: Content, or Quoted decoded.
func (m *Message) Text() string {
	if m.Quoted != nil {
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
func (m *Message) Written() string {
	if len(m.Quoted) >= 2 {
		return unsafe.String(&m.Quoted[1], len(m.Quoted)-2)
	}
	return m.Content
}

// Size is the content's length in bytes, as Written has it: for Quoted,
// at least the text's length (an escape is longer than what it stands
// for), which is what the estimates of a prompt's tokens need.
func (m *Message) Size() int {
	if m.Quoted != nil {
		return max(len(m.Quoted)-2, 0)
	}
	return len(m.Content)
}

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
	if m.Quoted != nil {
		b = append(b, m.Quoted...)
	} else {
		b = jsonx.String(b, m.Content)
	}
	return append(b, '}')
}
