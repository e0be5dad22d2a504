package auth

import (
	"errors"
	"time"
)

// ErrOwnerRevoked: a credential captured earlier belongs to a user who
// was removed or disabled since, or whose tokens were revoked
// (`llmedge revoke`) after it was captured, or to an outside identity
// whose source the configuration no longer trusts.
var ErrOwnerRevoked = errors.New("auth: the credential's user was removed, disabled or revoked")

// Standing reports whether the API key of id may still be used: nil,
// ErrAPIKeyInvalid when it was revoked (or never existed), ErrAPIKeyExpired
// past its expiry, ErrOwnerRevoked when its user is gone or disabled. It
// reads memory only, as Verify does: a revocation made on another
// instance is seen at the next Reload.
func (k *APIKeys) Standing(id string) error {
	s := k.set.Load()
	if s == nil {
		return ErrAPIKeyInvalid
	}
	e := s.byID[id]
	switch {
	case e == nil:
		return ErrAPIKeyInvalid
	case !k.now().Before(e.expires):
		return ErrAPIKeyExpired
	case e.principal(k.Users) == nil:
		return ErrOwnerRevoked
	}
	return nil
}

// Standing reports whether p, a principal captured at since and used
// long after without its credential (a batch's owner, whose lines run
// for hours), still stands: its API key not revoked nor expired, its
// user neither removed nor disabled, its tokens not revoked after since.
// It returns nil, ErrAPIKeyInvalid, ErrAPIKeyExpired or ErrOwnerRevoked,
// from memory only: it is asked before every line of a batch.
//
// An access token's own expiry does not count: the batch was accepted
// while it was valid. An outside identity (an identity provider's user,
// a client certificate) is checked as far as the gateway knows it: its
// revocation and its source still trusted, not whether its provider
// still knows the user.
func (s *Service) Standing(p *Principal, since time.Time) error {
	if p.KeyID != "" {
		// An API key's user is a local one, checked with the key; a
		// key is not refused by `llmedge revoke` of its user (Verify
		// does not ask the revocations either), only by revoke-key.
		return s.apiKeys.Standing(p.KeyID)
	}
	if s.cfg.Revocations != nil && s.cfg.Revocations.Revoked(p.Subject, "", since) {
		return ErrOwnerRevoked
	}
	if p.Provider != "" {
		if s.users.Unplaced(p.Provider, p.Subject) {
			return ErrOwnerRevoked
		}
		return nil
	}
	if !s.users.Usable(p.Subject) {
		return ErrOwnerRevoked
	}
	return nil
}
