package ollama

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/llmedge/llmedge/backends/protocols"
	"github.com/llmedge/llmedge/backends/protocols/protocoltest"
)

// FuzzParseStream checks that any input ends in a result or a classified
// error, that deltas concatenate to the content, that usage is never made
// up, and that splitting reads differently changes nothing.
func FuzzParseStream(f *testing.F) {
	for _, s := range []string{
		lineHel + lineLo + lineDone,
		lineHel + lineDoneBare,
		lineDoneCached,
		lineHel + `{"error":"boom"}` + "\n",
		lineHel + "{nope\n",
		lineHel + lineLo,
		"\r\n\n" + strings.TrimSuffix(lineDone, "\n"),
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		protocoltest.CheckStream(t, data, func(ctx context.Context, r io.Reader, onDelta protocols.DeltaFunc) (*protocols.Result, error) {
			return parseStream(ctx, r, 256, nil, onDelta)
		})
	})
}
