package gateway

import (
	"net/http"
	"time"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/auth"
)

// Pipeline holds the stages of POST /tasks/assistant_inference. Each
// stage can also run alone, as its own Caddy handler; the Exchange carries
// what one stage learns to the next.
type Pipeline struct {
	Verifier  *auth.Verifier
	Realm     string
	Validator *api.Validator
	Gateway   *Gateway
}

// Authenticate checks the bearer token. On failure it has answered and
// returns false.
func (p *Pipeline) Authenticate(w http.ResponseWriter, r *http.Request) (*http.Request, bool) {
	ex, r := Begin(w, r)
	start := time.Now()
	principal, err := auth.Bearer(r, p.Verifier, p.Realm)
	ex.Auth = time.Since(start)
	if err != nil {
		p.reject(w, ex, err, authFailureReason(err))
		return r, false
	}
	ex.Principal = principal
	return r, true
}

// Validate reads and checks the body, then checks that the token (if the
// request was authenticated) covers the model. On failure it has answered
// and returns false.
func (p *Pipeline) Validate(w http.ResponseWriter, r *http.Request) (*http.Request, bool) {
	ex, r := Begin(w, r)
	start := time.Now()
	req, err := p.Validator.ReadRequest(r)
	ex.Validate = time.Since(start)
	if err != nil {
		p.reject(w, ex, err, "")
		return r, false
	}
	if ex.Principal != nil {
		if scope := auth.ModelScope(req.ModelType); !ex.Principal.HasScope(scope) {
			ex.Request = req // the model is known: label the metrics with it
			p.reject(w, ex, auth.Forbidden(p.Realm, scope), "insufficient_scope")
			return r, false
		}
	}
	ex.Request = req
	return r, true
}

// Route sends the validated request to a replica and answers. It
// validates first when no earlier stage did.
func (p *Pipeline) Route(w http.ResponseWriter, r *http.Request) {
	ex, r := Begin(w, r)
	if ex.Request == nil {
		var ok bool
		if r, ok = p.Validate(w, r); !ok {
			return
		}
	}
	p.Gateway.Serve(w, r, ex)
}

// reject answers err, ending the request before it reaches a replica.
func (p *Pipeline) reject(w http.ResponseWriter, ex *Exchange, err *api.Error, authReason string) {
	ex.Status = err.Status
	err.Write(w)
	if authReason != "" && p.Gateway.Metrics != nil {
		p.Gateway.Metrics.AuthFailure(authReason)
	}
	p.Gateway.Observe(ex)
}

// authFailureReason names a Bearer failure for the metrics.
func authFailureReason(err *api.Error) string {
	if d, _ := err.Detail.(string); d == auth.DetailNotAuthenticated {
		return "missing_token"
	}
	return "invalid_token"
}

// ServeHTTP runs every stage in order.
func (p *Pipeline) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	r, ok := p.Authenticate(w, r)
	if !ok {
		return
	}
	if r, ok = p.Validate(w, r); !ok {
		return
	}
	p.Route(w, r)
}
