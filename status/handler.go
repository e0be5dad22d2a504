package status

import (
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"time"
)

// The page is one file, its style and script inline, so that it works
// under any path prefix without a build step; it is compiled into the
// binary. The Content-Security-Policy admits exactly that script and
// style (by hash) and connections to its own origin, nothing else.
//
//go:embed web/index.html
var page []byte

var pageCSP = "default-src 'none'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'; " +
	"script-src " + inlineHash(page, "<script>", "</script>") + "; style-src " + inlineHash(page, "<style>", "</style>")

// inlineHash is the CSP source of the inline element between open and close.
func inlineHash(doc []byte, open, close string) string {
	_, rest, ok := bytes.Cut(doc, []byte(open))
	body, _, ok2 := bytes.Cut(rest, []byte(close))
	if !ok || !ok2 {
		panic("status page: no " + open + " element")
	}
	sum := sha256.Sum256(body)
	return "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
}

// Paths under the page's own path: the snapshot as JSON, and its stream.
const (
	JSONPath   = "status.json"
	EventsPath = "events"
)

// DefaultInterval spaces the events of a stream.
const DefaultInterval = time.Second

// Handler serves the status page (any path but the two below), its
// snapshot as JSON (a path ending in /status.json) and a stream of
// snapshots as server-sent events (a path ending in /events). It only
// reads, and only GET and HEAD.
type Handler struct {
	// Snapshot returns the current state; it returns nil when there is
	// none (no gateway configured), which answers 503.
	Snapshot func() *Snapshot
	// Interval spaces the events of a stream; 0 means DefaultInterval.
	Interval time.Duration
	// Done, when closed, ends every stream: the server that carries them
	// is shutting down and would otherwise wait for them forever.
	Done <-chan struct{}
	// NoPage serves the data only: every other path is 404 (the admin
	// endpoint, where a browser cannot open a page; see the README).
	NoPage bool
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hdr := w.Header()
	hdr.Set("Cache-Control", "no-store")
	hdr.Set("X-Content-Type-Options", "nosniff")
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		hdr.Set("Allow", "GET, HEAD")
		Error(w, http.StatusMethodNotAllowed, "Method Not Allowed")
		return
	}
	switch p := r.URL.Path; {
	case strings.HasSuffix(p, "/"+JSONPath) || p == JSONPath:
		h.serveJSON(w)
	case strings.HasSuffix(p, "/"+EventsPath) || p == EventsPath:
		h.serveEvents(w, r)
	case h.NoPage:
		Error(w, http.StatusNotFound, "Not Found")
	default:
		hdr.Set("Content-Type", "text/html; charset=utf-8")
		hdr.Set("Content-Security-Policy", pageCSP)
		hdr.Set("Referrer-Policy", "same-origin")
		_, _ = w.Write(page)
	}
}

// Error answers {"detail": detail}, the API's error shape.
func Error(w http.ResponseWriter, status int, detail string) {
	b, _ := json.Marshal(map[string]string{"detail": detail})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

func (h *Handler) snapshot() []byte {
	var s *Snapshot
	if h.Snapshot != nil {
		s = h.Snapshot()
	}
	if s == nil {
		return nil
	}
	b, err := json.Marshal(s)
	if err != nil {
		return nil // only non-finite floats could fail, and none is kept
	}
	return b
}

func (h *Handler) serveJSON(w http.ResponseWriter) {
	b := h.snapshot()
	if b == nil {
		Error(w, http.StatusServiceUnavailable, "no llmedge gateway is configured")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(append(b, '\n'))
}

// serveEvents streams a snapshot at once and then every interval, until
// the client leaves or Done closes.
func (h *Handler) serveEvents(w http.ResponseWriter, r *http.Request) {
	rc := http.NewResponseController(w)
	hdr := w.Header()
	hdr.Set("Content-Type", "text/event-stream")
	// A proxy in front (nginx) must not hold the events back.
	hdr.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	interval := h.Interval
	if interval <= 0 {
		interval = DefaultInterval
	}
	// The browser reconnects this long after the stream ends.
	if _, err := w.Write([]byte("retry: 2000\n\n")); err != nil {
		return
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	var buf []byte
	for {
		if b := h.snapshot(); b != nil {
			buf = append(append(append(buf[:0], "data: "...), b...), "\n\n"...)
		} else {
			buf = append(buf[:0], ": no llmedge gateway is configured\n\n"...)
		}
		if _, err := w.Write(buf); err != nil {
			return
		}
		if err := rc.Flush(); err != nil {
			return
		}
		select {
		case <-tick.C:
		case <-r.Context().Done():
			return
		case <-h.Done:
			return
		}
	}
}
