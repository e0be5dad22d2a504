package tenancy

import (
	"context"
	"time"

	"github.com/llmedge/llmedge/auth"
)

// The failed logins are shared through the limits' Redis (the same
// connection, prefix and outage handling): Service is the token
// endpoint's auth.SharedFailures. Without Redis, or while it is down,
// every call fails and each instance counts alone.

// LoginFailed implements auth.SharedFailures.
func (s *Service) LoginFailed(ctx context.Context, key string, max int, window, maxBlock time.Duration) (time.Duration, error) {
	return s.state.limiter.LoginFailed(ctx, key, max, window, maxBlock)
}

// LoginBlocked implements auth.SharedFailures.
func (s *Service) LoginBlocked(ctx context.Context, key string) (time.Duration, error) {
	return s.state.limiter.LoginBlocked(ctx, key)
}

// LoginReset implements auth.SharedFailures.
func (s *Service) LoginReset(ctx context.Context, key string) error {
	return s.state.limiter.LoginReset(ctx, key)
}

var _ auth.SharedFailures = (*Service)(nil)
