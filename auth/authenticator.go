package auth

import (
	"net/http"

	"github.com/llmedge/llmedge/api"
)

// Authenticator turns a request's credential into a principal, or into
// the 401 to answer. One that finds no credential it knows answers the
// NotAuthenticated error (detail DetailNotAuthenticated): a Chain then
// asks the next.
type Authenticator interface {
	Authenticate(r *http.Request) (*Principal, *api.Error)
}

// Chain asks its authenticators in order: the first to recognise the
// request's credential decides (a principal, or its refusal); when none
// does, the first one's "not authenticated" answer stands, with its
// challenge.
type Chain []Authenticator

// Authenticate implements Authenticator.
func (c Chain) Authenticate(r *http.Request) (*Principal, *api.Error) {
	var first *api.Error
	for _, a := range c {
		p, err := a.Authenticate(r)
		if err == nil || !IsNotAuthenticated(err) {
			return p, err
		}
		if first == nil {
			first = err
		}
	}
	return nil, first
}

// IsNotAuthenticated reports whether err says the request carries no
// credential the authenticator knows (rather than a bad one).
func IsNotAuthenticated(err *api.Error) bool {
	d, _ := err.Detail.(string)
	return err.Status == http.StatusUnauthorized && d == DetailNotAuthenticated
}

var _ Authenticator = Chain(nil)
var _ Authenticator = (*BearerAuth)(nil)
