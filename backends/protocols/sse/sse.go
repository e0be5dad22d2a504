// Package sse reads server-sent events (text/event-stream) and newline-delimited
// lines from replicas with bounded memory; the OpenAI-compatible and native
// adapters share it, and the Ollama adapter uses its line reader for NDJSON.
package sse

import (
	"bufio"
	"bytes"
	"errors"
	"io"
)

// ErrLineTooLong reports an SSE line, or the data of one event, over the
// reader's limit.
var ErrLineTooLong = errors.New("SSE line too long")

// readBufferSize is the bufio buffer of a stream; lines up to this size are
// not copied, longer ones grow a separate buffer up to the limit.
const readBufferSize = 8 << 10

// LineReader splits a byte stream into lines ended by "\n" or "\r\n",
// using memory bounded by max. It also serves newline-delimited JSON
// (Ollama's NDJSON streams).
type LineReader struct {
	br  *bufio.Reader
	max int
	buf []byte
}

// NewLineReader returns a reader of the lines of r, each at most max bytes.
func NewLineReader(r io.Reader, max int) *LineReader {
	return &LineReader{br: bufio.NewReaderSize(r, readBufferSize), max: max}
}

// Next returns the next line without its terminator. The slice is valid
// until the next call. At the end of input, an unterminated last line is
// returned together with the reader's error (io.EOF or another); a line
// longer than max fails with ErrLineTooLong.
func (l *LineReader) Next() ([]byte, error) {
	l.buf = l.buf[:0]
	for {
		frag, err := l.br.ReadSlice('\n')
		switch {
		case err == nil:
			line := frag
			if len(l.buf) > 0 {
				l.buf = append(l.buf, frag...)
				line = l.buf
			}
			line = trimEOL(line)
			if len(line) > l.max {
				return nil, ErrLineTooLong
			}
			return line, nil
		case errors.Is(err, bufio.ErrBufferFull):
			// +1: the fragment may end with the "\r" of a "\r\n".
			if len(l.buf)+len(frag) > l.max+1 {
				return nil, ErrLineTooLong
			}
			l.buf = append(l.buf, frag...)
		default:
			if len(l.buf)+len(frag) > l.max+1 {
				return nil, ErrLineTooLong
			}
			l.buf = append(l.buf, frag...)
			return bytes.TrimSuffix(l.buf, []byte("\r")), err
		}
	}
}

// trimEOL drops a trailing "\n" or "\r\n".
func trimEOL(b []byte) []byte {
	b = bytes.TrimSuffix(b, []byte("\n"))
	return bytes.TrimSuffix(b, []byte("\r"))
}

// Event is one server-sent event.
type Event struct {
	// Name is the event: field ("" when absent). llama.cpp's non-standard
	// "error: {json}" line is reported as an event named "error".
	Name string
	// Data is the event's data: lines joined by "\n"; valid until the next
	// call to Reader.Next.
	Data []byte
}

// Reader reads server-sent events (text/event-stream) with bounded
// memory. It follows the WHATWG framing, tolerantly: "data:" with or
// without a space, ":" comment lines, "event:", "id:" and "retry:" fields,
// blank lines between events, "\n" or "\r\n" line ends, a leading BOM, and
// an event left pending by the end of input is still delivered.
type Reader struct {
	lines   LineReader
	max     int
	first   bool // no line read yet (BOM check)
	name    string
	data    []byte
	hasData bool
	err     error // sticky end of input
}

// NewReader returns a reader of events from r whose lines and event data
// are at most max bytes.
func NewReader(r io.Reader, max int) *Reader {
	return &Reader{
		lines: *NewLineReader(r, max),
		max:   max,
		first: true,
	}
}

// Next returns the next event, or the error that ended the input: io.EOF,
// ErrLineTooLong, or the underlying reader's error. After a read error
// other than io.EOF, a pending event and a partial line are dropped: they
// may be cut short.
func (s *Reader) Next() (Event, error) {
	for {
		if s.err != nil {
			return Event{}, s.err
		}
		line, err := s.lines.Next()
		if s.first {
			s.first = false
			line = bytes.TrimPrefix(line, []byte("\xEF\xBB\xBF"))
		}
		if err != nil && !errors.Is(err, io.EOF) {
			s.err = err
			return Event{}, err
		}
		if err != nil { // io.EOF, maybe after an unterminated last line
			s.err = io.EOF
			if len(line) > 0 {
				ev, ok, ferr := s.field(line)
				if ferr != nil {
					s.err = ferr
					return Event{}, ferr
				}
				if ok {
					return ev, nil
				}
			}
			if s.hasData {
				return s.dispatch(), nil
			}
			return Event{}, io.EOF
		}
		if len(line) == 0 {
			if s.hasData {
				return s.dispatch(), nil
			}
			s.name = ""
			continue
		}
		ev, ok, ferr := s.field(line)
		if ferr != nil {
			s.err = ferr
			return Event{}, ferr
		}
		if ok {
			return ev, nil
		}
	}
}

// field applies one non-blank line. It returns an event only for the
// non-standard "error:" field, which is reported at once.
func (s *Reader) field(line []byte) (Event, bool, error) {
	if line[0] == ':' {
		return Event{}, false, nil // comment, e.g. a keep-alive
	}
	name, value := line, []byte(nil)
	if i := bytes.IndexByte(line, ':'); i >= 0 {
		name, value = line[:i], line[i+1:]
		if len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
	}
	switch string(name) {
	case "data":
		extra := len(value)
		if s.hasData {
			extra++
		}
		if len(s.data)+extra > s.max {
			return Event{}, false, ErrLineTooLong
		}
		if s.hasData {
			s.data = append(s.data, '\n')
		}
		s.data = append(s.data, value...)
		s.hasData = true
	case "event":
		s.name = string(value)
	case "error":
		return Event{Name: "error", Data: bytes.Clone(value)}, true, nil
	}
	// id, retry and unknown fields carry nothing for us.
	return Event{}, false, nil
}

// dispatch returns the pending event and starts a new one.
func (s *Reader) dispatch() Event {
	ev := Event{Name: s.name, Data: s.data}
	s.name, s.data, s.hasData = "", s.data[:0], false
	return ev
}
