package openaicompat

import (
	"testing"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/protocols"
	"github.com/llmedge/llmedge/wire"
)

// TestAppendPassBodyStream: a call that streams from the replica asks
// for the stream and for its usage, whatever the client's body said; a
// call that does not leaves both as the client wrote them.
func TestAppendPassBodyStream(t *testing.T) {
	for _, tc := range []struct {
		name   string
		format api.Format
		body   string
		stream bool
		want   string
	}{
		{"client streams", api.FormatOpenAIChat, `{"model":"m","stream":true}`, true,
			`{"model":"u","stream":true,"stream_options":{"include_usage":true}}`},
		{"client wants one answer, the model streams always", api.FormatOpenAIChat, `{"model":"m"}`, true,
			`{"model":"u","stream":true,"stream_options":{"include_usage":true}}`},
		{"stream false made true", api.FormatOpenAIChat, `{"stream":false,"model":"m"}`, true,
			`{"stream":true,"model":"u","stream_options":{"include_usage":true}}`},
		{"stream null made true", api.FormatOpenAICompletions, `{"model":"m","stream":null,"prompt":"x"}`, true,
			`{"model":"u","stream":true,"prompt":"x","stream_options":{"include_usage":true}}`},
		{"one answer: as written", api.FormatOpenAIChat, `{"model":"m","stream":false}`, false,
			`{"model":"u","stream":false}`},
		{"embeddings: never a stream", api.FormatOpenAIEmbeddings, `{"model":"m","input":"x"}`, true,
			`{"model":"u","input":"x"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := []byte(tc.body)
			var o wire.Request
			if err := wire.ReadRequest(body, &o); err != nil {
				t.Fatal(err)
			}
			req := &protocols.Request{Model: "u", Wire: &api.Wire{Format: tc.format, Body: body, Object: o.Body, Members: o.Members}}
			if got := string(appendPassBody(nil, req, tc.stream)); got != tc.want {
				t.Fatalf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}
