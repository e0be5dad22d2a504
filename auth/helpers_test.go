package auth

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"
)

// testNow is the fixed clock of the tests.
var testNow = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

func fixedNow() time.Time { return testNow }

// mustHash hashes pw at bcrypt.MinCost, to keep tests fast.
func mustHash(t testing.TB, pw string) string {
	t.Helper()
	h, err := HashPasswordCost(pw, bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// testKey returns a deterministic Ed25519 key for seed byte b.
func testKey(b byte) ed25519.PrivateKey {
	seed := make([]byte, ed25519.SeedSize)
	for i := range seed {
		seed[i] = b
	}
	return ed25519.NewKeyFromSeed(seed)
}

// memStorage is an in-memory Storage with certmagic's semantics.
type memStorage struct {
	mu     sync.Mutex
	data   map[string][]byte
	locks  map[string]chan struct{}
	stores int
	// loadErr, when set, is returned by Load.
	loadErr error
}

func newMemStorage() *memStorage {
	return &memStorage{data: map[string][]byte{}, locks: map[string]chan struct{}{}}
}

func (m *memStorage) Load(_ context.Context, key string) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.loadErr != nil {
		return nil, m.loadErr
	}
	b, ok := m.data[key]
	if !ok {
		return nil, fmt.Errorf("%s: %w", key, fs.ErrNotExist)
	}
	return append([]byte(nil), b...), nil
}

func (m *memStorage) Store(_ context.Context, key string, value []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.data[key] = append([]byte(nil), value...)
	m.stores++
	return nil
}

func (m *memStorage) Exists(_ context.Context, key string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.data[key]
	return ok
}

func (m *memStorage) Lock(ctx context.Context, name string) error {
	for {
		m.mu.Lock()
		ch, held := m.locks[name]
		if !held {
			m.locks[name] = make(chan struct{})
			m.mu.Unlock()
			return nil
		}
		m.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (m *memStorage) Unlock(_ context.Context, name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	ch, held := m.locks[name]
	if !held {
		return fmt.Errorf("unlock %s: not locked", name)
	}
	delete(m.locks, name)
	close(ch)
	return nil
}

var _ Storage = (*memStorage)(nil)

func (m *memStorage) Delete(_ context.Context, key string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k := range m.data {
		if k == key || strings.HasPrefix(k, key+"/") {
			delete(m.data, k)
		}
	}
	return nil
}

// List returns the keys directly under prefix (recursive: all below it).
func (m *memStorage) List(_ context.Context, prefix string, recursive bool) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var keys []string
	for k := range m.data {
		rest, ok := strings.CutPrefix(k, prefix+"/")
		if ok && (recursive || !strings.Contains(rest, "/")) {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("%s: %w", prefix, fs.ErrNotExist)
	}
	slices.Sort(keys)
	return keys, nil
}

var _ RefreshStorage = (*memStorage)(nil)
