package openaicompat

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/backends/protocols"
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
			pieces, n := passBody(req, tc.stream)
			if got := string(bytes.Join(pieces, nil)); got != tc.want || n != len(tc.want) {
				t.Fatalf("in pieces: got %s (%d bytes)\nwant %s", got, n, tc.want)
			}
		})
	}
}

// TestNewHTTPRequestLargeBody: a large body carried through is sent in
// pieces, the client's bytes in place; every reading of it (the first,
// and GetBody's for a retry) is the whole edited body.
func TestNewHTTPRequestLargeBody(t *testing.T) {
	body := []byte(`{"model":"m","messages":[{"role":"user","content":"` + strings.Repeat("word ", piecesFrom/4) + `"}],"stream":true}`)
	var o wire.Request
	if err := wire.ReadRequest(body, &o); err != nil {
		t.Fatal(err)
	}
	req := &protocols.Request{Model: "upstream", BaseURL: "http://replica:8000", CapTokens: 9,
		Wire: &api.Wire{Format: api.FormatOpenAIChat, Body: body, Object: o.Body, Members: o.Members}}
	want := string(appendPassBody(nil, req, true))
	hr, err := newHTTPRequest(context.Background(), req, true)
	if err != nil {
		t.Fatal(err)
	}
	first, _ := io.ReadAll(hr.Body)
	again, err := hr.GetBody()
	if err != nil {
		t.Fatal(err)
	}
	second, _ := io.ReadAll(again)
	if string(first) != want || string(second) != want || hr.ContentLength != int64(len(want)) || !strings.Contains(want, `"model":"upstream"`) {
		t.Fatalf("body %d and %d bytes, Content-Length %d, want %d", len(first), len(second), hr.ContentLength, len(want))
	}
}
