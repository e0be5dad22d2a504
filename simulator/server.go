package simulator

import (
	"cmp"
	"crypto/subtle"
	"io"
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
	// engine is the simulated GPU the chat requests share; it has its own
	// locks, taken after mu when both are.
	engine *engine

	mu sync.Mutex
	// set is the Config as given (clamped, zero fields unresolved), onto
	// which POST /sim/config merges; cfg is set with defaults applied,
	// the one in force. Keeping them apart lets a field left zero follow
	// the dialect's default when the dialect changes at run time.
	set   Config
	cfg   Config
	stats Stats
	// endpoints are the per-path counters of Stats.Endpoints; in flight
	// counts what Begin counted and End has not.
	endpoints map[string]*EndpointStats
	// captured keeps the last request bodies for GET /sim/requests.
	captured capture
	// seq numbers chat requests since start or reset (for injectError).
	seq uint64
	// readyAt ends the Loading period.
	readyAt time.Time
	// lora holds the loaded LoRA adapters (lora.go); its own lock.
	lora *loraState
}

// New returns a Server behaving as cfg says. Defaults fill zero fields and
// out-of-range values are clamped; call cfg.Validate first to report them.
func New(cfg Config) *Server {
	now := time.Now()
	set := cfg.clamped()
	cfg = set.withDefaults()
	return &Server{started: now, engine: newEngine(cfg), set: set, cfg: cfg, readyAt: now.Add(cfg.Loading.D()), lora: newLoRAState(cfg)}
}

// Config returns the configuration in force: with the defaults, the
// dialect's included, filled in.
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
	s.set, s.cfg = cfg, cfg.withDefaults()
	s.engine.configure(s.cfg)
	s.readyAt = time.Now().Add(cfg.Loading.D())
	s.lora.preload(s.cfg)
	return nil
}

// loading reports whether the Loading period is still running, and the
// dialect and Config of the moment.
func (s *Server) loading() (bool, *dialect, Config) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return time.Now().Before(s.readyAt), dialectOf(s.cfg), s.cfg
}

// Stats returns a snapshot of the counters and of the engine's state.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	st, cfg := s.statsLocked(), s.cfg
	s.mu.Unlock()
	cs := s.engine.cacheStats(cfg)
	st.Running, st.Waiting = s.engine.running.Load(), s.engine.waiting.Load()
	st.Preemptions = s.engine.seqs.preemptions.Load()
	st.PrefixCacheQueries, st.PrefixCacheHits, st.PrefixCacheBlocks = cs.queries, cs.hits, cs.blocks
	st.KVCacheUsage = s.engine.kvUsage(cfg.KVCacheBlocks)
	if loraEnabled(cfg) {
		s.lora.stats(&st)
	}
	return st
}

// statsLocked is s.stats with a copy of the per-endpoint counters; call
// with s.mu held.
func (s *Server) statsLocked() Stats {
	st := s.stats
	if len(s.endpoints) > 0 {
		st.Endpoints = make(map[string]EndpointStats, len(s.endpoints))
		for p, e := range s.endpoints {
			st.Endpoints[p] = *e
		}
	}
	return st
}

// Reset zeroes the counters (but not InFlight, Running and Waiting, which
// are requests still there), forgets the last request, restarts the
// sequence of injected errors and empties the prefix cache, so that a
// benchmark can start each run cold.
func (s *Server) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stats = Stats{InFlight: s.stats.InFlight}
	for p, e := range s.endpoints {
		if e.InFlight == 0 {
			delete(s.endpoints, p)
		} else {
			*e = EndpointStats{InFlight: e.InFlight}
		}
	}
	s.seq = 0
	s.engine.resetCaches()
	s.captured.reset()
	s.lora.reset()
}

// ServeHTTP routes a request by dialect. Paths under /v1 require the API
// key when one is configured; health paths and /sim/* never do. While
// loading, everything but /sim/* answers 503 with the engine's body.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := r.URL.Path
	if strings.HasPrefix(path, "/sim/") {
		s.handleControl(w, r)
		return
	}
	if capturePath(path) {
		s.captured.add(r)
	}
	loading, d, _ := s.loading()
	if r.Method == http.MethodGet && d.isHealthPath(path) {
		s.mu.Lock()
		s.stats.HealthChecks++
		s.mu.Unlock()
	}
	if loading {
		if r.Method == http.MethodPost { // a chat request: counted as rejected
			s.begin(path)
			defer s.end(path, outcomeRejected)
		}
		writeJSON(w, http.StatusServiceUnavailable, d.loadingBody)
		return
	}
	switch d.name {
	case DialectOllama:
		s.serveOllama(w, r, d)
	case DialectNative:
		s.serveNative(w, r, d)
	default:
		s.serveOpenAI(w, r, d)
	}
}

