package auth

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"time"
)

// DefaultKeysStorageKey is where the signing keys are kept unless told
// otherwise.
const DefaultKeysStorageKey = "llmedge/signing_keys.json"

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

// keyFile is the stored form of a KeyRing:
//
//	{"version":1,"active":"<kid>","keys":[{"kid":"<kid>","alg":"EdDSA",
//	  "private_key":"<base64 PKCS#8 DER>","created":"2025-01-02T03:04:05Z"}]}
//
// Several keys, one of them active (signing), the others only verifying.
// A retired key drops its private_key and keeps public_key (EdDSA: the
// base64url key, as the JWK "x"; ES256: base64url PKIX DER), and carries
// not_after, after which it no longer verifies and is pruned.
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

// LoadOrCreateKeyRing returns the EdDSA key ring stored in st at key; see
// LoadOrCreateKeyRingAlg.
func LoadOrCreateKeyRing(ctx context.Context, st Storage, key string) (*KeyRing, error) {
	return LoadOrCreateKeyRingAlg(ctx, st, key, AlgEdDSA)
}

// LoadOrCreateKeyRingAlg returns the key ring stored in st at key,
// creating and storing a new key of alg (EdDSA or ES256) when there is
// none, so restarts and other instances sharing the storage sign and
// verify with the same keys. Creation happens under st.Lock(key) and
// re-checks the storage once the lock is held, so instances starting
// together agree on one key. Stored data that cannot be read or parsed is
// an error; it is never overwritten. A stored ring whose active key has
// another algorithm is returned as it is: rotate to change algorithms.
func LoadOrCreateKeyRingAlg(ctx context.Context, st Storage, key, alg string) (*KeyRing, error) {
	if key == "" {
		key = DefaultKeysStorageKey
	}
	// Fast path: the keys exist (every start after the first).
	ring, err := LoadKeyRing(ctx, st, key)
	if err == nil || !errors.Is(err, fs.ErrNotExist) {
		return ring, err
	}
	var created *KeyRing
	err = withLock(ctx, st, key, func() error {
		f, err := loadKeyFile(ctx, st, key)
		if err == nil {
			created, err = f.ring(time.Now())
			return err
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		f = &keyFile{Version: keyFileVersion}
		if err := f.addActive(alg, time.Now().UTC()); err != nil {
			return err
		}
		if created, err = f.ring(time.Now()); err != nil {
			return err
		}
		return storeKeyFile(ctx, st, key, f)
	})
	return created, err
}

// RotateKeyRing makes a new active key of alg in the ring stored at key.
// The key it replaces keeps verifying until retireAfter from now (give it
// the longest token lifetime plus leeway), then it is pruned. It returns
// the new ring, which the caller swaps in with KeyRing.Replace; other
// instances pick it up with LoadKeyRing.
func RotateKeyRing(ctx context.Context, st Storage, key, alg string, retireAfter time.Duration) (*KeyRing, error) {
	ring, _, err := rotate(ctx, st, key, alg, retireAfter, 0)
	return ring, err
}

// RotateKeyRingIfOlder rotates like RotateKeyRing, but only when the
// active key is older than maxAge or not of alg. Many instances may call
// it on a schedule: the storage lock makes one of them rotate.
func RotateKeyRingIfOlder(ctx context.Context, st Storage, key, alg string, maxAge, retireAfter time.Duration) (*KeyRing, bool, error) {
	return rotate(ctx, st, key, alg, retireAfter, maxAge)
}

func rotate(ctx context.Context, st Storage, key, alg string, retireAfter, ifOlder time.Duration) (*KeyRing, bool, error) {
	if key == "" {
		key = DefaultKeysStorageKey
	}
	var ring *KeyRing
	var rotated bool
	err := withLock(ctx, st, key, func() error {
		f, err := loadKeyFile(ctx, st, key)
		if errors.Is(err, fs.ErrNotExist) {
			f, err = &keyFile{Version: keyFileVersion}, nil
		}
		if err != nil {
			return err
		}
		now := time.Now().UTC()
		if ifOlder > 0 {
			if a := f.active(); a != nil && a.Alg == alg && now.Sub(a.Created) < ifOlder {
				ring, err = f.ring(now)
				return err
			}
		}
		if err := f.retireActive(now.Add(retireAfter)); err != nil {
			return err
		}
		f.prune(now)
		if err := f.addActive(alg, now); err != nil {
			return err
		}
		if ring, err = f.ring(now); err != nil {
			return err
		}
		rotated = true
		return storeKeyFile(ctx, st, key, f)
	})
	return ring, rotated, err
}

// LoadKeyRing loads and parses the ring at key. A missing key gives an
// error satisfying errors.Is(err, fs.ErrNotExist).
func LoadKeyRing(ctx context.Context, st Storage, key string) (*KeyRing, error) {
	if key == "" {
		key = DefaultKeysStorageKey
	}
	f, err := loadKeyFile(ctx, st, key)
	if err != nil {
		return nil, err
	}
	ring, err := f.ring(time.Now())
	if err != nil {
		return nil, fmt.Errorf("signing keys %s: %w", key, err)
	}
	return ring, nil
}

func withLock(ctx context.Context, st Storage, key string, fn func() error) error {
	if err := st.Lock(ctx, key); err != nil {
		return fmt.Errorf("signing keys %s: lock: %w", key, err)
	}
	// Unlock even if ctx is cancelled meanwhile. An unlock error is not
	// reported: the work is done, and storage locks expire on their own.
	defer func() { _ = st.Unlock(context.WithoutCancel(ctx), key) }()
	return fn()
}

func loadKeyFile(ctx context.Context, st Storage, key string) (*keyFile, error) {
	b, err := st.Load(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("signing keys %s: load: %w", key, err)
	}
	var f keyFile
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("signing keys %s: invalid JSON: %w", key, err)
	}
	if f.Version > keyFileVersion {
		return nil, fmt.Errorf("signing keys %s: format version %d is newer than this program understands (%d)", key, f.Version, keyFileVersion)
	}
	return &f, nil
}

