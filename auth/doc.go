// Package auth holds llmedge's authentication logic: the user store with
// bcrypt passwords, the Ed25519 signing keys kept in Caddy-compatible
// storage, issuing and verifying EdDSA JWTs, RFC 6750 Bearer handling, the
// OAuth 2.0 token endpoint (POST /auth/token: password grant, and refresh
// grant with rotating refresh tokens), and API keys for programs. Refresh
// tokens and API keys live in the same storage as the signing keys, so
// every instance sharing it honours them.
//
// The package is plain Go: it does not import Caddy. Caddy modules
// provision these types and adapt them to handlers.
package auth
