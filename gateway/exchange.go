// Package gateway runs an inference request against a model's replicas:
// it picks a replica, retries before the first byte reaches the client,
// relays the stream, enforces timeouts and writes the public answer with
// its timing figures. It is plain Go; the Caddy modules call into it.
package gateway

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"time"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/auth"
)

// Exchange is the state of one public request, shared by the handlers
// that authenticate, validate and route it.
type Exchange struct {
	Start     time.Time
	RequestID string
	Principal *auth.Principal
	Request   *api.InferenceRequest

	// Stage durations for Server-Timing.
	Auth, Validate, Queue, Upstream time.Duration

	// Outcome, for logs and metrics.
	Replica  string
	Attempts int
	Usage    api.Usage
	TTFT     time.Duration
	// Status is the HTTP status the client got (499: it left first). A
	// stream that failed after its start has 200 and StreamError set.
	Status      int
	StreamError bool

	observed bool // metrics recorded
}

type exchangeKey struct{}

// FromContext returns the request's Exchange, or nil.
func FromContext(ctx context.Context) *Exchange {
	ex, _ := ctx.Value(exchangeKey{}).(*Exchange)
	return ex
}

// Begin returns the request's Exchange, creating it (and setting the
// X-Request-ID response header) when this is the first llmedge handler to
// see the request.
func Begin(w http.ResponseWriter, r *http.Request) (*Exchange, *http.Request) {
	if ex := FromContext(r.Context()); ex != nil {
		return ex, r
	}
	ex := &Exchange{Start: time.Now(), RequestID: requestID(r.Header.Get("X-Request-ID"))}
	w.Header().Set("X-Request-ID", ex.RequestID)
	return ex, r.WithContext(context.WithValue(r.Context(), exchangeKey{}, ex))
}

// requestID keeps a client's ID when it is short printable ASCII (it ends
// up in headers and logs), and otherwise makes a new one.
func requestID(given string) string {
	if n := len(given); n > 0 && n <= 128 {
		ok := true
		for i := 0; i < n; i++ {
			if c := given[i]; c <= ' ' || c > '~' || c == '"' || c == '\\' {
				ok = false
				break
			}
		}
		if ok {
			return given
		}
	}
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
