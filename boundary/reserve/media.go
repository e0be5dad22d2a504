package reserve

import (
	"bytes"

	"github.com/llmedge/llmedge/wire"
)

// maxDepth bounds the walk into nested contents (a tool result's content
// in a message's, as Anthropic's API nests them); deeper parts count
// their bytes only.
const maxDepth = 4

// media is what the media parts of a conversation (messages, a Responses
// input) cost beyond their bytes' estimate: each image, audio or video
// part at least its fixed cost. A conversation that names no media, as
// most do, is not walked.
func media(v wire.Value, depth int) int {
	if v.Kind() != wire.Array || depth > maxDepth || !mayHoldMedia(v.Raw) {
		return 0
	}
	extra := 0
	_ = v.Elements(func(_ int, e wire.Value) bool {
		if e.Kind() != wire.Object {
			return true
		}
		_ = e.Members(func(m wire.Member) bool {
			switch m.Name {
			case "type":
				extra += partCost(m.Value, e)
			case "content":
				extra += media(m.Value, depth+1)
			}
			return true
		})
		return true
	})
	return extra
}

// Read counts the conversation a door has read (wire.ReadChat's messages
// or wire.ReadInput's input, in c) as Of counts it from the body: its
// items (1 when it is not an array), and what its media parts cost beyond
// their bytes' estimate. The items' and parts' types are the reader's;
// only a part's own content (an Anthropic tool_result's) is read again,
// and only when it names a medium.
func Read(c *wire.Chat) (items, mediaTokens int) {
	if c.Messages.Kind() != wire.Array {
		return 1, 0
	}
	extra := 0
	for i := range c.Items {
		it := &c.Items[i]
		extra += partCost(it.Type, it.Value)
	}
	for i := range c.Parts {
		p := &c.Parts[i]
		extra += partCost(p.Type, p.Value)
		for _, m := range c.MembersOf(p) {
			if m.Name == "content" {
				extra += media(m.Value, 2)
			}
		}
	}
	return len(c.Items), extra
}

// partCost is what an element of type t costs beyond its bytes' estimate.
func partCost(t, e wire.Value) int {
	if cost := mediaCost(t); cost > 0 {
		return max(cost-(len(e.Raw)+2)/3, 0) // the part's bytes are in the estimate already
	}
	return 0
}

// mayHoldMedia: the bytes name a medium, or hold an escape that could
// spell one.
func mayHoldMedia(b []byte) bool {
	return bytes.Contains(b, []byte("image")) || bytes.Contains(b, []byte("audio")) ||
		bytes.Contains(b, []byte("video")) || bytes.Contains(b, []byte(`\u`))
}

// mediaCost is the fixed cost of a part of type t: image_url, input_image,
// image (Anthropic's), input_audio, video_url and their kin; 0 for text and
// anything else.
func mediaCost(t wire.Value) int {
	if t.Kind() != wire.String {
		return 0
	}
	// A type as written, with no escape, is read where it lies; one that
	// has escapes is decoded first.
	s := t.Raw
	if bytes.IndexByte(s, '\\') >= 0 {
		d, _ := t.Str()
		s = []byte(d)
	}
	switch {
	case bytes.Contains(s, []byte("video")):
		return VideoTokens
	case bytes.Contains(s, []byte("image")):
		return ImageTokens
	case bytes.Contains(s, []byte("audio")):
		return AudioTokens
	}
	return 0
}