// serveOpenAI serves the OpenAI-compatible engines: vLLM, SGLang, TGI and
// llama.cpp, each with its Prometheus /metrics (metrics.go).
func (s *Server) serveOpenAI(w http.ResponseWriter, r *http.Request, d *dialect) {
	path := r.URL.Path
	switch {
	case path == "/health" || (path == "/health_generate" && d.name == DialectSGLang):
		if r.Method != http.MethodGet {
			writeMethodNotAllowed(w, http.MethodGet)
			return
		}
		status := cmp.Or(s.Config().HealthStatus, http.StatusOK)
		if d.name == DialectLlamaCpp && status == http.StatusOK {
			writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
			return
		}
		w.WriteHeader(status)
	case r.Method == http.MethodPost && s.servesPost(path):
		switch path {
		case "/v1/chat/completions":
			s.handleChat(w, r, d, decodeChat) // checks the API key itself, to count rejections
		case "/v1/completions":
			s.handleGenerate(w, r, d, endpoint{decode: decodeCompletions, reply: completionsReply})
		case "/v1/embeddings":
			s.handleEmbeddings(w, r, d)
		case "/v1/messages":
			s.handleGenerate(w, r, d, endpoint{decode: decodeMessages, reply: messagesReply,
				writeError: writeAnthropicError, record: true, apiKeyHeader: "X-Api-Key"})
		case "/v1/messages/count_tokens":
			s.handleCountTokens(w, r, d)
		case "/v1/responses":
			s.handleGenerate(w, r, d, endpoint{decode: decodeResponses, reply: responsesReply, record: true})
		}
	case r.Method == http.MethodPost && path == "/tokenize" && d.name == DialectVLLM:
		s.handleTokenize(w, r, d) // tokenize.go
	case r.Method == http.MethodPost && (path == pathLoadLoRA || path == pathUnloadLoRA) && loraEnabled(s.Config()):
		cfg := s.Config()
		if !authorized(cfg.APIKey, r) {
			writeUnauthorized(w)
			return
		}
		if path == pathLoadLoRA {
			s.handleLoadLoRA(r.Context(), w, r, cfg)
		} else {
			s.handleUnloadLoRA(w, r)
		}
	case path == "/metrics":
		// Outside /v1, so no API key, as in vLLM.
		s.handleMetrics(w, r, d)
	case strings.HasPrefix(path, "/v1"):
		if !authorized(s.Config().APIKey, r) {
			writeUnauthorized(w)
			return
		}
		switch {
		case s.servesPost(path):
			writeMethodNotAllowed(w, http.MethodPost)
		case path == "/v1/models":
			if r.Method != http.MethodGet {
				writeMethodNotAllowed(w, http.MethodGet)
				return
			}
			s.handleModels(w)
		default:
			writeNotFound(w)
		}
	default:
		writeNotFound(w)
	}
}

// servesPost reports whether path is one of the POST endpoints the OpenAI
// dialects serve under the Config in force.
func (s *Server) servesPost(path string) bool {
	switch path {
	case "/v1/chat/completions", "/v1/completions", "/v1/embeddings":
		return true
	case "/v1/messages", "/v1/messages/count_tokens":
		return !s.Config().NoMessages
	case "/v1/responses":
		return !s.Config().NoResponses
	}
	return false
}

// serveOllama serves GET / ("Ollama is running") and POST /api/chat.
func (s *Server) serveOllama(w http.ResponseWriter, r *http.Request, d *dialect) {
	switch {
	case r.URL.Path == "/" && (r.Method == http.MethodGet || r.Method == http.MethodHead):
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusOK)
		io.WriteString(w, "Ollama is running")
	case r.URL.Path == "/api/chat" && r.Method == http.MethodPost:
		s.handleChat(w, r, d, decodeOllama)
	default:
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusNotFound)
		io.WriteString(w, "404 page not found")
	}
}

// serveNative serves GET /healthz and POST /tasks/assistant_inference.
func (s *Server) serveNative(w http.ResponseWriter, r *http.Request, d *dialect) {
	switch {
	case r.URL.Path == "/healthz" && r.Method == http.MethodGet:
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	case r.URL.Path == "/tasks/assistant_inference" && r.Method == http.MethodPost:
		s.handleChat(w, r, d, decodeNative)
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
	cards := []modelCard{{
		ID:          cfg.Model,
		Object:      "model",
		Created:     s.started.Unix(),
		OwnedBy:     "vllm",
		Root:        cfg.Model,
		MaxModelLen: cfg.MaxModelLen,
	}}
	if loraEnabled(cfg) {
		cards = append(cards, s.lora.cards(cfg.Model)...)
	}
	writeJSON(w, http.StatusOK, modelList{Object: "list", Data: cards})
}

// keyInHeader tells whether r carries the API key in header (Anthropic's
// "x-api-key: <key>"); an empty header name never matches.
func keyInHeader(key string, r *http.Request, header string) bool {
	if header == "" || key == "" {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(r.Header.Get(header)), []byte(key)) == 1
}
