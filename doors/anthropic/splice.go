package anthropic

import (
	"bytes"
	"strconv"

	"github.com/llmedge/llmedge/gateway"
	"github.com/llmedge/llmedge/wire"
)

// A stream the gateway continues on another replica (gateway.Continuer)
// reads as one message: the continuation is asked for in OpenAI's chat
// format (the request's translation; Anthropic's Messages have no way to
// ask for one), and its chunks are written as more deltas of the text
// block the client has open: no second message_start, no second
// content_block_start, one content_block_stop, and a message_delta whose
// usage counts the whole answer. The stream before may have been the
// replica's own events, relayed, or the door's translation.

var _ gateway.Continuer = (*Door)(nil)

// Continue implements gateway.Continuer: a stream whose open block is a
// text block, its last event a delta of it, goes on in that block.
func (*Door) Continue(a *gateway.Answer, last []byte) bool {
	s := streamOf(a)
	if a.Splice != nil {
		// A second continuation: the first's text block is still the
		// open one, unless the stream went on with another.
		return s.open == blockText
	}
	next := *s
	switch {
	case s.relayed:
		// The replica's own events: the block its last delta was of.
		i, ok := textDeltaIndex(last)
		if !ok {
			return false
		}
		next = stream{started: true, open: blockText, index: i, next: i + 1}
	case !s.started || s.open != blockText:
		return false
	}
	a.Splice = &next
	return true
}

// textDeltaIndex is the index of the block of the last of events (those
// a first token released may be several), when it is a text_delta.
func textDeltaIndex(events []byte) (int, bool) {
	events = bytes.TrimSuffix(events, []byte("\n\n"))
	if i := bytes.LastIndex(events, []byte("\n\n")); i >= 0 {
		events = events[i+2:]
	}
	data, ok := bytes.CutPrefix(events, []byte("event: content_block_delta\ndata: "))
	if !ok {
		return 0, false
	}
	index, text := -1, false
	err := wire.Value{Raw: data, End: len(data)}.Members(func(m wire.Member) bool {
		switch m.Name {
		case "index":
			if n, err := strconv.Atoi(string(m.Value.Raw)); err == nil {
				index = n
			}
		case "delta":
			_ = m.Value.Members(func(d wire.Member) bool {
				if d.Name == "type" && string(d.Value.Raw) == `"text_delta"` {
					text = true
				}
				return true
			})
		}
		return true
	})
	return index, err == nil && index >= 0 && text
}
