package auth

import (
	"context"
	"math/rand/v2"
	"time"

	"go.uber.org/zap"
)

func (s *Service) apiKeysRefresh() time.Duration {
	if s.cfg.APIKeysRefresh > 0 {
		return s.cfg.APIKeysRefresh
	}
	return DefaultAPIKeysRefresh
}

// credentialsLoop reloads the API keys every refresh period (so creations
// and revocations made on other instances take effect), writes their
// last-use times back every minute, and removes expired refresh families
// every hour.
func (s *Service) credentialsLoop(ctx context.Context) {
	reload := time.NewTicker(s.apiKeysRefresh())
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
			if err := s.apiKeys.Reload(ctx); err != nil && ctx.Err() == nil {
				s.logger.Warn("reloading API keys failed; keeping the current ones", zap.Error(err))
			}
		case <-flush.C:
			if err := s.apiKeys.FlushUsage(ctx); err != nil && ctx.Err() == nil {
				s.logger.Warn("writing API keys' last use failed; will retry", zap.Error(err))
			}
		case <-sweep.C:
			sweep.Reset(refreshSweepEvery)
			if s.refresh == nil {
				continue
			}
			if n, err := s.refresh.Sweep(ctx); err != nil && ctx.Err() == nil {
				s.logger.Warn("removing expired refresh tokens failed", zap.Error(err))
			} else if n > 0 {
				s.logger.Info("removed expired refresh token families", zap.Int("families", n))
			}
		}
	}
}

// watchUsersFile applies every change of the users file, keeping the
// current users when the file does not load.
func (s *Service) watchUsersFile(ctx context.Context) {
	interval := s.cfg.UsersFileRefresh
	if interval <= 0 {
		interval = DefaultUsersFileRefresh
	}
	WatchUsersFile(ctx, s.cfg.UsersFile, interval,
		func(users []User) error {
			if err := s.users.Replace(s.allUsers(users)); err != nil {
				return err
			}
			s.logger.Info("reloaded the users file", zap.String("file", s.cfg.UsersFile), zap.Int("users", len(users)))
			s.mu.Lock()
			before := s.fileUsers
			s.fileUsers = users
			s.mu.Unlock()
			s.revokeDisabled(before, users)
			return nil
		},
		func(err error) {
			s.logger.Error("users file not reloaded; keeping the current users", zap.Error(err))
		})
}

// revokeDisabled revokes the tokens of the users a users-file reload
// disabled or removed, so that instances with their own copy of the file
// refuse them too.
func (s *Service) revokeDisabled(before, after []User) {
	if s.cfg.Revocations == nil {
		return
	}
	now := make(map[string]bool, len(after))
	for _, u := range after {
		now[u.Name] = !u.Disabled
	}
	for _, u := range before {
		if u.Disabled || now[u.Name] {
			continue
		}
		// The revocation logs itself, with why.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, _ = s.cfg.Revocations.RevokeUser(ctx, u.Name, "disabled_user")
		cancel()
	}
}
