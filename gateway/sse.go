package gateway

import (
	"errors"
	"net/http"
	"sync"
	"time"
)

var errClientGone = errors.New("client connection closed")

// sseWriter writes the public event stream. A ping timer may write from
// its own goroutine, so every write holds mu; after close nothing writes.
type sseWriter struct {
	mu      sync.Mutex
	w       http.ResponseWriter
	rc      *http.ResponseController
	started bool // the 200 and headers are out: errors now go in-band
	closed  bool
	failed  bool // a write failed: the client is gone
	ping    *time.Timer
	timing  string // Server-Timing value sent with the headers
}

func newSSEWriter(w http.ResponseWriter, timing string) *sseWriter {
	return &sseWriter{w: w, rc: http.NewResponseController(w), timing: timing}
}

// setTiming updates the Server-Timing value, if the headers are not out yet.
func (s *sseWriter) setTiming(v string) {
	s.mu.Lock()
	s.timing = v
	s.mu.Unlock()
}

var pingLine = []byte(": ping\n\n")

// keepAlive writes a comment every interval until the first event, so
// proxies and clients do not time out while the replica prepares.
func (s *sseWriter) keepAlive(interval time.Duration) {
	if interval <= 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var tick func()
	tick = func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.closed || s.failed || s.ping == nil {
			return
		}
		s.writeLocked(pingLine)
		s.ping.Reset(interval)
	}
	s.ping = time.AfterFunc(interval, tick)
}

// setHeader sets a response header while the headers are not out yet; the
// ping timer writes them from its own goroutine, so the handler must not
// touch w.Header() directly once pings may run.
func (s *sseWriter) setHeader(key, value string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.started {
		s.w.Header()[key] = []string{value}
	}
}

// restoreHeader sets key back to value, or removes it when value is
// empty, unless the stream has started.
func (s *sseWriter) restoreHeader(key, value string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.started {
		restoreHeader(s.w.Header(), key, value)
	}
}

func restoreHeader(h http.Header, key, value string) {
	if value == "" {
		delete(h, key)
	} else {
		h[key] = []string{value}
	}
}

// setTrailer sets a trailer, sent after the stream's last event: what the
// headers, already out, could not tell.
func (s *sseWriter) setTrailer(key, value string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.w.Header()[http.TrailerPrefix+key] = []string{value}
}

// closeUnlessStarted closes the writer if the status is not sent yet, so
// the caller may answer with an error status of its own; it reports
// whether the stream had started (and stays open for in-band errors).
// One critical section: a ping cannot slip out between the check and the
// close.
func (s *sseWriter) closeUnlessStarted() (started bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		return true
	}
	s.closed = true
	if s.ping != nil {
		s.ping.Stop()
		s.ping = nil
	}
	return false
}

// isStarted reports whether the response status is already sent.
func (s *sseWriter) isStarted() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.started
}

// write sends one chunk of the stream and flushes it.
func (s *sseWriter) write(b []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ping != nil { // data is flowing: no more pings needed
		s.ping.Stop()
		s.ping = nil
	}
	return s.writeLocked(b)
}

func (s *sseWriter) writeLocked(b []byte) error {
	if s.closed || s.failed {
		return errClientGone
	}
	if !s.started {
		s.started = true
		h := s.w.Header()
		h.Set("Server-Timing", s.timing)
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-cache")
		h.Set("X-Accel-Buffering", "no")
		s.w.WriteHeader(http.StatusOK)
	}
	if _, err := s.w.Write(b); err != nil {
		s.failed = true
		return errClientGone
	}
	if err := s.rc.Flush(); err != nil {
		s.failed = true
		return errClientGone
	}
	return nil
}

// close stops the pings; no write happens after it returns.
func (s *sseWriter) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	if s.ping != nil {
		s.ping.Stop()
		s.ping = nil
	}
}
