// Package keep holds the state that outlives a configuration: what a
// config reload must not lose or double (the replicas' breakers, the
// routing indexes, the Consul watches, the limit counters and their Redis
// connection, the revoked tokens, the status page's windows).
//
// A Store shares each value by key, with a reference count: the
// configuration being loaded takes what the running one holds (LoadOrNew),
// each lets go when it ends (Delete), and the value is destructed when the
// last one does. During a reload the old and new configurations overlap,
// so a value is never rebuilt while it is in use.
//
// The llmedge app owns the process's one Store and hands it to every part
// that keeps something; tests make their own. It is Caddy's UsagePool
// idea in plain Go, so that the packages below the Caddy glue can use it.
package keep

import (
	"fmt"
	"sort"
	"sync"
)

// Destructor is a kept value that releases something when the last user
// lets go of it (a goroutine, a connection).
type Destructor interface {
	Destruct() error
}

// Store shares values by key between the configurations that use them.
// The zero value is not usable: call New.
type Store struct {
	mu sync.Mutex
	m  map[string]*entry
}

type entry struct {
	v    any
	refs int
}

// New returns an empty Store.
func New() *Store { return &Store{m: map[string]*entry{}} }

// LoadOrNew returns the value under key, taking a reference to it; when
// there is none, it makes one with construct (under the store's lock, so
// two configurations never both make it). loaded reports whether the value
// existed. A failed construct stores nothing.
func (s *Store) LoadOrNew(key string, construct func() (any, error)) (v any, loaded bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.m[key]; ok {
		e.refs++
		return e.v, true, nil
	}
	v, err = construct()
	if err != nil {
		return nil, false, fmt.Errorf("keep %s: %w", key, err)
	}
	s.m[key] = &entry{v: v, refs: 1}
	return v, false, nil
}

// Delete lets go of one reference to key. The last one removes the value
// and, when it is a Destructor, destructs it (outside the store's lock,
// so a slow Destruct blocks no other key). deleted reports whether it was
// the last.
func (s *Store) Delete(key string) (deleted bool, err error) {
	s.mu.Lock()
	e, ok := s.m[key]
	if !ok {
		s.mu.Unlock()
		return false, nil
	}
	e.refs--
	if e.refs > 0 {
		s.mu.Unlock()
		return false, nil
	}
	delete(s.m, key)
	s.mu.Unlock()
	if d, ok := e.v.(Destructor); ok {
		return true, d.Destruct()
	}
	return true, nil
}

// Load returns the value under key without taking a reference, for a
// reader that holds none (an admin endpoint, a command).
func (s *Store) Load(key string) (any, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.m[key]
	if !ok {
		return nil, false
	}
	return e.v, true
}

// Keys lists the keys held, sorted: what outlives a reload, for the
// operators and for tests that check nothing leaks.
func (s *Store) Keys() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	keys := make([]string, 0, len(s.m))
	for k := range s.m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Refs is the number of references to key (0 when absent).
func (s *Store) Refs(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.m[key]; ok {
		return e.refs
	}
	return 0
}
