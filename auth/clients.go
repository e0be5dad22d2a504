package auth

import (
	"errors"
	"fmt"

	"golang.org/x/crypto/bcrypt"
)

// Clients are the OAuth clients allowed to use the token endpoint: a
// client_id with a bcrypt hash of its secret. With none configured the
// endpoint takes any (or no) client credentials, as FastAPI's
// OAuth2PasswordRequestForm does.
type Clients struct {
	hashes map[string][]byte
	dummy  []byte
}

// NewClients checks and keeps id → bcrypt hash pairs.
func NewClients(hashes map[string]string) (*Clients, error) {
	c := &Clients{hashes: make(map[string][]byte, len(hashes))}
	cost := bcrypt.DefaultCost
	for id, h := range hashes {
		if id == "" {
			return nil, errors.New("a client has an empty client_id")
		}
		n, err := bcrypt.Cost([]byte(h))
		if err != nil {
			return nil, fmt.Errorf("client %q: the secret hash is not bcrypt", id)
		}
		cost = n
		c.hashes[id] = []byte(h)
	}
	var err error
	if c.dummy, err = bcrypt.GenerateFromPassword([]byte("llmedge dummy client secret"), cost); err != nil {
		return nil, err
	}
	return c, nil
}

// Required reports whether client credentials are checked at all.
func (c *Clients) Required() bool { return c != nil && len(c.hashes) > 0 }

// Check reports whether secret is id's. Unknown ids cost a bcrypt
// comparison too, so timing does not tell which ids exist.
func (c *Clients) Check(id, secret string) bool {
	h, ok := c.hashes[id]
	if !ok {
		h = c.dummy
	}
	match := bcrypt.CompareHashAndPassword(h, []byte(secret)) == nil
	return ok && match
}

// basicChallenge is the WWW-Authenticate value of an invalid_client 401
// (RFC 6749 §5.2: the scheme the client should authenticate with).
func basicChallenge(realm string) string {
	if realm == "" {
		return "Basic"
	}
	return `Basic realm="` + quoteEscape(realm) + `"`
}
