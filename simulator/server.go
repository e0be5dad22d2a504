package simulator

import (
	"cmp"
	"crypto/subtle"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Server is a simulated replica; it implements http.Handler. Its Config
// can change at run time; each request works with the Config current when
// it arrived.
type Server struct {
	started time.Time

	mu    sync.Mutex
	cfg   Config
	stats Stats
	// seq numbers chat requests since start or reset (for injectError).
	seq uint64
}

// New returns a Server behaving as cfg says. Defaults fill zero fields and
// out-of-range values are clamped; call cfg.Validate first to report them.
func New(cfg Config) *Server {
	return &Server{started: time.Now(), cfg: cfg.clamped().withDefaults()}
}

// Config returns the current configuration.
func (s *Server) Config() Config {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cfg
}

// SetConfig replaces the configuration (defaults fill zero fields); it
// affects requests that arrive afterwards.
func (s *Server) SetConfig(cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cfg = cfg.withDefaults()
	return nil
}

// Stats returns a snapshot of the counters.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats
}

// Reset zeroes the counters (but not InFlight), forgets the last request
// and restarts the sequence of injected errors.
func (s *Server) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stats = Stats{InFlight: s.stats.InFlight}
	s.seq = 0
}

// ServeHTTP routes a request. Paths under /v1 require the API key when one
// is configured; /health and /sim/* never do.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := r.URL.Path
	switch {
	case path == "/health":
		if r.Method != http.MethodGet {
			writeMethodNotAllowed(w, http.MethodGet)
			return
		}
		w.WriteHeader(cmp.Or(s.Config().HealthStatus, http.StatusOK))
	case path == "/v1/chat/completions" && r.Method == http.MethodPost:
		s.handleChat(w, r) // checks the API key itself, to count rejections
	case strings.HasPrefix(path, "/v1"):
		if !authorized(s.Config().APIKey, r) {
			writeUnauthorized(w)
			return
		}
		switch path {
		case "/v1/chat/completions":
			writeMethodNotAllowed(w, http.MethodPost)
		case "/v1/models":
			if r.Method != http.MethodGet {
				writeMethodNotAllowed(w, http.MethodGet)
				return
			}
			s.handleModels(w)
		default:
			writeNotFound(w)
		}
	case strings.HasPrefix(path, "/sim/"):
		s.handleControl(w, r)
	default:
		writeNotFound(w)
	}
}

// authorized tells whether r carries "Authorization: Bearer <key>", or no
// key is required.
func authorized(key string, r *http.Request) bool {
	if key == "" || r.Method == http.MethodOptions {
		return true
	}
	got := r.Header.Get("Authorization")
	return subtle.ConstantTimeCompare([]byte(got), []byte("Bearer "+key)) == 1
}

// modelList is the answer of GET /v1/models.
type modelList struct {
	Object string      `json:"object"`
	Data   []modelCard `json:"data"`
}

type modelCard struct {
	ID          string  `json:"id"`
	Object      string  `json:"object"`
	Created     int64   `json:"created"`
	OwnedBy     string  `json:"owned_by"`
	Root        string  `json:"root"`
	Parent      *string `json:"parent"`
	MaxModelLen int     `json:"max_model_len,omitempty"`
}

func (s *Server) handleModels(w http.ResponseWriter) {
	cfg := s.Config()
	writeJSON(w, http.StatusOK, modelList{Object: "list", Data: []modelCard{{
		ID:          cfg.Model,
		Object:      "model",
		Created:     s.started.Unix(),
		OwnedBy:     "vllm",
		Root:        cfg.Model,
		MaxModelLen: cfg.MaxModelLen,
	}}})
}
