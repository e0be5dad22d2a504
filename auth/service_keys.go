package auth

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"
)

// loadKeys loads (or creates) the signing keys: from storage for EdDSA
// and ES256, from the configured secret for HS256.
func (s *Service) loadKeys(ctx context.Context) error {
	alg := s.cfg.SigningAlg
	switch alg {
	case "", AlgEdDSA, AlgES256:
		if alg == "" {
			alg = AlgEdDSA
		}
	case AlgHS256:
		ring, err := NewHMACKeyRing(s.cfg.HMACSecret)
		if err != nil {
			return fmt.Errorf("signing_alg HS256: %w", err)
		}
		s.keys = ring
		return nil
	default:
		return fmt.Errorf("signing_alg %q: want EdDSA, ES256 or HS256", alg)
	}
	s.stored = true
	ring, err := LoadOrCreateKeyRingAlg(ctx, s.cfg.Storage, keyStorageKey, alg)
	if err != nil {
		return fmt.Errorf("signing keys: %w", err)
	}
	if ring.ActiveAlg() != alg { // the operator changed the algorithm
		if ring, err = RotateKeyRing(ctx, s.cfg.Storage, keyStorageKey, alg, s.retireAfter()); err != nil {
			return fmt.Errorf("signing keys: switching to %s: %w", alg, err)
		}
		s.logger.Info("rotated the signing key to a new algorithm", zap.String("alg", alg), zap.String("kid", ring.ActiveKID()))
	}
	s.keys = ring
	return nil
}

// retireAfter is how long a replaced key must keep verifying: every token
// it signed must expire first, including tokens other instances signed
// with it before they refreshed.
func (s *Service) retireAfter() time.Duration {
	return s.cfg.TokenTTL + s.keyRefresh() + VerifyLeeway
}

func (s *Service) keyRefresh() time.Duration {
	if s.cfg.KeyRefresh > 0 {
		return s.cfg.KeyRefresh
	}
	return DefaultKeyRefresh
}

// refreshKeys reloads the ring from storage, rotating first when the
// active key is older than the key rotation period.
func (s *Service) refreshKeys(ctx context.Context) error {
	var ring *KeyRing
	var err error
	if s.cfg.KeyRotation > 0 {
		var rotated bool
		ring, rotated, err = RotateKeyRingIfOlder(ctx, s.cfg.Storage, keyStorageKey, s.keys.ActiveAlg(),
			s.cfg.KeyRotation, s.retireAfter())
		if rotated {
			s.logger.Info("rotated the signing key", zap.String("kid", ring.ActiveKID()))
		}
	} else {
		ring, err = LoadKeyRing(ctx, s.cfg.Storage, keyStorageKey)
	}
	if err != nil {
		return err
	}
	s.keys.Replace(ring)
	return nil
}

// RotateKeys makes a new signing key now; the old one keeps verifying
// until every token it signed has expired.
func (s *Service) RotateKeys(ctx context.Context) (*KeyRing, error) {
	if !s.stored {
		return nil, fmt.Errorf("HS256 keys come from the configured secret: change the secret to rotate")
	}
	ring, err := RotateKeyRing(ctx, s.cfg.Storage, keyStorageKey, s.keys.ActiveAlg(), s.retireAfter())
	if err != nil {
		return nil, err
	}
	s.keys.Replace(ring)
	s.logger.Info("rotated the signing key", zap.String("kid", ring.ActiveKID()))
	return ring, nil
}

// reloadOnUnknownKID is the verifier's Refresh: a token may carry the kid
// of a key another instance rotated in since our last refresh. The gate
// bounds the storage reads a flood of forged kids can cause.
func (s *Service) reloadOnUnknownKID() bool {
	if !s.stored || !s.kidGate.allow() {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ring, err := LoadKeyRing(ctx, s.cfg.Storage, keyStorageKey)
	if err != nil {
		return false
	}
	s.keys.Replace(ring)
	return true
}

// keyLoop refreshes (and, on schedule, rotates) the keys every key refresh
// period.
func (s *Service) keyLoop(ctx context.Context) {
	t := time.NewTicker(s.keyRefresh())
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := s.refreshKeys(ctx); err != nil && ctx.Err() == nil {
			s.logger.Warn("refreshing signing keys failed; keeping the current ones", zap.Error(err))
		}
	}
}
