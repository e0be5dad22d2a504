package auth

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// JWS algorithms a KeyRing can hold.
const (
	AlgEdDSA = "EdDSA" // Ed25519, the default
	AlgES256 = "ES256" // ECDSA P-256 with SHA-256
	AlgHS256 = "HS256" // HMAC-SHA256 with a shared secret, for interop
)

// SigningAlg is the default algorithm of new keys.
const SigningAlg = AlgEdDSA

// MinHMACSecretBytes is the shortest accepted HS256 secret (RFC 7518 §3.2).
const MinHMACSecretBytes = 32

// signingKey is one key of a ring. signKey is nil for a key that only
// verifies (a retired key).
type signingKey struct {
	kid      string
	alg      string
	signKey  any // ed25519.PrivateKey, *ecdsa.PrivateKey or []byte
	verKey   any // ed25519.PublicKey, *ecdsa.PublicKey or []byte
	created  time.Time
	notAfter *time.Time
}

func (k *signingKey) method() jwt.SigningMethod {
	switch k.alg {
	case AlgES256:
		return jwt.SigningMethodES256
	case AlgHS256:
		return jwt.SigningMethodHS256
	}
	return jwt.SigningMethodEdDSA
}

// keySet is an immutable generation of a KeyRing.
type keySet struct {
	active *signingKey
	keys   []*signingKey // the active one first
	byKID  map[string]*signingKey
	algs   []string // distinct algorithms, for the parser's allow-list
	jwks   []byte
}

// KeyRing holds the key that signs new tokens and every key, by kid, that
// still verifies tokens. It is safe for concurrent use; Replace swaps in
// a new generation (after a rotation) without disturbing requests in flight.
type KeyRing struct {
	set atomic.Pointer[keySet]
}

func newKeyRing(active *signingKey, others ...*signingKey) (*KeyRing, error) {
	s := &keySet{active: active, byKID: map[string]*signingKey{}}
	for _, k := range append([]*signingKey{active}, others...) {
		if _, dup := s.byKID[k.kid]; dup {
			return nil, fmt.Errorf("duplicate kid %q", k.kid)
		}
		s.byKID[k.kid] = k
		s.keys = append(s.keys, k)
		if !slices.Contains(s.algs, k.alg) {
			s.algs = append(s.algs, k.alg)
		}
	}
	var err error
	if s.jwks, err = marshalJWKS(s.keys); err != nil {
		return nil, err
	}
	r := &KeyRing{}
	r.set.Store(s)
	return r, nil
}

// NewKeyRing returns a ring whose only key, priv, is active.
func NewKeyRing(priv ed25519.PrivateKey) *KeyRing {
	pub := priv.Public().(ed25519.PublicKey)
	r, _ := newKeyRing(&signingKey{kid: Thumbprint(pub), alg: AlgEdDSA, signKey: priv, verKey: pub})
	return r
}

// NewHMACKeyRing returns an HS256 ring keyed by secret, for interop with
// services that can only verify shared-secret tokens. Its JWKS is empty:
// a shared secret is never published.
func NewHMACKeyRing(secret []byte) (*KeyRing, error) {
	if len(secret) < MinHMACSecretBytes {
		return nil, fmt.Errorf("HS256 secret has %d bytes; at least %d are needed", len(secret), MinHMACSecretBytes)
	}
	s := append([]byte(nil), secret...)
	return newKeyRing(&signingKey{kid: hmacKID(s), alg: AlgHS256, signKey: s, verKey: s})
}

// Replace makes from's keys the ring's keys.
func (k *KeyRing) Replace(from *KeyRing) { k.set.Store(from.set.Load()) }

// ActiveKID returns the kid of the key that signs new tokens.
func (k *KeyRing) ActiveKID() string { return k.set.Load().active.kid }

// ActiveAlg returns the algorithm of the key that signs new tokens.
func (k *KeyRing) ActiveAlg() string { return k.set.Load().active.alg }

// ActiveCreated returns when the signing key was made (zero if unknown).
func (k *KeyRing) ActiveCreated() time.Time { return k.set.Load().active.created }

// KIDs returns the kids of all verifying keys, the active one first.
func (k *KeyRing) KIDs() []string {
	s := k.set.Load()
	kids := make([]string, len(s.keys))
	for i, key := range s.keys {
		kids[i] = key.kid
	}
	return kids
}

// JWKS returns the public keys as a JWK Set, for GET /.well-known/jwks.json.
func (k *KeyRing) JWKS() ([]byte, error) { return k.set.Load().jwks, nil }

func (k *KeyRing) lookup(kid string) (*signingKey, bool) {
	key, ok := k.set.Load().byKID[kid]
	return key, ok
}

// Thumbprint returns the RFC 7638 JWK thumbprint of an Ed25519 public key:
// base64url (no padding) of SHA-256 over
// {"crv":"Ed25519","kty":"OKP","x":"<base64url key>"}. It is used as kid.
func Thumbprint(pub ed25519.PublicKey) string {
	return thumb(`{"crv":"Ed25519","kty":"OKP","x":"` + b64url(pub) + `"}`)
}

// ecThumbprint is the RFC 7638 thumbprint of a P-256 public key.
func ecThumbprint(pub *ecdsa.PublicKey) (string, error) {
	x, y, err := ecPoint(pub)
	if err != nil {
		return "", err
	}
	return thumb(`{"crv":"P-256","kty":"EC","x":"` + x + `","y":"` + y + `"}`), nil
}

// hmacKID names an HS256 key without publishing anything that helps to
// guess it: an HMAC of a fixed label under the secret.
func hmacKID(secret []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("llmedge key id"))
	return "hs-" + b64url(m.Sum(nil)[:12])
}

func thumb(canonical string) string {
	sum := sha256.Sum256([]byte(canonical))
	return b64url(sum[:])
}

// ecPoint returns the base64url x and y coordinates of a P-256 key.
func ecPoint(pub *ecdsa.PublicKey) (string, string, error) {
	e, err := pub.ECDH()
	if err != nil {
		return "", "", fmt.Errorf("EC key: %w", err)
	}
	b := e.Bytes() // 0x04 || X || Y
	if len(b) != 65 {
		return "", "", errors.New("EC key is not P-256")
	}
	return b64url(b[1:33]), b64url(b[33:]), nil
}

func b64url(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

// jwk is one entry of a JWK Set (RFC 8037 OKP or RFC 7518 EC key).
type jwk struct {
	Kty string `json:"kty"`
	Crv string `json:"crv"`
	X   string `json:"x"`
	Y   string `json:"y,omitempty"`
	Kid string `json:"kid"`
	Use string `json:"use"`
	Alg string `json:"alg"`
}

// marshalJWKS renders the public keys; HS256 keys are left out.
func marshalJWKS(keys []*signingKey) ([]byte, error) {
	set := struct {
		Keys []jwk `json:"keys"`
	}{Keys: []jwk{}}
	for _, k := range keys {
		switch pub := k.verKey.(type) {
		case ed25519.PublicKey:
			set.Keys = append(set.Keys, jwk{Kty: "OKP", Crv: "Ed25519", X: b64url(pub), Kid: k.kid, Use: "sig", Alg: k.alg})
		case *ecdsa.PublicKey:
			x, y, err := ecPoint(pub)
			if err != nil {
				return nil, err
			}
			set.Keys = append(set.Keys, jwk{Kty: "EC", Crv: "P-256", X: x, Y: y, Kid: k.kid, Use: "sig", Alg: k.alg})
		}
	}
	return json.Marshal(set)
}
