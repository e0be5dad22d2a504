// Package auth holds llmedge's authentication logic: the user store with
// bcrypt passwords, the Ed25519 signing keys kept in Caddy-compatible
// storage, issuing and verifying EdDSA JWTs, RFC 6750 Bearer handling, and
// the OAuth 2.0 password-grant token endpoint (POST /auth/token).
//
// The package is plain Go: it does not import Caddy. Caddy modules
// provision these types and adapt them to handlers.
package auth
