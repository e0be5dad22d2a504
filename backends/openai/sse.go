package openai

import (
	"bufio"
	"bytes"
	"errors"
	"io"
)

// errLineTooLong reports an SSE line, or the data of one event, over the
// reader's limit.
var errLineTooLong = errors.New("SSE line too long")

// readBufferSize is the bufio buffer of a stream; lines up to this size are
// not copied, longer ones grow a separate buffer up to the limit.
const readBufferSize = 8 << 10

// lineReader splits a byte stream into lines ended by "\n" or "\r\n",
// using memory bounded by max.
type lineReader struct {
	br  *bufio.Reader
	max int
	buf []byte
}

// next returns the next line without its terminator. The slice is valid
// until the next call. At the end of input, an unterminated last line is
// returned together with the reader's error (io.EOF or another); a line
// longer than max fails with errLineTooLong.
func (l *lineReader) next() ([]byte, error) {
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
				return nil, errLineTooLong
			}
			return line, nil
		case errors.Is(err, bufio.ErrBufferFull):
			// +1: the fragment may end with the "\r" of a "\r\n".
			if len(l.buf)+len(frag) > l.max+1 {
				return nil, errLineTooLong
			}
			l.buf = append(l.buf, frag...)
		default:
			if len(l.buf)+len(frag) > l.max+1 {
				return nil, errLineTooLong
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

// sseEvent is one server-sent event.
type sseEvent struct {
	// name is the event: field ("" when absent). llama.cpp's non-standard
	// "error: {json}" line is reported as an event named "error".
	name string
	// data is the event's data: lines joined by "\n"; valid until the next
	// call to sseReader.next.
	data []byte
}

// sseReader reads server-sent events (text/event-stream) with bounded
// memory. It follows the WHATWG framing, tolerantly: "data:" with or
// without a space, ":" comment lines, "event:", "id:" and "retry:" fields,
// blank lines between events, "\n" or "\r\n" line ends, a leading BOM, and
// an event left pending by the end of input is still delivered.
type sseReader struct {
	lines   lineReader
	max     int
	first   bool // no line read yet (BOM check)
	name    string
	data    []byte
	hasData bool
	err     error // sticky end of input
}

// newSSEReader returns a reader of events from r whose lines and event data
// are at most max bytes.
func newSSEReader(r io.Reader, max int) *sseReader {
	return &sseReader{
		lines: lineReader{br: bufio.NewReaderSize(r, readBufferSize), max: max},
		max:   max,
		first: true,
	}
}

// next returns the next event, or the error that ended the input: io.EOF,
// errLineTooLong, or the underlying reader's error. After a read error
// other than io.EOF, a pending event and a partial line are dropped: they
// may be cut short.
func (s *sseReader) next() (sseEvent, error) {
	for {
		if s.err != nil {
			return sseEvent{}, s.err
		}
		line, err := s.lines.next()
		if s.first {
			s.first = false
			line = bytes.TrimPrefix(line, []byte("\xEF\xBB\xBF"))
		}
		if err != nil && !errors.Is(err, io.EOF) {
			s.err = err
			return sseEvent{}, err
		}
		if err != nil { // io.EOF, maybe after an unterminated last line
			s.err = io.EOF
			if len(line) > 0 {
				ev, ok, ferr := s.field(line)
				if ferr != nil {
					s.err = ferr
					return sseEvent{}, ferr
				}
				if ok {
					return ev, nil
				}
			}
			if s.hasData {
				return s.dispatch(), nil
			}
			return sseEvent{}, io.EOF
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
			return sseEvent{}, ferr
		}
		if ok {
			return ev, nil
		}
	}
}

// field applies one non-blank line. It returns an event only for the
// non-standard "error:" field, which is reported at once.
func (s *sseReader) field(line []byte) (sseEvent, bool, error) {
	if line[0] == ':' {
		return sseEvent{}, false, nil // comment, e.g. a keep-alive
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
			return sseEvent{}, false, errLineTooLong
		}
		if s.hasData {
			s.data = append(s.data, '\n')
		}
		s.data = append(s.data, value...)
		s.hasData = true
	case "event":
		s.name = string(value)
	case "error":
		return sseEvent{name: "error", data: bytes.Clone(value)}, true, nil
	}
	// id, retry and unknown fields carry nothing for us.
	return sseEvent{}, false, nil
}

// dispatch returns the pending event and starts a new one.
func (s *sseReader) dispatch() sseEvent {
	ev := sseEvent{name: s.name, data: s.data}
	s.name, s.data, s.hasData = "", s.data[:0], false
	return ev
}
