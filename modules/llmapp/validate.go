package llmapp

import (
	"context"
	"io/fs"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/caddyserver/certmagic"
)

// validating is set by `llmedge validate` before the configuration is
// loaded: a validation must leave nothing behind, so the app then opens
// no ledger and writes nothing to the storage (new signing keys and
// secrets are made, used for the check, and forgotten).
var validating atomic.Bool

// SetValidating makes every configuration this process loads a dry run
// (llmedge validate).
func SetValidating() { validating.Store(true) }

// storage is the storage the app's services read and write: the
// configured one, or while validating a dry layer over it.
func (a *App) storage(s certmagic.Storage) certmagic.Storage {
	if !validating.Load() {
		return s
	}
	if a.dry == nil {
		a.dry = &dryStorage{under: s, wrote: map[string][]byte{}, deleted: map[string]bool{}}
	}
	return a.dry
}

// dryStorage reads the storage under it and keeps its own writes in
// memory; its locks lock nothing (a validation runs alone, and a file
// storage's lock is a file).
type dryStorage struct {
	under   certmagic.Storage
	mu      sync.Mutex
	wrote   map[string][]byte
	deleted map[string]bool
}

func (s *dryStorage) Lock(context.Context, string) error   { return nil }
func (s *dryStorage) Unlock(context.Context, string) error { return nil }

func (s *dryStorage) Store(_ context.Context, key string, value []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.wrote[key] = append([]byte(nil), value...)
	delete(s.deleted, key)
	return nil
}

func (s *dryStorage) Load(ctx context.Context, key string) ([]byte, error) {
	s.mu.Lock()
	v, ok := s.wrote[key]
	gone := s.deleted[key]
	s.mu.Unlock()
	switch {
	case ok:
		return append([]byte(nil), v...), nil
	case gone:
		return nil, fs.ErrNotExist
	}
	return s.under.Load(ctx, key)
}

func (s *dryStorage) Delete(_ context.Context, key string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.wrote, key)
	s.deleted[key] = true
	return nil
}

func (s *dryStorage) Exists(ctx context.Context, key string) bool {
	_, err := s.Load(ctx, key)
	return err == nil
}

func (s *dryStorage) List(ctx context.Context, prefix string, recursive bool) ([]string, error) {
	keys, err := s.under.List(ctx, prefix, recursive)
	if err != nil && len(s.wrote) == 0 {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := keys[:0:0]
	for _, k := range keys {
		if !s.deleted[k] {
			out = append(out, k)
		}
	}
	for k := range s.wrote {
		if strings.HasPrefix(k, strings.TrimSuffix(prefix, "/")+"/") {
			out = append(out, k)
		}
	}
	return out, nil
}

func (s *dryStorage) Stat(ctx context.Context, key string) (certmagic.KeyInfo, error) {
	s.mu.Lock()
	v, ok := s.wrote[key]
	gone := s.deleted[key]
	s.mu.Unlock()
	switch {
	case ok:
		return certmagic.KeyInfo{Key: key, Size: int64(len(v)), IsTerminal: true}, nil
	case gone:
		return certmagic.KeyInfo{}, fs.ErrNotExist
	}
	return s.under.Stat(ctx, key)
}
