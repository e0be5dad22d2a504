package llmapp

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/llmedge/llmedge/auth"
)

// Defaults of the key options.
const (
	DefaultKeyRefresh = time.Minute
	verifyLeeway      = 30 * time.Second
	// unknownKIDReloadEvery bounds the storage reads an unknown kid can cause.
	unknownKIDReloadEvery = time.Second
)

// provisionKeys loads (or creates) the signing keys: from Caddy's storage
// for EdDSA and ES256, from the configured secret for HS256.
func (a *App) provisionKeys(ctx caddy.Context, repl *caddy.Replacer) error {
	alg := a.SigningAlg
	switch alg {
	case "", auth.AlgEdDSA, auth.AlgES256:
		if alg == "" {
			alg = auth.AlgEdDSA
		}
	case auth.AlgHS256:
		secret := repl.ReplaceAll(a.HMACSecret, "")
		if a.HMACSecretFile != "" {
			b, err := os.ReadFile(repl.ReplaceAll(a.HMACSecretFile, ""))
			if err != nil {
				return fmt.Errorf("hmac_secret_file: %w", err)
			}
			secret = strings.TrimSpace(string(b))
		}
		ring, err := auth.NewHMACKeyRing([]byte(secret))
		if err != nil {
			return fmt.Errorf("signing_alg HS256: %w", err)
		}
		a.keys = ring
		return nil
	default:
		return fmt.Errorf("signing_alg %q: want EdDSA, ES256 or HS256", alg)
	}
	a.storage = ctx.Storage()
	ring, err := auth.LoadOrCreateKeyRingAlg(ctx, a.storage, keyStorageKey, alg)
	if err != nil {
		return fmt.Errorf("signing keys: %w", err)
	}
	if ring.ActiveAlg() != alg { // the operator changed the algorithm
		if ring, err = auth.RotateKeyRing(ctx, a.storage, keyStorageKey, alg, a.retireAfter()); err != nil {
			return fmt.Errorf("signing keys: switching to %s: %w", alg, err)
		}
		a.logger.Info("rotated the signing key to a new algorithm", zap.String("alg", alg), zap.String("kid", ring.ActiveKID()))
	}
	a.keys = ring
	return nil
}

// retireAfter is how long a replaced key must keep verifying: every token
// it signed must expire first, including tokens other instances signed
// with it before they refreshed.
func (a *App) retireAfter() time.Duration {
	return time.Duration(a.TokenTTL) + time.Duration(a.keyRefresh()) + verifyLeeway
}

func (a *App) keyRefresh() time.Duration {
	if a.KeyRefresh > 0 {
		return time.Duration(a.KeyRefresh)
	}
	return DefaultKeyRefresh
}

// storedKeys reports whether the keys live in storage (not HS256).
func (a *App) storedKeys() bool { return a.storage != nil }

// refreshKeys reloads the ring from storage, rotating first when the
// active key is older than key_rotation.
func (a *App) refreshKeys(ctx context.Context) error {
	var ring *auth.KeyRing
	var err error
	if a.KeyRotation > 0 {
		var rotated bool
		ring, rotated, err = auth.RotateKeyRingIfOlder(ctx, a.storage, keyStorageKey, a.keys.ActiveAlg(),
			time.Duration(a.KeyRotation), a.retireAfter())
		if rotated {
			a.logger.Info("rotated the signing key", zap.String("kid", ring.ActiveKID()))
		}
	} else {
		ring, err = auth.LoadKeyRing(ctx, a.storage, keyStorageKey)
	}
	if err != nil {
		return err
	}
	a.keys.Replace(ring)
	return nil
}

// RotateKeys makes a new signing key now; the old one keeps verifying
// until every token it signed has expired.
func (a *App) RotateKeys(ctx context.Context) (*auth.KeyRing, error) {
	if !a.storedKeys() {
		return nil, fmt.Errorf("HS256 keys come from the configured secret: change the secret to rotate")
	}
	ring, err := auth.RotateKeyRing(ctx, a.storage, keyStorageKey, a.keys.ActiveAlg(), a.retireAfter())
	if err != nil {
		return nil, err
	}
	a.keys.Replace(ring)
	a.logger.Info("rotated the signing key", zap.String("kid", ring.ActiveKID()))
	return ring, nil
}

// reloadOnUnknownKID is the verifier's Refresh: a token may carry the kid
// of a key another instance rotated in since our last refresh.
func (a *App) reloadOnUnknownKID() bool {
	if !a.storedKeys() {
		return false
	}
	if !a.kidLimit.allow() {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ring, err := auth.LoadKeyRing(ctx, a.storage, keyStorageKey)
	if err != nil {
		return false
	}
	a.keys.Replace(ring)
	return true
}

// rateGate lets one caller through per period.
type rateGate struct {
	every time.Duration
	mu    sync.Mutex
	last  time.Time
}

func (g *rateGate) allow() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if time.Since(g.last) < g.every {
		return false
	}
	g.last = time.Now()
	return true
}

// background runs the app's periodic work until Stop.
type background struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func (b *background) run(ctx context.Context, fn func(context.Context)) {
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		fn(ctx)
	}()
}

func (b *background) stop() {
	if b.cancel != nil {
		b.cancel()
	}
	b.wg.Wait()
}

// keyLoop refreshes (and, on schedule, rotates) the keys every key_refresh.
func (a *App) keyLoop(ctx context.Context) {
	t := time.NewTicker(a.keyRefresh())
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := a.refreshKeys(ctx); err != nil && ctx.Err() == nil {
			a.logger.Warn("refreshing signing keys failed; keeping the current ones", zap.Error(err))
		}
	}
}
