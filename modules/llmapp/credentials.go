package llmapp

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/llmedge/llmedge/auth"
)

// Defaults and storage keys of API keys and refresh tokens.
const (
	DefaultAPIKeysRefresh  = 10 * time.Second
	DefaultRefreshTokenTTL = auth.DefaultRefreshTTL
	apiKeysStorageKey      = "llmedge/api_keys.json"
	refreshStoragePrefix   = "llmedge/refresh_tokens"
	// usageFlushEvery spaces the writes of API keys' last-use times: one
	// storage write per instance per period at most, whatever the load.
	usageFlushEvery = time.Minute
	// refreshSweepEvery spaces the removal of expired refresh families.
	refreshSweepEvery = time.Hour
	// stopFlushTimeout bounds the last flush when the app stops.
	stopFlushTimeout = 5 * time.Second
)

// provisionCredentials sets up the API keys and refresh tokens, both kept
// in Caddy's storage (whatever the signing algorithm) so that every
// instance sharing the storage honours them. It reads the keys now: a
// gateway must not start and refuse keys it will know ten seconds later.
func (a *App) provisionCredentials(ctx caddy.Context) error {
	st := ctx.Storage()
	a.apiKeys = &auth.APIKeys{Storage: st, StorageKey: apiKeysStorageKey, Users: a.users,
		DefaultTTL: time.Duration(a.APIKeyTTL)}
	if err := a.apiKeys.Reload(ctx); err != nil {
		return fmt.Errorf("api keys: %w", err)
	}
	if a.RefreshTokenTTL >= 0 {
		a.refresh = &auth.RefreshTokens{Storage: st, Prefix: refreshStoragePrefix, TTL: time.Duration(a.RefreshTokenTTL)}
	}
	return nil
}

func (a *App) apiKeysRefresh() time.Duration {
	if a.APIKeysRefresh > 0 {
		return time.Duration(a.APIKeysRefresh)
	}
	return DefaultAPIKeysRefresh
}

// credentialsLoop reloads the API keys every api_keys_refresh (so
// creations and revocations made on other instances take effect), writes
// their last-use times back every minute, and removes expired refresh
// families every hour.
func (a *App) credentialsLoop(ctx context.Context) {
	reload := time.NewTicker(a.apiKeysRefresh())
	defer reload.Stop()
	flush := time.NewTicker(usageFlushEvery)
	defer flush.Stop()
	// Instances started together should not sweep together.
	sweep := time.NewTimer(refreshSweepEvery/2 + rand.N(refreshSweepEvery/2))
	defer sweep.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-reload.C:
			if err := a.apiKeys.Reload(ctx); err != nil && ctx.Err() == nil {
				a.logger.Warn("reloading API keys failed; keeping the current ones", zap.Error(err))
			}
		case <-flush.C:
			if err := a.apiKeys.FlushUsage(ctx); err != nil && ctx.Err() == nil {
				a.logger.Warn("writing API keys' last use failed; will retry", zap.Error(err))
			}
		case <-sweep.C:
			sweep.Reset(refreshSweepEvery)
			if a.refresh == nil {
				continue
			}
			if n, err := a.refresh.Sweep(ctx); err != nil && ctx.Err() == nil {
				a.logger.Warn("removing expired refresh tokens failed", zap.Error(err))
			} else if n > 0 {
				a.logger.Info("removed expired refresh token families", zap.Int("families", n))
			}
		}
	}
}

// flushUsage writes the last-use times not yet written, when the app
// stops (a reload or a shutdown), so they are not lost with it.
func (a *App) flushUsage() {
	if a.apiKeys == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), stopFlushTimeout)
	defer cancel()
	if err := a.apiKeys.FlushUsage(ctx); err != nil {
		a.logger.Warn("writing API keys' last use failed", zap.Error(err))
	}
}

// onRefreshReuse logs a refresh token used twice: either the client or an
// attacker holds a stolen copy, and the family is now revoked. Never the
// token itself.
func (a *App) onRefreshReuse(user, family string) {
	a.logger.Warn("refresh token reused; every token of its login is revoked",
		zap.String("user", user), zap.String("family", family))
}

// onTokenStorageError logs a storage failure of the token endpoint.
func (a *App) onTokenStorageError(err error) {
	a.logger.Error("token storage failed", zap.Error(err))
}

// APIKeys is the API key store of this configuration.
func (a *App) APIKeys() *auth.APIKeys { return a.apiKeys }
