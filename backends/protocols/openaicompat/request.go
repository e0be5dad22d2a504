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
		buf, pieces, err = chatBodyOf(req, stream)
		for _, p := range pieces {
			size += len(p)
		}
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
		// which holds a pooled body until the transport closes it: the
		// carried body's, or the one a translated request's quoted
		// messages point into.
		lease := req.Lease
		if req.Wire != nil {
			lease = req.Wire.Lease
		}
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
	c := chatBody{b: b}
	err := c.request(req, stream)
	return c.b, err
}

// chatBodyOf is the body appendChatRequest writes for req: in one
// buffer, or, when its messages' quoted contents are large, as pieces
// (chatBody) that send those contents from the client's body in place.
func chatBodyOf(req *protocols.Request, stream bool) (buf []byte, pieces net.Buffers, err error) {
	size := messagesSize(req.Messages)
	if size < piecesFrom {
		buf, err = appendChatRequest(make([]byte, 0, 256+size), req, stream)
		return buf, nil, err
	}
	c := chatBody{b: make([]byte, 0, 256+64*len(req.Messages)), pieces: make(net.Buffers, 0, 2*len(req.Messages)+1)}
	if err := c.request(req, stream); err != nil {
		return nil, nil, err
	}
	return nil, c.done(), nil
}

// inPlaceFrom is the length from which a quoted content is a piece of
// its own rather than copied into the body's buffer.
const inPlaceFrom = 512

// chatBody writes a chat request's body: into b, or, when pieces is not
// nil, into b and pieces, a message's quoted content of inPlaceFrom
// bytes or more being a piece of its own, the client's bytes in place.
// A native request's messages are quoted (api.Message.Quoted), so its
// body is the client's message bytes spliced between the few the
// gateway writes, neither decoded nor encoded again nor copied.
type chatBody struct {
	b      []byte
	from   int // b[from:] is not yet in pieces
	pieces net.Buffers
}

// message appends m as {"role":…,"content":…}.
func (c *chatBody) message(m *api.Message) {
	if c.pieces == nil || len(m.Quoted) < inPlaceFrom {
		c.b = api.AppendMessage(c.b, m)
		return
	}
	c.b = append(c.b, `{"role":`...)
	c.b = jsonx.String(c.b, m.Role)
	c.b = append(c.b, `,"content":`...)
	// b's bytes up to here never change: appends write past them, or
	// into a new array, so the piece stays what it is.
	c.pieces = append(c.pieces, c.b[c.from:len(c.b):len(c.b)], m.Quoted)
	c.from = len(c.b)
	c.b = append(c.b, '}')
}

// done returns the pieces, the rest of b last.
func (c *chatBody) done() net.Buffers {
	if c.from < len(c.b) {
		c.pieces = append(c.pieces, c.b[c.from:])
	}
	return c.pieces
}

func (c *chatBody) request(req *protocols.Request, stream bool) error {
	b := c.b
	defer func() { c.b = b }()
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
		c.b = b
		c.message(&req.Messages[i])
		b = c.b
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
			return fmt.Errorf("%s is not a finite number", f.name)
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
	b = append(b, '}')
	return nil
}

func messagesSize(msgs []api.Message) int {
	n := 0
	for _, m := range msgs {
		n += len(m.Role) + m.Size() + 24
	}
	return n
}