func storeKeyFile(ctx context.Context, st Storage, key string, f *keyFile) error {
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return fmt.Errorf("signing keys: %w", err)
	}
	if err := st.Store(ctx, key, b); err != nil {
		return fmt.Errorf("signing keys %s: store: %w", key, err)
	}
	return nil
}

func (f *keyFile) active() *storedKey {
	for i := range f.Keys {
		if f.Keys[i].KID == f.Active {
			return &f.Keys[i]
		}
	}
	return nil
}

// addActive generates a key of alg and makes it the active one.
func (f *keyFile) addActive(alg string, now time.Time) error {
	var priv any
	switch alg {
	case AlgEdDSA, "":
		alg = AlgEdDSA
		_, p, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			return fmt.Errorf("signing keys: generate: %w", err)
		}
		priv = p
	case AlgES256:
		p, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return fmt.Errorf("signing keys: generate: %w", err)
		}
		priv = p
	default:
		return fmt.Errorf("signing keys: cannot store %q keys (EdDSA or ES256; HS256 takes a configured secret)", alg)
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return fmt.Errorf("signing keys: encode: %w", err)
	}
	sk := storedKey{Alg: alg, PrivateKey: base64.StdEncoding.EncodeToString(der), Created: now}
	k, err := sk.decode()
	if err != nil {
		return err
	}
	sk.KID = k.kid
	f.Keys = append([]storedKey{sk}, f.Keys...)
	f.Active = sk.KID
	return nil
}

// retireActive turns the active key into a verify-only key until notAfter.
func (f *keyFile) retireActive(notAfter time.Time) error {
	a := f.active()
	if a == nil {
		return nil
	}
	k, err := a.decode()
	if err != nil {
		return err
	}
	pub, err := encodePublic(k.verKey)
	if err != nil {
		return err
	}
	a.PrivateKey, a.PublicKey, a.NotAfter = "", pub, &notAfter
	return nil
}

// prune drops verify-only keys past their not_after.
func (f *keyFile) prune(now time.Time) {
	kept := f.Keys[:0]
	for _, k := range f.Keys {
		if k.KID == f.Active || k.NotAfter == nil || k.NotAfter.After(now) {
			kept = append(kept, k)
		}
	}
	f.Keys = kept
}

// ring builds the KeyRing; keys past their not_after are left out.
func (f *keyFile) ring(now time.Time) (*KeyRing, error) {
	var active *signingKey
	var others []*signingKey
	seen := map[string]bool{}
	for i := range f.Keys {
		sk := &f.Keys[i]
		k, err := sk.decode()
		if err != nil {
			return nil, fmt.Errorf("key #%d (kid %q): %w", i+1, sk.KID, err)
		}
		if seen[sk.KID] {
			return nil, fmt.Errorf("key #%d: duplicate kid %q", i+1, sk.KID)
		}
		seen[sk.KID] = true
		if sk.KID == f.Active {
			if k.signKey == nil {
				return nil, fmt.Errorf("active key %q has no private_key", sk.KID)
			}
			active = k
			continue
		}
		if sk.NotAfter != nil && sk.NotAfter.Before(now) {
			continue
		}
		k.signKey = nil // only the active key signs
		others = append(others, k)
	}
	if active == nil {
		return nil, fmt.Errorf("active key %q is not among the keys", f.Active)
	}
	return newKeyRing(active, others...)
}

