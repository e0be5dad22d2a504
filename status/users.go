package status

import (
	"cmp"
	"slices"
	"sync"
	"sync/atomic"
)

// MaxUsersPerBucket bounds the distinct users one bucket remembers; the
// requests of any further user in that bucket count under OtherUsers. It
// keeps the memory bounded (a few hundred bytes a user and bucket) when
// credentials are many, e.g. one API key per client.
const MaxUsersPerBucket = 10_000

// OtherUsers names the users beyond MaxUsersPerBucket in a bucket.
const OtherUsers = "(other users)"

// userRing is the users' ring of buckets.
type userRing struct {
	mu      sync.Mutex // taken to recycle a bucket only
	buckets [ringSize]userBucket
}

type userBucket struct {
	epoch atomic.Int64
	n     atomic.Int64 // distinct users stored
	users sync.Map     // user → *userCounts
}

type userCounts struct {
	requests, tokens           atomic.Uint64
	limit, busy, scope, errors atomic.Uint64
}

func (u *userRing) add(epoch int64, r Request) {
	b := &u.buckets[epoch%int64(ringSize)]
	if e := b.epoch.Load(); e != epoch {
		if e > epoch {
			return
		}
		u.mu.Lock()
		if b.epoch.Load() < epoch {
			b.users.Clear()
			b.n.Store(0)
			b.epoch.Store(epoch)
		}
		u.mu.Unlock()
		if b.epoch.Load() != epoch {
			return
		}
	}
	// A known user costs one lock-free map read; a new one in this bucket
	// one insertion.
	v, ok := b.users.Load(r.User)
	if !ok {
		key := r.User
		if b.n.Load() >= MaxUsersPerBucket {
			key = OtherUsers
		}
		var loaded bool
		if v, loaded = b.users.LoadOrStore(key, new(userCounts)); !loaded {
			b.n.Add(1)
		}
	}
	c := v.(*userCounts)
	c.requests.Add(1)
	if r.Tokens > 0 {
		c.tokens.Add(uint64(r.Tokens))
	}
	switch r.Refusal {
	case RefusalLimit:
		c.limit.Add(1)
	case RefusalBusy:
		c.busy.Add(1)
	case RefusalScope:
		c.scope.Add(1)
	}
	if r.Status >= 500 || r.StreamError {
		c.errors.Add(1)
	}
}

// User is one user's figures over Window.
type User struct {
	User     string `json:"user"`
	Requests uint64 `json:"requests"`
	Tokens   uint64 `json:"tokens"`
	// Refused counts the user's requests answered 403 or 429; Limit,
	// Busy and Scope split them by reason (see Refusal*).
	Refused uint64 `json:"refused"`
	Limit   uint64 `json:"limit"`
	Busy    uint64 `json:"busy"`
	Scope   uint64 `json:"scope"`
	// Errors counts the user's requests that failed on the gateway's or
	// the replicas' side (5xx, broken streams).
	Errors uint64 `json:"errors"`
}

// top returns the users of the last n epochs up to cur: the top k by
// tokens (then requests), and the top k by refusals.
func (u *userRing) top(cur int64, n, k int) (byTokens, refused []User) {
	all := map[string]*User{}
	for i := range u.buckets {
		b := &u.buckets[i]
		if e := b.epoch.Load(); e <= cur-int64(n) || e > cur {
			continue
		}
		b.users.Range(func(key, v any) bool {
			name := key.(string)
			c := v.(*userCounts)
			s := all[name]
			if s == nil {
				s = &User{User: name}
				all[name] = s
			}
			s.Requests += c.requests.Load()
			s.Tokens += c.tokens.Load()
			s.Limit += c.limit.Load()
			s.Busy += c.busy.Load()
			s.Scope += c.scope.Load()
			s.Errors += c.errors.Load()
			return true
		})
	}
	list := make([]User, 0, len(all))
	for _, s := range all {
		s.Refused = s.Limit + s.Busy + s.Scope
		list = append(list, *s)
	}
	slices.SortFunc(list, func(a, b User) int {
		return cmp.Or(cmp.Compare(b.Tokens, a.Tokens), cmp.Compare(b.Requests, a.Requests), cmp.Compare(a.User, b.User))
	})
	for _, s := range list {
		if len(byTokens) == k {
			break
		}
		if s.Requests > s.Refused { // a user who was only refused used nothing
			byTokens = append(byTokens, s)
		}
	}
	slices.SortFunc(list, func(a, b User) int {
		return cmp.Or(cmp.Compare(b.Refused, a.Refused), cmp.Compare(a.User, b.User))
	})
	for _, s := range list {
		if len(refused) == k || s.Refused == 0 {
			break
		}
		refused = append(refused, s)
	}
	return byTokens, refused
}
