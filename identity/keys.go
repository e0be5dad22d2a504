package identity

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	jose "github.com/go-jose/go-jose/v4"
)

// Algorithms a trust may allow: asymmetric signatures only. "none" and the
// HMACs (HS256, ...) are never accepted: an HMAC "verified" with a public
// key is the classic algorithm-confusion forgery.
var (
	SupportedAlgorithms = []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}
	// DefaultAlgorithms are allowed when a trust names none.
	DefaultAlgorithms = []string{"RS256", "PS256", "ES256", "EdDSA"}
)

// MinRSABits is the smallest RSA key accepted from a JWKS.
const MinRSABits = 2048

// key is one verifying key of an issuer, with the algorithms it may
// verify: the JWK's own "alg" when it names one, else every allowed
// algorithm of its type (and curve).
type key struct {
	kid  string
	pub  any // *rsa.PublicKey, *ecdsa.PublicKey or ed25519.PublicKey
	algs []string
}

// keySet is one immutable generation of an issuer's keys.
type keySet struct {
	byKID map[string]*key
	keys  []*key
}

func (s *keySet) lookup(kid string) (*key, bool) {
	if s == nil || kid == "" {
		return nil, false
	}
	k, ok := s.byKID[kid]
	return k, ok
}

// forAlg returns the only key of the set that may verify alg, for a token
// without a kid; none when there are several (the token must then say).
func (s *keySet) forAlg(alg string) (*key, bool) {
	if s == nil {
		return nil, false
	}
	var found *key
	for _, k := range s.keys {
		if slices.Contains(k.algs, alg) {
			if found != nil {
				return nil, false
			}
			found = k
		}
	}
	return found, found != nil
}

// parseJWKS reads a JWK Set, keeping the public signing keys usable with
// allowed algorithms; skipped says how many others it held (encryption
// keys, symmetric keys, private material, weak or unknown types), which
// are left out rather than failing the set. A set with no usable key is
// an error: the last good set is then kept.
func parseJWKS(b []byte, allowed []string) (set *keySet, skipped int, err error) {
	var doc struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, 0, fmt.Errorf("JWKS is not JSON: %w", err)
	}
	set = &keySet{byKID: make(map[string]*key, len(doc.Keys))}
	for _, raw := range doc.Keys {
		k, err := parseJWK(raw, allowed)
		if err != nil {
			skipped++
			continue
		}
		if k.kid != "" {
			if _, dup := set.byKID[k.kid]; dup {
				// Two keys under one kid: neither can be told apart.
				delete(set.byKID, k.kid)
				set.keys = slices.DeleteFunc(set.keys, func(o *key) bool { return o.kid == k.kid })
				skipped += 2
				continue
			}
			set.byKID[k.kid] = k
		}
		set.keys = append(set.keys, k)
	}
	if len(set.keys) == 0 {
		return nil, skipped, fmt.Errorf("JWKS has no usable signing key (%d skipped)", skipped)
	}
	return set, skipped, nil
}

var errSkip = errors.New("key not usable")

// parseJWK reads one JWK with go-jose, which checks its type, curve and
// point, and keeps it when it is a public signing key with at least one
// allowed algorithm.
func parseJWK(raw json.RawMessage, allowed []string) (*key, error) {
	var jwk jose.JSONWebKey
	if err := jwk.UnmarshalJSON(raw); err != nil {
		return nil, err
	}
	if !jwk.Valid() || !jwk.IsPublic() || (jwk.Use != "" && jwk.Use != "sig") {
		return nil, errSkip
	}
	var algs []string
	switch pub := jwk.Key.(type) {
	case *rsa.PublicKey:
		if pub.N.BitLen() < MinRSABits {
			return nil, errSkip
		}
		algs = []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512"}
	case *ecdsa.PublicKey:
		switch pub.Curve {
		case elliptic.P256():
			algs = []string{"ES256"}
		case elliptic.P384():
			algs = []string{"ES384"}
		case elliptic.P521():
			algs = []string{"ES512"}
		}
	case ed25519.PublicKey:
		algs = []string{"EdDSA"}
	default:
		return nil, errSkip
	}
	if jwk.Algorithm != "" {
		if !slices.Contains(algs, jwk.Algorithm) {
			return nil, errSkip // an alg that does not fit the key
		}
		algs = []string{jwk.Algorithm}
	}
	algs = slices.DeleteFunc(algs, func(a string) bool { return !slices.Contains(allowed, a) })
	if len(algs) == 0 {
		return nil, errSkip
	}
	return &key{kid: jwk.KeyID, pub: jwk.Key, algs: algs}, nil
}
