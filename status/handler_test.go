package status

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestHandler(t *testing.T) {
	rec := NewRecorder()
	rec.Record(Request{Model: "qwen", User: "ann", Status: 200, TTFT: time.Second, Tokens: 9})
	snap := func() *Snapshot {
		return rec.Snapshot([]Model{{Name: "qwen", Source: "static", Replicas: []Replica{{URL: "http://10.0.0.5:8000", State: "usable"}}}})
	}
	for _, tc := range []struct {
		name, method, path string
		h                  *Handler
		status             int
		contentType        string
		contains           string
	}{
		{"page", "GET", "/", &Handler{Snapshot: snap}, 200, "text/html; charset=utf-8", "<title>llmedge status</title>"},
		{"page under a prefix", "GET", "/ops/status", &Handler{Snapshot: snap}, 200, "text/html; charset=utf-8", "EventSource"},
		{"json", "GET", "/status.json", &Handler{Snapshot: snap}, 200, "application/json", `"url":"http://10.0.0.5:8000"`},
		{"json under a prefix", "GET", "/llmedge/status.json", &Handler{Snapshot: snap}, 200, "application/json", `"top_tokens":[{"user":"ann"`},
		{"head", "HEAD", "/status.json", &Handler{Snapshot: snap}, 200, "application/json", ""},
		{"no gateway", "GET", "/status.json", &Handler{Snapshot: func() *Snapshot { return nil }}, 503, "application/json", `{"detail":"no llmedge`},
		{"post", "POST", "/status.json", &Handler{Snapshot: snap}, 405, "application/json", `{"detail":"Method Not Allowed"}`},
		{"no page on the admin endpoint", "GET", "/llmedge/status", &Handler{Snapshot: snap, NoPage: true}, 404, "application/json", `{"detail":"Not Found"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			tc.h.ServeHTTP(w, httptest.NewRequest(tc.method, tc.path, nil))
			if w.Code != tc.status {
				t.Fatalf("status %d, want %d: %s", w.Code, tc.status, w.Body)
			}
			if ct := w.Header().Get("Content-Type"); ct != tc.contentType {
				t.Errorf("Content-Type %q, want %q", ct, tc.contentType)
			}
			if !strings.Contains(w.Body.String(), tc.contains) {
				t.Errorf("body lacks %q:\n%.300s", tc.contains, w.Body)
			}
			if w.Header().Get("Cache-Control") != "no-store" {
				t.Error("status answers must not be cached")
			}
		})
	}
}

// TestPageCSP checks that the policy admits the page's own inline script
// and style, and nothing from elsewhere.
func TestPageCSP(t *testing.T) {
	w := httptest.NewRecorder()
	(&Handler{}).ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
	csp := w.Header().Get("Content-Security-Policy")
	for _, want := range []string{"default-src 'none'", "connect-src 'self'", "script-src 'sha256-", "style-src 'sha256-"} {
		if !strings.Contains(csp, want) {
			t.Errorf("CSP %q lacks %q", csp, want)
		}
	}
	body := w.Body.String()
	for _, banned := range []string{"http://", "https://", "innerHTML", "<script src", "<link"} {
		if strings.Contains(body, banned) {
			t.Errorf("the page contains %q: it must load nothing from elsewhere and write no HTML", banned)
		}
	}
}

func TestEvents(t *testing.T) {
	rec := NewRecorder()
	done := make(chan struct{})
	h := &Handler{Snapshot: func() *Snapshot { return rec.Snapshot([]Model{{Name: "qwen"}}) }, Interval: 10 * time.Millisecond, Done: done}
	srv := httptest.NewServer(h)
	defer srv.Close()

	resp, err := http.Get(srv.URL + "/status/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q", ct)
	}
	rd := bufio.NewReader(resp.Body)
	var events int
	for events < 3 {
		line, err := rd.ReadString('\n')
		if err != nil {
			t.Fatalf("after %d events: %v", events, err)
		}
		if data, ok := strings.CutPrefix(line, "data: "); ok {
			var s Snapshot
			if err := json.Unmarshal([]byte(data), &s); err != nil || len(s.Models) != 1 {
				t.Fatalf("event %q: %v", data, err)
			}
			events++
		}
	}
	// Done ends the stream, as a server shutting down does.
	close(done)
	if _, err := io.Copy(io.Discard, rd); err != nil {
		t.Fatalf("the stream did not end cleanly: %v", err)
	}
}

func TestEventsEndWithClient(t *testing.T) {
	h := &Handler{Snapshot: func() *Snapshot { return NewRecorder().Snapshot(nil) }, Interval: time.Hour}
	ctx, cancel := context.WithCancel(context.Background())
	r := httptest.NewRequest("GET", "/events", nil).WithContext(ctx)
	w := httptest.NewRecorder()
	returned := make(chan struct{})
	go func() { h.ServeHTTP(w, r); close(returned) }()
	cancel()
	<-returned // a stream whose client left returns
	if !strings.HasPrefix(w.Body.String(), "retry: 2000\n\ndata: {") {
		t.Fatalf("stream began %.80q", w.Body.String())
	}
}
