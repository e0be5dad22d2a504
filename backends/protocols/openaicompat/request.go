package openaicompat

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"slices"
	"strings"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/backends/protocols"
	"github.com/llmedge/llmedge/internal/jsonx"
)

// chatPath is the OpenAI-compatible chat completions endpoint.
const chatPath = "/v1/chat/completions"

// newHTTPRequest builds the replica request for req, bound to ctx.
func newHTTPRequest(ctx context.Context, req *protocols.Request, stream bool) (*http.Request, error) {
	var buf []byte
	var pieces net.Buffers
	size := 0
	path := chatPath
	switch {
	case passes(req) && len(req.Wire.Body) >= piecesFrom:
		pieces, size = passBody(req, stream)
		path = paths[req.Wire.Format]
	case passes(req):
		buf = appendPassBody(make([]byte, 0, len(req.Wire.Body)+64), req, stream)
		path = paths[req.Wire.Format]
	default:
		var err error
		buf, err = appendChatRequest(make([]byte, 0, 256+messagesSize(req.Messages)), req, stream)
		if err != nil {
			// Only non-finite sampling values can get here; the message
			// names the value kind, never prompt text.
			return nil, &protocols.Error{Kind: protocols.KindBadRequest, Message: "cannot encode the chat request", Err: err}
		}
	}

	url := strings.TrimRight(req.BaseURL, "/") + path
	var body io.Reader = bytes.NewReader(buf)
	if pieces != nil {
		body = nil
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, url, body)
	if err != nil {
		return nil, &protocols.Error{Kind: protocols.KindConnect, Message: "invalid replica URL", Err: err}
	}
	if pieces != nil {
		// The client's bytes in place: net.Buffers is consumed as it is
		// read, so each reading (a retry on a new connection) gets its own,
		// which holds a pooled body until the transport closes it.
		lease := req.Wire.Lease
		hr.ContentLength = int64(size)
		hr.GetBody = func() (io.ReadCloser, error) {
			return lease.Reader(slices.Clone(pieces)), nil
		}
		hr.Body, _ = hr.GetBody()
	}
	h := hr.Header
	h["Content-Type"] = jsonType
	if stream {
		h["Accept"] = sseType
		// A compressing hop would hold tokens back; ask for none.
		h["Accept-Encoding"] = identity
	} else {
		h["Accept"] = jsonType
	}
	if req.APIKey != "" {
		h.Set("Authorization", "Bearer "+req.APIKey)
	}
	protocols.Propagate(ctx, h)
	return hr, nil
}

// Header values of every replica request, shared (net/http only reads them).
var (
	jsonType = []string{"application/json"}
	sseType  = []string{"text/event-stream"}
	identity = []string{"identity"}
)

// appendChatRequest appends the JSON body of POST /v1/chat/completions
// for req (chatRequest in the tests describes its shape), as encoding/json
// would write it (TestAppendChatRequest holds it to that), without
// reflection: it is written once per replica call.
func appendChatRequest(b []byte, req *protocols.Request, stream bool) ([]byte, error) {
	b = append(b, '{')
	if req.Model != "" {
		b = append(b, `"model":`...)
		b = jsonx.String(b, req.Model)
		b = append(b, ',')
	}
	b = append(b, `"messages":[`...)
	for i := range req.Messages {
		if i > 0 {
			b = append(b, ',')
		}
		b = api.AppendMessage(b, &req.Messages[i])
	}
	if req.Continue != "" {
		b = appendContinue(b, req.Continue, len(req.Messages) > 0)
	}
	b = append(b, ']')
	for _, f := range []struct {
		name string
		v    *float64
	}{{"temperature", req.Temperature}, {"top_p", req.TopP}} {
		if f.v == nil {
			continue
		}
		if math.IsNaN(*f.v) || math.IsInf(*f.v, 0) {
			return nil, fmt.Errorf("%s is not a finite number", f.name)
		}
		b = append(b, `,"`...)
		b = append(b, f.name...)
		b = append(b, `":`...)
		b = jsonx.Float(b, *f.v)
	}
	b = append(b, `,"stream":`...)
	b = jsonx.Bool(b, stream)
	if req.MaxTokens > 0 {
		b = append(b, `,"max_tokens":`...)
		b = jsonx.Int(b, int64(req.MaxTokens))
	}
	if len(req.Stop) > 0 {
		b = append(b, `,"stop":[`...)
		for i, s := range req.Stop {
			if i > 0 {
				b = append(b, ',')
			}
			b = jsonx.String(b, s)
		}
		b = append(b, ']')
	}
	if req.Seed != nil {
		b = append(b, `,"seed":`...)
		b = jsonx.Int(b, *req.Seed)
	}
	if stream {
		// Only with stream: vLLM answers 400 to it on a non-streamed request.
		b = append(b, `,"stream_options":{"include_usage":true}`...)
	}
	if req.Continue != "" {
		b = append(b, ',')
		b = append(b, continueFlags...)
	}
	if req.Priority != nil {
		b = append(b, `,"priority":`...)
		b = jsonx.Int(b, int64(*req.Priority))
	}
	return append(b, '}'), nil
}

func messagesSize(msgs []api.Message) int {
	n := 0
	for _, m := range msgs {
		n += len(m.Role) + m.Size() + 24
	}
	return n
}
