package llmapp

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/llmedge/llmedge/auth"
)

// Defaults of the credentials' options, as the Caddyfile documents them.
const (
	DefaultKeyRefresh      = auth.DefaultKeyRefresh
	DefaultAPIKeysRefresh  = auth.DefaultAPIKeysRefresh
	DefaultRefreshTokenTTL = auth.DefaultRefreshTTL
)

// authConfig resolves the credentials' options (placeholders in secrets
// and paths replaced, the HMAC secret read) for auth.NewService.
func (a *App) authConfig(ctx caddy.Context, repl *caddy.Replacer) (auth.ServiceConfig, error) {
	cfg := auth.ServiceConfig{
		Issuer: a.Issuer, Audience: a.Audience, TokenTTL: time.Duration(a.TokenTTL),
		Users: a.Users, UsersFile: repl.ReplaceAll(a.UsersFile, ""), UsersFileRefresh: time.Duration(a.UsersFileRefresh),
		Models:     a.modelNames(),
		Clients:    a.Clients,
		SigningAlg: a.SigningAlg, KeyRotation: time.Duration(a.KeyRotation), KeyRefresh: time.Duration(a.KeyRefresh),
		APIKeyTTL: time.Duration(a.APIKeyTTL), APIKeysRefresh: time.Duration(a.APIKeysRefresh),
		RefreshTokenTTL: time.Duration(a.RefreshTokenTTL),
		Storage:         a.storage(ctx.Storage()),
		Realm:           Realm,
		FormMaxBytes:    a.TokenMaxBodyBytes,
		FormTimeout:     time.Duration(a.TokenBodyTimeout),
		ClientAddr:      clientIP,
		Revocations:     a.tenants,
		LoginFailures:   a.tenants,
		OnIssued:        a.metrics.TokenIssued,
		OnFailure:       a.metrics.AuthFailure,
		Logger:          a.logger,
	}
	if a.SigningAlg == auth.AlgHS256 {
		secret := repl.ReplaceAll(a.HMACSecret, "")
		if a.HMACSecretFile != "" {
			b, err := os.ReadFile(repl.ReplaceAll(a.HMACSecretFile, ""))
			if err != nil {
				return cfg, fmt.Errorf("hmac_secret_file: %w", err)
			}
			secret = strings.TrimSpace(string(b))
		}
		cfg.HMACSecret = []byte(secret)
	}
	return cfg, nil
}
