package tenancy

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/llmedge/llmedge/revocation"
)

// loadRevocations reads the revoked tokens before the configuration
// serves, from Redis when configured, else from Caddy's storage, into the
// process's list.
func (s *Service) loadRevocations(ctx context.Context) error {
	v, _, err := s.cfg.Kept.LoadOrNew(revokedKey, func() (any, error) { return &revocation.List{}, nil })
	if err != nil {
		return err
	}
	list := v.(*revocation.List)
	maxLife := s.cfg.MaxTokenLifetime
	var backend revocation.Backend
	if s.state.client != nil {
		backend = &revocation.RedisBackend{Client: s.state.client, Prefix: s.prefix(), MaxLifetime: maxLife}
	} else {
		backend = &revocation.StorageBackend{Storage: s.cfg.Storage, MaxLifetime: maxLife}
	}
	poll := s.cfg.RevocationRefresh
	if poll <= 0 {
		poll = DefaultRevocationRefresh
	}
	logger := s.logger
	s.sync = revocation.NewSync(list, backend, revocation.Options{Poll: poll, MaxLifetime: maxLife,
		OnError: func(op string, err error) {
			if op == "add" {
				logger.Error("a revocation could not be shared with the other instances (it holds on this one)", zap.Error(err))
			} else {
				logger.Debug("reading the revocations failed; keeping the ones known", zap.Error(err))
			}
		}})
	if err := s.sync.Load(ctx); err != nil {
		s.logger.Warn("could not read the revoked tokens; starting with those this process knows, retrying in the background", zap.Error(err))
	}
	return nil
}

// Revoked reports whether a token of user with id jti, issued at iat, is
// revoked (the token itself, or every token of its user issued before a
// cutoff).
func (s *Service) Revoked(user, jti string, iat time.Time) bool {
	return s.sync.List.Revoked(user, jti, iat)
}

// RevokeUser refuses every token issued to user before now, on every
// instance; kind names why, for the metrics ("user", "disabled_user"). An
// error means the other instances may not know yet (this one does).
func (s *Service) RevokeUser(ctx context.Context, user, kind string) (time.Time, error) {
	cut := revocation.Cutoff(time.Now())
	s.metrics.Revoked(kind)
	err := s.sync.Revoke(ctx, revocation.Entry{User: user, Before: cut})
	msg := "revoked a user's tokens"
	if kind == "disabled_user" {
		msg = "revoked the tokens of a user disabled or removed from the users file"
	}
	s.logger.Info(msg, zap.String("user", user), zap.Time("issued_before", cut), zap.Bool("shared", err == nil))
	return cut, err
}

// RevokeToken refuses the token with id jti until expires, on every
// instance; a zero expires means the longest a token can live from now.
func (s *Service) RevokeToken(ctx context.Context, jti string, expires time.Time) (time.Time, error) {
	if expires.IsZero() {
		expires = time.Now().Add(s.cfg.MaxTokenLifetime)
	}
	s.metrics.Revoked("token")
	err := s.sync.Revoke(ctx, revocation.Entry{JTI: jti, Expires: expires})
	s.logger.Info("revoked a token", zap.String("jti", jti), zap.Bool("shared", err == nil))
	return expires, err
}