// parseKeyFile decodes and checks a stored ring.
func parseKeyFile(b []byte, now time.Time) (*KeyRing, error) {
	var f keyFile
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("invalid JSON: %w", err)
	}
	if f.Version > keyFileVersion {
		return nil, fmt.Errorf("format version %d is newer than this program understands (%d)", f.Version, keyFileVersion)
	}
	return f.ring(now)
}

// decode checks a stored key: its material matches alg, and kid is the
// key's thumbprint.
func (sk *storedKey) decode() (*signingKey, error) {
	k := &signingKey{kid: sk.KID, alg: sk.Alg, created: sk.Created, notAfter: sk.NotAfter}
	if sk.Alg != AlgEdDSA && sk.Alg != AlgES256 {
		return nil, fmt.Errorf("alg %q is not EdDSA or ES256", sk.Alg)
	}
	if sk.PrivateKey != "" {
		der, err := base64.StdEncoding.DecodeString(sk.PrivateKey)
		if err != nil {
			return nil, errors.New("private_key is not base64")
		}
		priv, err := x509.ParsePKCS8PrivateKey(der)
		if err != nil {
			return nil, errors.New("private_key is not a PKCS#8 key")
		}
		switch p := priv.(type) {
		case ed25519.PrivateKey:
			k.signKey, k.verKey = p, p.Public()
		case *ecdsa.PrivateKey:
			k.signKey, k.verKey = p, &p.PublicKey
		default:
			return nil, fmt.Errorf("private_key is a %T", priv)
		}
	}
	if sk.PublicKey != "" {
		pub, err := decodePublic(sk.Alg, sk.PublicKey)
		if err != nil {
			return nil, err
		}
		if k.verKey != nil && !publicEqual(k.verKey, pub) {
			return nil, errors.New("public_key does not match private_key")
		}
		k.verKey = pub
	}
	if k.verKey == nil {
		return nil, errors.New("neither private_key nor public_key is set")
	}
	var want string
	switch pub := k.verKey.(type) {
	case ed25519.PublicKey:
		if sk.Alg != AlgEdDSA {
			return nil, fmt.Errorf("alg %q does not fit an Ed25519 key", sk.Alg)
		}
		want = Thumbprint(pub)
	case *ecdsa.PublicKey:
		if sk.Alg != AlgES256 || pub.Curve != elliptic.P256() {
			return nil, fmt.Errorf("alg %q does not fit this ECDSA key", sk.Alg)
		}
		var err error
		if want, err = ecThumbprint(pub); err != nil {
			return nil, err
		}
	}
	if sk.KID != "" && sk.KID != want {
		return nil, fmt.Errorf("kid is not the key's thumbprint %q", want)
	}
	k.kid = want
	return k, nil
}

func encodePublic(pub any) (string, error) {
	switch p := pub.(type) {
	case ed25519.PublicKey:
		return b64url(p), nil
	case *ecdsa.PublicKey:
		der, err := x509.MarshalPKIXPublicKey(p)
		if err != nil {
			return "", err
		}
		return b64url(der), nil
	}
	return "", fmt.Errorf("cannot store a %T public key", pub)
}

func decodePublic(alg, s string) (any, error) {
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return nil, errors.New("public_key is not base64url")
	}
	if alg == AlgEdDSA {
		if len(raw) != ed25519.PublicKeySize {
			return nil, errors.New("public_key is not a base64url Ed25519 public key")
		}
		return ed25519.PublicKey(raw), nil
	}
	pub, err := x509.ParsePKIXPublicKey(raw)
	if err != nil {
		return nil, errors.New("public_key is not a PKIX public key")
	}
	ec, ok := pub.(*ecdsa.PublicKey)
	if !ok {
		return nil, fmt.Errorf("public_key is a %T, not ECDSA", pub)
	}
	return ec, nil
}

func publicEqual(a, b any) bool {
	e, ok := a.(interface{ Equal(crypto.PublicKey) bool })
	return ok && e.Equal(b)
}
