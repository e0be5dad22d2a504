package bench

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"
)

// Path names, in the order each scenario runs them.
const (
	PathReplica = "replica"
	PathCaddy   = "caddy"
	PathLLMEdge = "llmedge"
)

// Target is one path under test: where to send, what, and the process
// whose CPU and memory the run accounts to it.
type Target struct {
	Name       string
	URL        string // the chat endpoint
	Body       []byte // a non-streamed request
	StreamBody []byte // the same request, streamed
	// LargeURL and LargeBody are the large-prompt scenario's: an OpenAI
	// chat request on every path (llmedge's OpenAI door).
	LargeURL  string
	LargeBody []byte
	Header    http.Header
	// TenantAuth, when set, is each simulated tenant's Authorization
	// (the routing scenario's): every tenant its own principal, so its
	// own cache partition, as real tenants are.
	TenantAuth []string
	RootCA     string // PEM file of the root to trust; empty for plain HTTP
	DialAddr   string // host:port every connection goes to
	PID        int    // the process measured for this path
}

// request builds a POST of body to t.
func (t *Target) request(ctx context.Context, body []byte) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.URL, bytesReader(body))
	if err != nil {
		return nil, err
	}
	for k, v := range t.Header {
		req.Header[k] = v
	}
	req.ContentLength = int64(len(body))
	return req, nil
}

// client returns a new HTTP/1.1 keep-alive client for t that keeps up to
// maxIdle idle connections. HTTP/2 is off for both proxies, so that they
// are compared on the same protocol; the replica is reached over plain
// HTTP/1.1 as a gateway reaches it.
func (t *Target) client(maxIdle int) (*http.Client, error) {
	d := &net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}
	tr := &http.Transport{
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return d.DialContext(ctx, network, t.DialAddr)
		},
		MaxIdleConns:        maxIdle,
		MaxIdleConnsPerHost: maxIdle,
		IdleConnTimeout:     30 * time.Second,
		ForceAttemptHTTP2:   false,
		TLSNextProto:        map[string]func(string, *tls.Conn) http.RoundTripper{},
		DisableCompression:  true,
		TLSHandshakeTimeout: 10 * time.Second,
	}
	if t.RootCA != "" {
		pem, err := os.ReadFile(t.RootCA)
		if err != nil {
			return nil, err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s: no certificate", t.RootCA)
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, NextProtos: []string{"http/1.1"}}
	}
	return &http.Client{Transport: tr}, nil
}
