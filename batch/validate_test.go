package batch

import (
	"bufio"
	"errors"
	"io"
	"strings"
	"testing"
)

// TestReadLine: lines longer than the reader's buffer are read whole,
// a line past the most is dropped to its end, and the last line needs
// no newline.
func TestReadLine(t *testing.T) {
	big := strings.Repeat("x", 100_000) // beyond the 64 KiB buffer
	for _, c := range []struct {
		name, in string
		max      int
		want     []string // "!" for a line too long
	}{
		{"plain", "a\nbb\n", 10, []string{"a", "bb", ""}},
		{"no final newline", "a\nbb", 10, []string{"a", "bb"}},
		{"crlf", "a\r\nbb\r\n", 10, []string{"a", "bb", ""}},
		{"at the most", "abc\nabcd\n", 3, []string{"abc", "!", ""}},
		{"last line past the most", "abc\nabcd", 3, []string{"abc", "!"}},
		{"longer than the buffer", big + "\nz", 200_000, []string{big, "z"}},
		{"longer than the most and the buffer", big + "\nz", 1000, []string{"!", "z"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			br := bufio.NewReaderSize(strings.NewReader(c.in), 64<<10)
			var buf []byte
			var got []string
			for {
				line, tooLong, err := readLine(br, &buf, c.max)
				if err != nil && !errors.Is(err, io.EOF) {
					t.Fatal(err)
				}
				if tooLong {
					got = append(got, "!")
				} else {
					got = append(got, string(line))
				}
				if err != nil {
					break
				}
			}
			if len(got) != len(c.want) {
				t.Fatalf("got %d lines, want %d", len(got), len(c.want))
			}
			for i := range got {
				if got[i] != c.want[i] {
					t.Fatalf("line %d = %.20q (%d bytes), want %.20q", i+1, got[i], len(got[i]), c.want[i])
				}
			}
		})
	}
}
