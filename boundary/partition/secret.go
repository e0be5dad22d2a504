package partition

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"strings"
)

// DefaultSecretKey is where the cache secret is kept in Caddy's storage
// when the configuration gives none.
const DefaultSecretKey = "llmedge/cache_secret"

// Storage is the part of certmagic.Storage the secret needs (Caddy's
// configured storage satisfies it). Load must return an error satisfying
// errors.Is(err, fs.ErrNotExist) when key does not exist.
type Storage interface {
	Load(ctx context.Context, key string) ([]byte, error)
	Store(ctx context.Context, key string, value []byte) error
	Lock(ctx context.Context, name string) error
	Unlock(ctx context.Context, name string) error
}

// LoadOrCreateSecret returns the secret stored in st at key, creating
// and storing a random one of 32 bytes when there is none, so that
// restarts and every instance sharing the storage derive the same keys
// and salts. Creation happens under st.Lock(key) and looks again once the
// lock is held, so instances starting together agree on one secret. A
// stored secret that cannot be read is an error; it is never
// overwritten.
func LoadOrCreateSecret(ctx context.Context, st Storage, key string) ([]byte, error) {
	if key == "" {
		key = DefaultSecretKey
	}
	if b, err := loadSecret(ctx, st, key); err == nil || !errors.Is(err, fs.ErrNotExist) {
		return b, err
	}
	if err := st.Lock(ctx, key); err != nil {
		return nil, fmt.Errorf("cache secret %s: lock: %w", key, err)
	}
	defer func() { _ = st.Unlock(context.WithoutCancel(ctx), key) }()
	if b, err := loadSecret(ctx, st, key); err == nil || !errors.Is(err, fs.ErrNotExist) {
		return b, err
	}
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		return nil, fmt.Errorf("cache secret: %w", err)
	}
	if err := st.Store(ctx, key, []byte(base64.RawURLEncoding.EncodeToString(secret)+"\n")); err != nil {
		return nil, fmt.Errorf("cache secret %s: store: %w", key, err)
	}
	return secret, nil
}

func loadSecret(ctx context.Context, st Storage, key string) ([]byte, error) {
	b, err := st.Load(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("cache secret %s: load: %w", key, err)
	}
	secret, err := base64.RawURLEncoding.DecodeString(strings.TrimSpace(string(b)))
	if err != nil || len(secret) < MinSecret {
		// The content is not repeated: it is a secret.
		return nil, fmt.Errorf("cache secret %s: not %d or more bytes of base64url", key, MinSecret)
	}
	return secret, nil
}
