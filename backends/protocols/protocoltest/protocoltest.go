// Package protocoltest holds checks shared by the adapters' tests.
package protocoltest

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/backends/protocols"
)

// ParseFunc parses a whole streamed answer from r, passing deltas on.
type ParseFunc func(ctx context.Context, r io.Reader, onDelta protocols.DeltaFunc) (*protocols.Result, error)

// CheckStream parses data whole and one byte at a time and fails t unless
// both end alike, in a result or a classified *protocols.Error; the deltas
// are non-empty and make up the content; Started is true exactly when a
// delta was passed on; and unknown usage is all zeros (never invented).
func CheckStream(t *testing.T, data []byte, parse ParseFunc) {
	t.Helper()
	run := func(oneByte bool) string {
		var deltas []string
		var rd io.Reader = bytes.NewReader(data)
		if oneByte {
			rd = iotest.OneByteReader(rd)
		}
		res, err := parse(context.Background(), rd, func(d *protocols.Delta) error {
			s := d.Text
			if s == "" {
				t.Fatal("empty delta")
			}
			deltas = append(deltas, s)
			return nil
		})
		if err != nil {
			var be *protocols.Error
			if !errors.As(err, &be) || res != nil {
				t.Fatalf("error %v (%T) with result %v", err, err, res)
			}
			if be.Started != (len(deltas) > 0) {
				t.Fatalf("Started = %v after %d deltas", be.Started, len(deltas))
			}
			return "error " + be.Kind.String() + ": " + be.Message
		}
		if res.Content != strings.Join(deltas, "") {
			t.Fatalf("content %q, deltas %q", res.Content, deltas)
		}
		if !res.UsageKnown && res.Usage != (api.Usage{}) {
			t.Fatalf("usage %+v reported as unknown", res.Usage)
		}
		if res.Done.IsZero() || res.FirstByte.IsZero() {
			t.Fatalf("times: first %v done %v", res.FirstByte, res.Done)
		}
		return res.Content + "|" + res.FinishReason
	}
	if a, b := run(false), run(true); a != b {
		t.Fatalf("whole read %q, one byte at a time %q", a, b)
	}
}

// Handler answers every request with status and contentType, then writes
// parts exactly as given, flushing after each (a replica's bytes on the
// wire).
func Handler(status int, contentType string, parts ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", contentType)
		w.WriteHeader(status)
		for _, p := range parts {
			_, _ = io.WriteString(w, p)
			w.(http.Flusher).Flush()
		}
	}
}

// Float returns a pointer to f, for the optional sampling fields of a
// protocols.Request.
func Float(f float64) *float64 { return &f }
