package protocoltest

import (
	"bytes"
	"io"
	"net/http"
	"strings"
)

// Replay is an in-memory replica for benchmarks and tests: it answers
// every request with a canned vLLM answer, a chat.completion for a
// one-JSON call and an SSE stream for a streamed one, so that only the
// gateway's own work is measured.
type Replay struct{ JSON, SSE []byte }

// NewReplay answers with tokens words of " word" and a usage of 12 prompt
// and 16 completion tokens.
func NewReplay(tokens int) *Replay {
	var sse strings.Builder
	sse.WriteString(`data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}` + "\n\n")
	for range tokens {
		sse.WriteString(`data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":" word"},"finish_reason":null}]}` + "\n\n")
	}
	sse.WriteString(`data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n")
	sse.WriteString(`data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":16,"total_tokens":28}}` + "\n\n")
	sse.WriteString("data: [DONE]\n\n")
	js := `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"` +
		strings.Repeat(" word", tokens) + `"},"finish_reason":"stop"}],"usage":{"prompt_tokens":12,"completion_tokens":16,"total_tokens":28}}`
	return &Replay{JSON: []byte(js), SSE: []byte(sse.String())}
}

// RoundTrip implements http.RoundTripper.
func (t *Replay) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		_, _ = io.Copy(io.Discard, r.Body)
		_ = r.Body.Close()
	}
	body, ct := t.JSON, "application/json"
	if r.Header.Get("Accept") == "text/event-stream" {
		body, ct = t.SSE, "text/event-stream"
	}
	return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {ct}},
		Body: io.NopCloser(bytes.NewReader(body)), ContentLength: int64(len(body)), Request: r}, nil
}

// Discard is a flushing ResponseWriter that keeps nothing, as cheap as a
// test can make one.
type Discard struct{ H http.Header }

func (d *Discard) Header() http.Header         { return d.H }
func (d *Discard) Write(b []byte) (int, error) { return len(b), nil }
func (d *Discard) WriteHeader(int)             {}
func (d *Discard) Flush()                      {}
