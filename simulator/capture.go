package simulator

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Request capture, for tests that check byte for byte what a gateway sent
// a replica: GET /sim/requests returns the last requests the API paths
// received, oldest first, with their bodies as received.

// Bounds of the capture.
const (
	// CaptureRequests is how many requests GET /sim/requests keeps.
	CaptureRequests = 32
	// CaptureBodyBytes bounds one kept body; a longer one is cut, and
	// marked truncated.
	CaptureBodyBytes = 4 << 20
	// captureTotalBytes bounds the bodies kept in all: the oldest go
	// first.
	captureTotalBytes = 16 << 20
)

// CapturedRequest is one request as received by an API path.
type CapturedRequest struct {
	// Seq numbers captured requests from 1 since start or /sim/reset.
	Seq  uint64    `json:"seq"`
	Time time.Time `json:"time"`
	// Method, Path and Query (the raw query string, without "?") as
	// received.
	Method string `json:"method"`
	Path   string `json:"path"`
	Query  string `json:"query,omitempty"`
	// Header is the request's header, less the credentials:
	// Authorization, Proxy-Authorization and X-Api-Key.
	Header http.Header `json:"header"`
	// Body is the body byte for byte (base64 in JSON), at most
	// CaptureBodyBytes of it.
	Body []byte `json:"body"`
	// Size is the body's whole length; Truncated tells that Body holds
	// only its first CaptureBodyBytes.
	Size      int  `json:"size"`
	Truncated bool `json:"truncated"`
}

// capturedList is the answer of GET /sim/requests.
type capturedList struct {
	Requests []CapturedRequest `json:"requests"`
}

// capture is a bounded ring of captured requests.
type capture struct {
	mu    sync.Mutex
	seq   uint64
	reqs  []CapturedRequest // oldest first
	bytes int
}

// withheldHeaders are left out of captured headers.
var withheldHeaders = []string{"Authorization", "Proxy-Authorization", "X-Api-Key"}

// capturePath tells whether requests to path are captured: the API paths
// (/v1/...), the engines' own chat paths and vLLM's /tokenize.
func capturePath(path string) bool {
	return strings.HasPrefix(path, "/v1/") || path == "/api/chat" || path == "/tasks/assistant_inference" || path == "/tokenize"
}

// add reads r's body (up to maxBodyBytes and one byte more, which is
// enough for the handlers' own limit to refuse a longer one), records it,
// and puts back a body that reads the same bytes.
func (c *capture) add(r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBodyBytes+1))
	rest := r.Body
	r.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(body), errReader{err}, rest), rest}
	size := len(body)
	kept := body[:min(len(body), CaptureBodyBytes)]
	h := r.Header.Clone()
	for _, k := range withheldHeaders {
		h.Del(k)
	}
	cr := CapturedRequest{Time: time.Now().UTC(), Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery,
		Header: h, Body: bytes.Clone(kept), Size: size, Truncated: len(kept) < size}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	cr.Seq = c.seq
	c.reqs = append(c.reqs, cr)
	c.bytes += len(cr.Body)
	for len(c.reqs) > CaptureRequests || c.bytes > captureTotalBytes && len(c.reqs) > 1 {
		c.bytes -= len(c.reqs[0].Body)
		c.reqs[0] = CapturedRequest{}
		c.reqs = c.reqs[1:]
	}
}

// errReader fails with err once the captured bytes are read (nil: EOF,
// and the rest of the body follows).
type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	return 0, io.EOF
}

// list returns the captured requests, oldest first, those of path only
// when path is not empty.
func (c *capture) list(path string) []CapturedRequest {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]CapturedRequest, 0, len(c.reqs))
	for _, cr := range c.reqs {
		if path == "" || cr.Path == path {
			out = append(out, cr)
		}
	}
	return out
}

// reset forgets the captured requests and restarts their numbering.
func (c *capture) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq, c.reqs, c.bytes = 0, nil, 0
}

// CapturedRequests returns the captured requests, oldest first.
func (s *Server) CapturedRequests() []CapturedRequest { return s.captured.list("") }
