package gateway

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/llmedge/llmedge/api"
)

// Public paths the site serves itself; the doors' paths are theirs.
const (
	PathToken   = "/auth/token"
	PathRevoke  = "/auth/revoke"
	PathJWKS    = "/.well-known/jwks.json"
	PathHealth  = "/healthz"
	PathReady   = "/readyz"
	PathOpenAPI = "/openapi.json"
)

// Site serves the whole public API on its paths: the token endpoints, the
// keys, health and the description, and the doors mounted on it.
type Site struct {
	Token http.Handler
	// Revoke serves RFC 7009 token revocation; nil answers 404.
	Revoke http.Handler
	// JWKS returns the current key set (keys rotate).
	JWKS func() []byte
	// OpenAPI is the description served at /openapi.json.
	OpenAPI []byte
	// Ready answers /readyz, ModelReady /readyz/<model>.
	Ready      http.HandlerFunc
	ModelReady http.HandlerFunc
	// Mounts are the doors, each on paths of its own, asked in order
	// (llmedge's own first: one string comparison for its path).
	Mounts []Mount
	// Passthrough hands unknown paths to next instead of answering 404.
	Passthrough bool
	// MaxHeaderBytes bounds a request's header fields (431 beyond, in
	// the API's JSON shape); 0 means api.DefaultMaxHeaderBytes.
	MaxHeaderBytes int
}

// ServeHTTP dispatches by exact path; next gets unknown paths when
// Passthrough is set.
func (s *Site) ServeHTTP(w http.ResponseWriter, r *http.Request, next http.Handler) {
	if e := api.HeadersTooLarge(r, headerLimit(s.MaxHeaderBytes)); e != nil && isSitePath(r.URL.Path) {
		e.Write(w)
		return
	}
	switch r.URL.Path {
	case PathToken:
		if Allow(w, r, http.MethodPost) {
			s.Token.ServeHTTP(w, r)
		}
	case PathRevoke:
		if s.Revoke == nil {
			api.NewError(http.StatusNotFound, "Not Found").Write(w)
		} else if Allow(w, r, http.MethodPost) {
			s.Revoke.ServeHTTP(w, r)
		}
	case PathJWKS:
		if Allow(w, r, http.MethodGet, http.MethodHead) {
			ServeJWKS(w, s.JWKS())
		}
	case PathHealth:
		if Allow(w, r, http.MethodGet, http.MethodHead) {
			ServeHealth(w, r)
		}
	case PathOpenAPI:
		if Allow(w, r, http.MethodGet, http.MethodHead) {
			w.Header().Set("Cache-Control", "public, max-age=300")
			w.Header().Set("Content-Type", "application/json")
			writeLine(w, s.OpenAPI)
		}
	case PathReady:
		if Allow(w, r, http.MethodGet, http.MethodHead) {
			s.Ready(w, r)
		}
	default:
		if s.ModelReady != nil && strings.HasPrefix(r.URL.Path, PathReady+"/") {
			if Allow(w, r, http.MethodGet, http.MethodHead) {
				s.ModelReady(w, r)
			}
			return
		}
		for _, m := range s.Mounts {
			if h := m.Handler(r.URL.Path); h != nil {
				h.ServeHTTP(w, r)
				return
			}
		}
		if s.Passthrough && next != nil {
			next.ServeHTTP(w, r)
			return
		}
		api.CloseUnread(w, r) // answered from the path alone
		for _, m := range s.Mounts {
			if strings.HasPrefix(r.URL.Path, m.Prefix()) {
				m.NotFound(w, r) // in the shape that door's clients parse
				return
			}
		}
		api.NewError(http.StatusNotFound, "Not Found").Write(w)
	}
}

func isSitePath(p string) bool {
	switch p {
	case PathToken, PathRevoke, PathJWKS, PathHealth, PathOpenAPI, PathReady:
		return true
	}
	return strings.HasPrefix(p, PathReady+"/")
}

func headerLimit(n int) int {
	if n <= 0 {
		return api.DefaultMaxHeaderBytes
	}
	return n
}

// Mount is a door's paths: the handlers it serves under a prefix
// (OpenAI's under /v1/, llmedge's own under /tasks/).
type Mount interface {
	// Handler returns the handler of path, or nil when the door has none.
	Handler(path string) http.Handler
	// Prefix is the start of every path of the door.
	Prefix() string
	// NotFound answers a path under Prefix that the door does not have,
	// in its own error shape.
	NotFound(w http.ResponseWriter, r *http.Request)
}

// ServeJWKS answers with the public keys, ended by a newline as every
// JSON answer (jwks is shared: it is written as it is, then the newline).
func ServeJWKS(w http.ResponseWriter, jwks []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/jwk-set+json")
	h.Set("Cache-Control", "public, max-age=300")
	writeLine(w, jwks)
}

// writeLine writes b, a shared JSON document, and a newline when b ends
// without one, with its Content-Length.
func writeLine(w http.ResponseWriter, b []byte) {
	n := len(b)
	nl := n == 0 || b[n-1] != '\n'
	if nl {
		n++
	}
	w.Header().Set("Content-Length", strconv.Itoa(n))
	_, _ = w.Write(b)
	if nl {
		_, _ = w.Write(newline)
	}
}

var newline = []byte{'\n'}

// Allow answers 405 unless r's method is one of methods.
func Allow(w http.ResponseWriter, r *http.Request, methods ...string) bool {
	for _, m := range methods {
		if r.Method == m {
			return true
		}
	}
	allowed := methods[0]
	for _, m := range methods[1:] {
		allowed += ", " + m
	}
	api.CloseUnread(w, r) // answered from the method alone
	api.NewError(http.StatusMethodNotAllowed, "Method Not Allowed").WithHeader("Allow", allowed).Write(w)
	return false
}
