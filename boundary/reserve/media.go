package reserve

import (
	"bytes"
	"strings"

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
				if cost := mediaCost(m.Value); cost > 0 {
					// The part's bytes are in the estimate already.
					extra += max(cost-(len(e.Raw)+2)/3, 0)
				}
			case "content":
				extra += media(m.Value, depth+1)
			}
			return true
		})
		return true
	})
	return extra
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
	s, ok := t.Str()
	if !ok {
		return 0
	}
	switch {
	case strings.Contains(s, "video"):
		return VideoTokens
	case strings.Contains(s, "image"):
		return ImageTokens
	case strings.Contains(s, "audio"):
		return AudioTokens
	}
	return 0
}
