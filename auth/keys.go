package auth

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"time"
)

// DefaultKeysStorageKey is where LoadOrCreateKeyRing keeps the signing
// keys unless told otherwise.
const DefaultKeysStorageKey = "llmedge/signing_keys.json"

// SigningAlg is the JWS algorithm of every key of a KeyRing.
const SigningAlg = "EdDSA"

// keyFileVersion is the version of the stored key format written here.
const keyFileVersion = 1

// Storage is the part of certmagic.Storage that the key ring needs, so
// Caddy's configured storage (file system, Consul, Redis, ...) satisfies it
// without this package importing Caddy or certmagic. Load must return an
// error satisfying errors.Is(err, fs.ErrNotExist) when key does not exist.
type Storage interface {
	Load(ctx context.Context, key string) ([]byte, error)
	Store(ctx context.Context, key string, value []byte) error
	Exists(ctx context.Context, key string) bool
	Lock(ctx context.Context, name string) error
	Unlock(ctx context.Context, name string) error
}

// KeyRing holds one active Ed25519 key that signs new tokens, and the
// public keys, by kid, that verify tokens (the active one included). A
// KeyRing is immutable and safe for concurrent use; rotation builds a new
// one.
type KeyRing struct {
	activeKID string
	active    ed25519.PrivateKey
	// order lists the kids for JWKS, the active one first.
	order []string
	byKID map[string]ed25519.PublicKey
}

// NewKeyRing returns a ring whose only key, priv, is active.
func NewKeyRing(priv ed25519.PrivateKey) *KeyRing {
	pub := priv.Public().(ed25519.PublicKey)
	kid := Thumbprint(pub)
	return &KeyRing{
		activeKID: kid,
		active:    priv,
		order:     []string{kid},
		byKID:     map[string]ed25519.PublicKey{kid: pub},
	}
}

// ActiveKID returns the kid of the key that signs new tokens.
func (k *KeyRing) ActiveKID() string { return k.activeKID }

// PublicKey returns the verifying key with the given kid.
func (k *KeyRing) PublicKey(kid string) (ed25519.PublicKey, bool) {
	pub, ok := k.byKID[kid]
	return pub, ok
}

// KIDs returns the kids of all verifying keys, the active one first.
func (k *KeyRing) KIDs() []string { return append([]string(nil), k.order...) }

// Thumbprint returns the RFC 7638 JWK thumbprint of an Ed25519 public key:
// base64url (no padding) of SHA-256 over
// {"crv":"Ed25519","kty":"OKP","x":"<base64url key>"}. It is used as kid.
func Thumbprint(pub ed25519.PublicKey) string {
	canon := `{"crv":"Ed25519","kty":"OKP","x":"` + b64url(pub) + `"}`
	sum := sha256.Sum256([]byte(canon))
	return b64url(sum[:])
}

func b64url(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

// jwk is one entry of a JWK Set (RFC 8037 OKP key).
type jwk struct {
	Kty string `json:"kty"`
	Crv string `json:"crv"`
	X   string `json:"x"`
	Kid string `json:"kid"`
	Use string `json:"use"`
	Alg string `json:"alg"`
}

// JWKS returns the public keys as a JWK Set, for
// GET /.well-known/jwks.json:
//
//	{"keys":[{"kty":"OKP","crv":"Ed25519","x":"...","kid":"...","use":"sig","alg":"EdDSA"}]}
func (k *KeyRing) JWKS() ([]byte, error) {
	set := struct {
		Keys []jwk `json:"keys"`
	}{Keys: make([]jwk, 0, len(k.order))}
	for _, kid := range k.order {
		set.Keys = append(set.Keys, jwk{
			Kty: "OKP", Crv: "Ed25519", X: b64url(k.byKID[kid]),
			Kid: kid, Use: "sig", Alg: SigningAlg,
		})
	}
	return json.Marshal(set)
}

// keyFile is the stored form of a KeyRing:
//
//	{"version":1,"active":"<kid>","keys":[{"kid":"<kid>","alg":"EdDSA",
//	  "private_key":"<base64 PKCS#8 DER>","created":"2025-01-02T03:04:05Z"}]}
//
// It is shaped for rotation: several keys, one of them active (signing),
// the others only verifying. A retired key may drop its private_key and
// keep public_key (base64url, as the JWK "x"), and may carry not_after,
// after which it no longer verifies (set it to retirement + token TTL).
type keyFile struct {
	Version int         `json:"version"`
	Active  string      `json:"active"`
	Keys    []storedKey `json:"keys"`
}

// storedKey is one key of a keyFile.
type storedKey struct {
	KID        string     `json:"kid"`
	Alg        string     `json:"alg"`
	PrivateKey string     `json:"private_key,omitempty"`
	PublicKey  string     `json:"public_key,omitempty"`
	Created    time.Time  `json:"created"`
	NotAfter   *time.Time `json:"not_after,omitempty"`
}

// LoadOrCreateKeyRing returns the key ring stored in st at key, creating
// and storing a new Ed25519 key when there is none, so restarts and other
// instances sharing the storage sign and verify with the same keys.
// Creation happens under st.Lock(key) and re-checks the storage once the
// lock is held, so two instances starting together agree on one key.
// Stored data that cannot be read or parsed is an error; it is never
// overwritten.
func LoadOrCreateKeyRing(ctx context.Context, st Storage, key string) (*KeyRing, error) {
	if key == "" {
		key = DefaultKeysStorageKey
	}
	// Fast path: the keys exist (every start after the first).
	ring, err := loadKeyRing(ctx, st, key)
	if err == nil || !errors.Is(err, fs.ErrNotExist) {
		return ring, err
	}
	if err := st.Lock(ctx, key); err != nil {
		return nil, fmt.Errorf("signing keys %s: lock: %w", key, err)
	}
	// Unlock even if ctx is cancelled meanwhile. An unlock error after a
	// successful load or store is not reported: the keys are good, and
	// storage locks expire on their own.
	defer func() { _ = st.Unlock(context.WithoutCancel(ctx), key) }()

	ring, err = loadKeyRing(ctx, st, key)
	if err == nil || !errors.Is(err, fs.ErrNotExist) {
		return ring, err
	}
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("signing keys: generate: %w", err)
	}
	ring = NewKeyRing(priv)
	b, err := ring.marshal(time.Now().UTC())
	if err != nil {
		return nil, fmt.Errorf("signing keys: %w", err)
	}
	if err := st.Store(ctx, key, b); err != nil {
		return nil, fmt.Errorf("signing keys %s: store: %w", key, err)
	}
	return ring, nil
}

