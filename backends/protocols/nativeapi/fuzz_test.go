package nativeapi

import (
	"context"
	"io"
	"testing"

	"github.com/llmedge/llmedge/backends/protocols"
	"github.com/llmedge/llmedge/backends/protocols/protocoltest"
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
		protocoltest.CheckStream(t, data, func(ctx context.Context, r io.Reader, onDelta protocols.DeltaFunc) (*protocols.Result, error) {
			return parseStream(ctx, r, 256, onDelta)
		})
	})
}
