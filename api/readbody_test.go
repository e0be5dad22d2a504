package api

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestReadBody: bodies of every size, with and without a length, read
// whole; a length over the limit is 413, a body shorter than its length
// a 400.
func TestReadBody(t *testing.T) {
	for _, n := range []int{0, 1, 1000, trustedLength - 1, trustedLength, trustedLength + 1, 100_000, 300_000} {
		body := []byte(strings.Repeat("abcdefghij", n/10+1)[:n])
		for _, known := range []bool{true, false} {
			r := &http.Request{Body: io.NopCloser(bytes.NewReader(body)), ContentLength: -1}
			if known {
				r.ContentLength = int64(n)
			}
			got, err := ReadBody(r, 1<<20)
			if err != nil || !bytes.Equal(got, body) {
				t.Fatalf("%d bytes (length known %v): %d bytes read, %v", n, known, len(got), err)
			}
		}
	}
	r := &http.Request{Body: io.NopCloser(strings.NewReader("x")), ContentLength: 2 << 20}
	if _, err := ReadBody(r, 1<<20); err == nil || err.Status != http.StatusRequestEntityTooLarge {
		t.Fatalf("a length over the limit: %v", err)
	}
	for _, sent := range []int{10, trustedLength + 10} {
		r = &http.Request{Body: io.NopCloser(bytes.NewReader(make([]byte, sent))), ContentLength: 200_000}
		if _, err := ReadBody(r, 1<<20); err == nil || err.Status != http.StatusBadRequest {
			t.Fatalf("%d bytes sent of 200000: %v", sent, err)
		}
	}
	r = &http.Request{Body: io.NopCloser(bytes.NewReader(make([]byte, 3<<20))), ContentLength: -1}
	if _, err := ReadBody(r, 1<<20); err == nil || err.Status != http.StatusRequestEntityTooLarge {
		t.Fatalf("an unknown length over the limit: %v", err)
	}
}