// loadKeyRing loads and parses the ring at key. A missing key gives an
// error satisfying errors.Is(err, fs.ErrNotExist).
func loadKeyRing(ctx context.Context, st Storage, key string) (*KeyRing, error) {
	b, err := st.Load(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("signing keys %s: load: %w", key, err)
	}
	ring, err := parseKeyFile(b, time.Now())
	if err != nil {
		return nil, fmt.Errorf("signing keys %s: %w", key, err)
	}
	return ring, nil
}

// marshal encodes the ring's active key as a keyFile created at created.
func (k *KeyRing) marshal(created time.Time) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(k.active)
	if err != nil {
		return nil, fmt.Errorf("encode private key: %w", err)
	}
	f := keyFile{
		Version: keyFileVersion,
		Active:  k.activeKID,
		Keys: []storedKey{{
			KID:        k.activeKID,
			Alg:        SigningAlg,
			PrivateKey: base64.StdEncoding.EncodeToString(der),
			Created:    created,
		}},
	}
	return json.MarshalIndent(f, "", "  ")
}

// parseKeyFile decodes and checks a keyFile. Keys whose not_after is
// before now are left out, unless active.
func parseKeyFile(b []byte, now time.Time) (*KeyRing, error) {
	var f keyFile
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("invalid JSON: %w", err)
	}
	if f.Version > keyFileVersion {
		return nil, fmt.Errorf("format version %d is newer than this program understands (%d)", f.Version, keyFileVersion)
	}
	ring := &KeyRing{byKID: map[string]ed25519.PublicKey{}}
	for i, sk := range f.Keys {
		priv, pub, err := sk.decode()
		if err != nil {
			return nil, fmt.Errorf("key #%d (kid %q): %w", i+1, sk.KID, err)
		}
		if _, dup := ring.byKID[sk.KID]; dup {
			return nil, fmt.Errorf("key #%d: duplicate kid %q", i+1, sk.KID)
		}
		if sk.KID == f.Active {
			if priv == nil {
				return nil, fmt.Errorf("active key %q has no private_key", sk.KID)
			}
			ring.activeKID, ring.active = sk.KID, priv
			ring.order = append([]string{sk.KID}, ring.order...)
			ring.byKID[sk.KID] = pub
			continue
		}
		if sk.NotAfter != nil && sk.NotAfter.Before(now) {
			continue
		}
		ring.order = append(ring.order, sk.KID)
		ring.byKID[sk.KID] = pub
	}
	if ring.active == nil {
		return nil, fmt.Errorf("active key %q is not among the keys", f.Active)
	}
	return ring, nil
}

// decode returns the key's private key (nil for a verify-only key) and
// public key, checking alg and that kid is the key's thumbprint.
func (sk *storedKey) decode() (ed25519.PrivateKey, ed25519.PublicKey, error) {
	if sk.Alg != SigningAlg {
		return nil, nil, fmt.Errorf("alg %q is not %s", sk.Alg, SigningAlg)
	}
	var priv ed25519.PrivateKey
	var pub ed25519.PublicKey
	if sk.PrivateKey != "" {
		der, err := base64.StdEncoding.DecodeString(sk.PrivateKey)
		if err != nil {
			return nil, nil, errors.New("private_key is not base64")
		}
		k, err := x509.ParsePKCS8PrivateKey(der)
		if err != nil {
			return nil, nil, errors.New("private_key is not a PKCS#8 key")
		}
		var ok bool
		if priv, ok = k.(ed25519.PrivateKey); !ok {
			return nil, nil, fmt.Errorf("private_key is a %T, not Ed25519", k)
		}
		pub = priv.Public().(ed25519.PublicKey)
	}
	if sk.PublicKey != "" {
		raw, err := base64.RawURLEncoding.DecodeString(sk.PublicKey)
		if err != nil || len(raw) != ed25519.PublicKeySize {
			return nil, nil, errors.New("public_key is not a base64url Ed25519 public key")
		}
		if pub != nil && !pub.Equal(ed25519.PublicKey(raw)) {
			return nil, nil, errors.New("public_key does not match private_key")
		}
		pub = raw
	}
	if pub == nil {
		return nil, nil, errors.New("neither private_key nor public_key is set")
	}
	if want := Thumbprint(pub); sk.KID != want {
		return nil, nil, fmt.Errorf("kid is not the key's thumbprint %q", want)
	}
	return priv, pub, nil
}
