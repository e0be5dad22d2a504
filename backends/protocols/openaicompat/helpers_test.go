package openaicompat

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/backends/protocols"
	"github.com/llmedge/llmedge/backends/protocols/protocoltest"
)

// testRequest is a small chat request to base.
func testRequest(base string) *protocols.Request {
	return &protocols.Request{
		BaseURL:     base,
		Model:       "Qwen/Qwen2.5-7B-Instruct",
		Messages:    []api.Message{{Role: api.RoleUser, Content: "Say hello"}},
		Temperature: protocoltest.Float(0.3),
	}
}

// sseHandler answers every request with a 200 text/event-stream made of
// parts, flushed one by one, exactly as given.
func sseHandler(parts ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Cache-Control", "no-cache")
		w.WriteHeader(http.StatusOK)
		for _, p := range parts {
			_, _ = io.WriteString(w, p)
			w.(http.Flusher).Flush()
		}
	}
}

// bodyHandler answers every request with status, content type and body.
func bodyHandler(status int, contentType, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if contentType != "" {
			w.Header().Set("Content-Type", contentType)
		}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}
}

// recorder collects deltas.
type recorder struct{ deltas []string }

func (r *recorder) onDelta(d *protocols.Delta) error {
	s := d.Text
	r.deltas = append(r.deltas, s)
	return nil
}

// asBackendError returns err as a *protocols.Error or fails the test.
func asBackendError(t *testing.T, err error) *protocols.Error {
	t.Helper()
	var be *protocols.Error
	if !errors.As(err, &be) {
		t.Fatalf("error %v (%T) is not a *protocols.Error", err, err)
	}
	return be
}

// checkError checks a classified failure.
func checkError(t *testing.T, err error, kind protocols.Kind, status int, started bool, msg string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want %v", kind)
	}
	be := asBackendError(t, err)
	if be.Kind != kind {
		t.Errorf("Kind = %v, want %v (error: %v)", be.Kind, kind, err)
	}
	if be.Status != status {
		t.Errorf("Status = %d, want %d", be.Status, status)
	}
	if be.Started != started {
		t.Errorf("Started = %v, want %v", be.Started, started)
	}
	if !strings.Contains(be.Message, msg) {
		t.Errorf("Message = %q, want it to contain %q", be.Message, msg)
	}
	if strings.Contains(be.Error(), "Say hello") {
		t.Errorf("error %q contains prompt text", be.Error())
	}
}

// checkTimes checks Sent <= FirstByte <= Done, all set.
func checkTimes(t *testing.T, res *protocols.Result) {
	t.Helper()
	if res.Sent.IsZero() || res.FirstByte.IsZero() || res.Done.IsZero() {
		t.Fatalf("unset times: Sent=%v FirstByte=%v Done=%v", res.Sent, res.FirstByte, res.Done)
	}
	if res.FirstByte.Before(res.Sent) || res.Done.Before(res.FirstByte) {
		t.Errorf("times out of order: Sent=%v FirstByte=%v Done=%v", res.Sent, res.FirstByte, res.Done)
	}
}

// waitFor fails the test unless ch is closed or receives within d.
func waitFor(t *testing.T, ch <-chan struct{}, d time.Duration, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(d):
		t.Fatalf("timed out after %v waiting for %s", d, what)
	}
}
