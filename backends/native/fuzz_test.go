package native

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/backends"
)

// FuzzParseStream checks that any input ends in a result or a classified
// error, that deltas concatenate to the content, that unknown usage is
// zero, and that splitting reads differently changes nothing.
func FuzzParseStream(f *testing.F) {
	for _, s := range []string{
		evPing + evHel + evLo + evDone,
		evHel + evDoneUnknown,
		evHel + evError,
		evHel + evLo,
		"data:{\"content\":\"a\"}\r\n\r\nevent: done\r\ndata: {}",
		"data: {\"content\":\n\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		run := func(oneByte bool) string {
			var deltas []string
			var rd io.Reader = bytes.NewReader(data)
			if oneByte {
				rd = iotest.OneByteReader(rd)
			}
			res, err := parseStream(context.Background(), rd, 256, func(s string) error {
				if s == "" {
					t.Fatal("empty delta")
				}
				deltas = append(deltas, s)
				return nil
			})
			if err != nil {
				var be *backends.Error
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
			return res.Content
		}
		if a, b := run(false), run(true); a != b {
			t.Fatalf("whole read %q, one byte at a time %q", a, b)
		}
	})
}
