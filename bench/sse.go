package bench

import "bytes"

// sseKind is what one line of a server-sent-event stream means to the
// benchmark.
type sseKind int

const (
	sseOther sseKind = iota // blank lines, comments, role and finish chunks, usage
	sseToken                // a data line carrying new, non-empty text
	sseDone                 // the end of a complete stream
	sseError                // the server reports a failure in the stream
)

// sseTokens classifies the lines of one stream, in either dialect the
// benchmark reads: OpenAI's (`data: {..."delta":{"content":"x"}...}` ...
// `data: [DONE]`) from the replica and stock Caddy, and llmedge's
// (`data: {"content":"x"}` ... `event: done`). It tracks the event name,
// so that llmedge's final `event: done` whose data repeats the whole
// answer is not taken for a token. It looks for bytes, not JSON, to keep
// the client's cost low at tens of thousands of events per second.
type sseTokens struct {
	event []byte // name of the event being read; empty for the default
}

var (
	contentKey = []byte(`"content":"`)
	dataPrefix = []byte("data:")
	eventField = []byte("event:")
	doneData   = []byte("[DONE]")
)

// line classifies one line, without its line ending.
func (s *sseTokens) line(l []byte) sseKind {
	switch {
	case len(l) == 0:
		s.event = s.event[:0]
		return sseOther
	case bytes.HasPrefix(l, eventField):
		s.event = append(s.event[:0], bytes.TrimSpace(l[len(eventField):])...)
		switch string(s.event) {
		case "done":
			return sseDone
		case "error":
			return sseError
		}
		return sseOther
	case !bytes.HasPrefix(l, dataPrefix) || len(s.event) > 0:
		return sseOther
	}
	data := bytes.TrimSpace(l[len(dataPrefix):])
	if bytes.Equal(data, doneData) {
		return sseDone
	}
	i := bytes.Index(data, contentKey)
	if i < 0 || i+len(contentKey) >= len(data) || data[i+len(contentKey)] == '"' {
		return sseOther
	}
	return sseToken
}
