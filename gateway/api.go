package gateway

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/llmedge/llmedge/api"
)

// Public paths.
const (
	PathToken     = "/auth/token"
	PathRevoke    = "/auth/revoke"
	PathInference = "/tasks/assistant_inference"
	PathJWKS      = "/.well-known/jwks.json"
	PathHealth    = "/healthz"
	PathReady     = "/readyz"
	PathOpenAPI   = "/openapi.json"
)

// API serves the whole public API on its paths.
type API struct {
	Token http.Handler
	// Revoke serves RFC 7009 token revocation; nil answers 404.
	Revoke http.Handler
	// JWKS returns the current key set (keys rotate).
	JWKS func() []byte
	// OpenAPI is the description served at /openapi.json.
	OpenAPI  []byte
	Pipeline *Pipeline
	// Native is llmedge's own API on PathInference.
	Native Front
	// Mounts are the other public APIs, each on paths of its own
	// (OpenAI's, under /v1/).
	Mounts []Mount
	// Passthrough hands unknown paths to next instead of answering 404.
	Passthrough bool
	// Done, when set, hears every inference request once it is answered
	// (the Caddy module adds its figures to the access log).
	Done func(r *http.Request, ex *Exchange)
	// MaxHeaderBytes bounds a request's header fields (431 beyond, in
	// the API's JSON shape); 0 means api.DefaultMaxHeaderBytes.
	MaxHeaderBytes int
}

// ServeHTTP dispatches by exact path; next gets unknown paths when
// Passthrough is set.
func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request, next http.Handler) {
	if e := api.HeadersTooLarge(r, headerLimit(a.MaxHeaderBytes)); e != nil && isAPIPath(r.URL.Path) {
		e.Write(w)
		return
	}
	switch r.URL.Path {
	case PathInference:
		if allow(w, r, http.MethodPost) {
			a.serveChat(w, r, a.Native)
		}
	case PathToken:
		if allow(w, r, http.MethodPost) {
			a.Token.ServeHTTP(w, r)
		}
	case PathRevoke:
		if a.Revoke == nil {
			api.NewError(http.StatusNotFound, "Not Found").Write(w)
		} else if allow(w, r, http.MethodPost) {
			a.Revoke.ServeHTTP(w, r)
		}
	case PathJWKS:
		if allow(w, r, http.MethodGet, http.MethodHead) {
			ServeJWKS(w, a.JWKS())
		}
	case PathHealth:
		if allow(w, r, http.MethodGet, http.MethodHead) {
			ServeHealth(w, r)
		}
	case PathOpenAPI:
		if allow(w, r, http.MethodGet, http.MethodHead) {
			w.Header().Set("Cache-Control", "public, max-age=300")
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(a.OpenAPI)
		}
	case PathReady:
		if allow(w, r, http.MethodGet, http.MethodHead) {
			a.Pipeline.Gateway.ServeReady(w, r)
		}
	default:
		// The native paths come first, so a mounted API costs them nothing.
		for _, m := range a.Mounts {
			if h := m.Handler(r.URL.Path); h != nil {
				h.ServeHTTP(w, r)
				return
			}
		}
		if a.Passthrough && next != nil {
			next.ServeHTTP(w, r)
			return
		}
		for _, m := range a.Mounts {
			if strings.HasPrefix(r.URL.Path, m.Prefix()) {
				m.NotFound(w, r) // in the shape that API's clients parse
				return
			}
		}
		api.NewError(http.StatusNotFound, "Not Found").Write(w)
	}
}

func isAPIPath(p string) bool {
	switch p {
	case PathInference, PathToken, PathRevoke, PathJWKS, PathHealth, PathOpenAPI, PathReady:
		return true
	}
	return false
}

func headerLimit(n int) int {
	if n <= 0 {
		return api.DefaultMaxHeaderBytes
	}
	return n
}

// Mount is a public API served beside the native one, on paths of its own
// under a prefix (OpenAI's, under /v1/).
type Mount interface {
	// Handler returns the handler of path, or nil when the API has none.
	Handler(path string) http.Handler
	// Prefix is the start of every path of the API.
	Prefix() string
	// NotFound answers a path under Prefix that the API does not have,
	// in its own error shape.
	NotFound(w http.ResponseWriter, r *http.Request)
}

func (a *API) serveChat(w http.ResponseWriter, r *http.Request, front Front) {
	ex := a.Pipeline.Serve(w, r, front)
	if a.Done != nil {
		a.Done(r, ex)
	}
}

// ServeJWKS answers with the public keys.
func ServeJWKS(w http.ResponseWriter, jwks []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/jwk-set+json")
	h.Set("Cache-Control", "public, max-age=300")
	h.Set("Content-Length", strconv.Itoa(len(jwks)))
	_, _ = w.Write(jwks)
}

// allow answers 405 unless r's method is one of methods.
func allow(w http.ResponseWriter, r *http.Request, methods ...string) bool {
	for _, m := range methods {
		if r.Method == m {
			return true
		}
	}
	allowed := methods[0]
	for _, m := range methods[1:] {
		allowed += ", " + m
	}
	api.NewError(http.StatusMethodNotAllowed, "Method Not Allowed").WithHeader("Allow", allowed).Write(w)
	return false
}
