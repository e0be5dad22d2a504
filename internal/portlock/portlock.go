// Package portlock keeps two gateway processes from serving one address.
//
// Caddy listens with SO_REUSEPORT, so a second process started on the
// same port binds without a word and the kernel splits connections between
// the two: clients then meet two certificates, two sets of signing keys and
// two sets of users at random. Before serving, a process takes a lock
// named after each address it serves; a second process fails to take it
// and can say so. The lock is an abstract Unix socket on Linux (no file
// left behind, released by the kernel when the process dies, however it
// dies); elsewhere there is no lock.
package portlock

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
)

// ErrHeld is returned when another process holds the lock of an address.
var ErrHeld = errors.New("another process serves this address")

var (
	mu   sync.Mutex
	held = map[string]*lock{}
)

type lock struct {
	closer io.Closer
	refs   int
}

// Acquire takes the lock of address (as Caddy writes it, e.g.
// "tcp/:8443") for this process. Locks are counted, so the configurations
// of a reload share them; release gives one back, and the last release
// frees the address.
func Acquire(app, address string) (release func(), err error) {
	name := app + "/" + strings.TrimSpace(address)
	mu.Lock()
	defer mu.Unlock()
	l, ok := held[name]
	if !ok {
		c, err := bind(name)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", address, err)
		}
		l = &lock{closer: c}
		held[name] = l
	}
	l.refs++
	var once sync.Once
	return func() {
		once.Do(func() {
			mu.Lock()
			defer mu.Unlock()
			if l.refs--; l.refs == 0 {
				_ = l.closer.Close()
				delete(held, name)
			}
		})
	}, nil
}
