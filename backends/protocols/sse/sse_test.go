package sse

import (
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// readEvents reads all events of in (fed one byte at a time, to exercise
// line reassembly), as "name|data" strings.
func readEvents(in string, max int) ([]string, error) {
	r := NewReader(iotest.OneByteReader(strings.NewReader(in)), max)
	var out []string
	for {
		ev, err := r.Next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return out, err
		}
		out = append(out, ev.Name+"|"+string(ev.Data))
	}
}

func TestSSEReader(t *testing.T) {
	cases := []struct {
		name string
		in   string
		want []string
		err  error
	}{
		{"space optional", "data: a\n\ndata:b\n\ndata:  c\n\n", []string{"|a", "|b", "| c"}, nil},
		{"comments and blank lines", ":\n\n: ping\n\n\n\ndata: a\n\n", []string{"|a"}, nil},
		{"multi-line data", "data: a\ndata: b\n\n", []string{"|a\nb"}, nil},
		{"event name resets", "event: ping\ndata: x\n\ndata: y\n\n", []string{"ping|x", "|y"}, nil},
		{"event without data is dropped", "event: ping\n\ndata: y\n\n", []string{"|y"}, nil},
		{"id retry and unknown fields ignored", "id: 7\nretry: 10\nfoo: bar\nnocolon\ndata: a\n\n", []string{"|a"}, nil},
		{"error field reported at once", "data: a\nerror: {\"m\":1}\n\n", []string{"error|{\"m\":1}", "|a"}, nil},
		{"CRLF", "data: a\r\n\r\ndata: b\r\n\r\n", []string{"|a", "|b"}, nil},
		{"BOM", "\xEF\xBB\xBFdata: a\n\n", []string{"|a"}, nil},
		{"pending event at EOF", "data: a\n\ndata: b", []string{"|a", "|b"}, nil},
		{"pending event at EOF after newline", "data: a\n", []string{"|a"}, nil},
		{"empty data", "data:\n\n", []string{"|"}, nil},
		{"line at the limit", "data: " + strings.Repeat("x", 10) + "\n\n", []string{"|" + strings.Repeat("x", 10)}, nil},
		{"line over the limit", "data: " + strings.Repeat("x", 11) + "\n\n", nil, ErrLineTooLong},
		{"unterminated line over the limit", "data: " + strings.Repeat("x", 20), nil, ErrLineTooLong},
		{"event over the limit", "data: 123456789\ndata: 123456789\n\n", nil, ErrLineTooLong},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := readEvents(tc.in, 16)
			if !errors.Is(err, tc.err) {
				t.Fatalf("error = %v, want %v", err, tc.err)
			}
			if strings.Join(got, "\x00") != strings.Join(tc.want, "\x00") {
				t.Errorf("events = %q, want %q", got, tc.want)
			}
		})
	}
}

// A read error other than EOF drops the partial line and pending event.
func TestSSEReaderReadError(t *testing.T) {
	boom := errors.New("connection reset")
	r := NewReader(io.MultiReader(strings.NewReader("data: a\n\ndata: b"), iotest.ErrReader(boom)), 64)
	ev, err := r.Next()
	if err != nil || string(ev.Data) != "a" {
		t.Fatalf("first event %q, %v", ev.Data, err)
	}
	if _, err := r.Next(); !errors.Is(err, boom) {
		t.Fatalf("error = %v, want %v", err, boom)
	}
	if _, err := r.Next(); !errors.Is(err, boom) {
		t.Fatalf("error is not sticky: %v", err)
	}
}

// Memory stays bounded by the limit whatever the input.
func TestLineReaderBoundedMemory(t *testing.T) {
	const max = 1 << 10
	r := NewReader(strings.NewReader(strings.Repeat("z", 1<<20)), max)
	if _, err := r.Next(); !errors.Is(err, ErrLineTooLong) {
		t.Fatalf("error = %v", err)
	}
	if c := cap(r.lines.buf); c > max+readBufferSize {
		t.Errorf("line buffer grew to %d bytes", c)
	}
}
