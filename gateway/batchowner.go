package gateway

import (
	"errors"
	"net/http"
	"time"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/auth"
)

// BatchOwners tells whether a batch's owner still stands: a batch runs
// for hours on a snapshot of the credential that created it, and an API
// key revoked or expired since, or a user removed, disabled or revoked,
// must stop its lines as it stops the credential's own requests.
type BatchOwners interface {
	// Standing returns nil while p, captured when the batch was created
	// at since, stands; otherwise auth.ErrAPIKeyInvalid,
	// auth.ErrAPIKeyExpired or auth.ErrOwnerRevoked. It is asked before
	// every line and reads no storage.
	Standing(p *auth.Principal, since time.Time) error
}

// Codes of a batch line refused for its owner, in OpenAI's error shape.
const (
	CodeInvalidAPIKey = "invalid_api_key"
	CodeExpiredAPIKey = "expired_api_key"
	CodeOwnerRevoked  = "owner_revoked"
)

// ownerStands refuses ex, a batch's line, when its owner no longer
// stands: the line is answered (and written to the batch's error file)
// with a 401 or 403 naming why, before it reaches a replica.
func (p *Pipeline) ownerStands(w http.ResponseWriter, ex *Exchange) bool {
	if p.Owners == nil {
		return true
	}
	err := p.Owners.Standing(ex.batch.owner, ex.batch.created)
	if err == nil {
		return true
	}
	e := ownerRefusal(err)
	p.reject(w, ex, e, "")
	return false
}

// ownerRefusal is the answer to a line whose owner fell, by cause.
func ownerRefusal(err error) *api.Error {
	switch {
	case errors.Is(err, auth.ErrAPIKeyExpired):
		return &api.Error{Status: http.StatusUnauthorized, Code: CodeExpiredAPIKey,
			Detail: "The API key this batch was created with has expired: the batch's remaining requests are not run."}
	case errors.Is(err, auth.ErrAPIKeyInvalid):
		return &api.Error{Status: http.StatusUnauthorized, Code: CodeInvalidAPIKey,
			Detail: "The API key this batch was created with has been revoked: the batch's remaining requests are not run."}
	}
	return &api.Error{Status: http.StatusForbidden, Code: CodeOwnerRevoked,
		Detail: "The user this batch belongs to was removed, disabled or revoked: the batch's remaining requests are not run."}
}
