package openaicompat

import (
	"sync"
	"sync/atomic"
	"time"
)

// unservedFor is how long a replica found not to serve a path gets its
// requests of that path translated (or counted elsewhere) before the path
// is tried again: an engine upgraded in place then serves it.
const unservedFor = 10 * time.Minute

// The replicas found not to serve a path, one set per path. They are shared
// by every Protocol of the process: what a replica serves is a fact about
// the replica, not about a configuration.
var (
	unservedMessages  notServed // /v1/messages
	unservedResponses notServed // /v1/responses
	uncounted         notServed // /v1/messages/count_tokens
)

// notServed maps the base URL of a replica found not to serve a path to
// when that was found. Every request of the path asks it, and almost
// always nothing is held: the count lets that answer come from one atomic
// load, without the allocation of a sync.Map lookup by string.
type notServed struct {
	n atomic.Int64 // entries held
	m sync.Map     // base URL → time.Time
}

// has reports whether baseURL was found not to serve the path within
// unservedFor of now; an older finding is forgotten.
func (s *notServed) has(baseURL string, now time.Time) bool {
	if s.n.Load() == 0 {
		return false
	}
	v, ok := s.m.Load(baseURL)
	if !ok {
		return false
	}
	if now.Sub(v.(time.Time)) < unservedFor {
		return true
	}
	if s.m.CompareAndDelete(baseURL, v) {
		s.n.Add(-1)
	}
	return false
}

// add records that baseURL did not serve the path at now.
func (s *notServed) add(baseURL string, now time.Time) {
	if _, loaded := s.m.Swap(baseURL, now); !loaded {
		s.n.Add(1)
	}
}

// forget drops what is known of baseURL.
func (s *notServed) forget(baseURL string) {
	if _, loaded := s.m.LoadAndDelete(baseURL); loaded {
		s.n.Add(-1)
	}
}
