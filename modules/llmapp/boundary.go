package llmapp

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/llmedge/llmedge/boundary/members"
	"github.com/llmedge/llmedge/boundary/partition"
	"github.com/llmedge/llmedge/gateway"
)

// The tenant boundary's options of a model: who shares a cache partition,
// which replicas get its salt, the engine-control members clients may
// send (docs/tenant-boundary.md).

// cacheKeys derives the partitions' keys from the cache secret: the
// configuration's (cache_secret, cache_secret_file), or else the one kept
// in Caddy's storage, made by the first instance that needed it. Either
// way every instance must have the same; it is never logged.
func (a *App) cacheKeys(ctx caddy.Context, repl *caddy.Replacer) (*partition.Keys, error) {
	var secret []byte
	switch {
	case a.CacheSecretFile != "":
		b, err := os.ReadFile(repl.ReplaceAll(a.CacheSecretFile, ""))
		if err != nil {
			return nil, fmt.Errorf("cache_secret_file: %w", err)
		}
		secret = []byte(strings.TrimSpace(string(b)))
	case a.CacheSecret != "":
		secret = []byte(repl.ReplaceAll(a.CacheSecret, ""))
	default:
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		var err error
		if secret, err = partition.LoadOrCreateSecret(sctx, a.storage(ctx.Storage()), partition.DefaultSecretKey); err != nil {
			return nil, err
		}
	}
	if d, err := base64.RawURLEncoding.DecodeString(string(secret)); err == nil && len(d) >= partition.MinSecret {
		secret = d // the form `llmedge` tools and the storage write
	}
	keys, err := partition.NewKeys(secret)
	if err != nil {
		return nil, fmt.Errorf("cache_secret: %w", err)
	}
	return keys, nil
}

// boundaryOption parses a model's option opt, reporting false for one of
// another kind.
func (m *ModelConfig) boundaryOption(d *caddyfile.Dispenser, opt string) (bool, error) {
	switch opt {
	case "cache_sharing":
		if err := oneString(d, &m.CacheSharing); err != nil {
			return true, err
		}
		if _, err := partition.ParseSharing(m.CacheSharing); err != nil {
			return true, d.Err(err.Error())
		}
	case "cache_salt":
		if err := oneString(d, &m.CacheSalt); err != nil {
			return true, err
		}
		if _, err := cacheSaltMode(m.CacheSalt); err != nil {
			return true, d.Err(err.Error())
		}
	case "allow_members":
		args := d.RemainingArgs()
		if len(args) == 0 {
			return true, d.Errf("allow_members: want at least one member for model %q", m.Name)
		}
		if _, err := members.NewPolicy(args); err != nil {
			return true, d.Err(err.Error())
		}
		m.AllowMembers = append(m.AllowMembers, args...)
	default:
		return false, nil
	}
	return true, nil
}

// applyBoundary sets the model's tenant-boundary options on gm.
func (m *ModelConfig) applyBoundary(gm *gateway.Model) error {
	var err error
	if m.CacheSharing != "" {
		if gm.CacheSharing, err = partition.ParseSharing(m.CacheSharing); err != nil {
			return fmt.Errorf("model %q: %w", m.Name, err)
		}
	}
	if gm.CacheSalt, err = cacheSaltMode(m.CacheSalt); err != nil {
		return fmt.Errorf("model %q: %w", m.Name, err)
	}
	if gm.Members, err = members.NewPolicy(m.AllowMembers); err != nil {
		return fmt.Errorf("model %q: %w", m.Name, err)
	}
	return nil
}

func cacheSaltMode(s string) (gateway.CacheSalt, error) {
	switch s {
	case "", "auto":
		return gateway.CacheSaltAuto, nil
	case "on":
		return gateway.CacheSaltOn, nil
	case "off":
		return gateway.CacheSaltOff, nil
	}
	return 0, fmt.Errorf("cache_salt: want auto, on or off, got %q", s)
}
