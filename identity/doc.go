// Package identity trusts outside identity providers: it verifies the
// JWT access tokens of OpenID Connect issuers (keys from OIDC discovery
// and the issuer's JWKS, cached, refreshed in the background and on an
// unknown kid, kept when the provider is down) and maps their claims to
// llmedge principals (a user name, model scopes, a limits tier). It also
// maps verified client certificates (mutual TLS) to principals.
//
// The JOSE work is done by libraries: golang-jwt/jwt/v5 parses and
// verifies the JWS (algorithm allow-list, registered claims, leeway) as
// package auth does for llmedge's own tokens, and go-jose/v4 parses and
// validates the JWKs (key types, curves, points on the curve, no private
// material). The cache around them is this package's, because its life
// follows llmedge's configurations: one cache per issuer is shared by the
// configurations that trust it (keep.Store), its loop stops when the last
// one lets go, and its state feeds metrics, /readyz and the status page.
//
// The package is plain Go: it does not import Caddy.
package identity
