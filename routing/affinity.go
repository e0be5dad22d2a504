package routing

import (
	"net/http"

	"github.com/cespare/xxhash/v2"

	"github.com/llmedge/llmedge/backends/pool"
)

// Affinity keeps a session on one replica: requests with the same key go
// to the same replica, found by rendezvous hashing over the candidates (a
// replica that leaves moves only its own sessions, one that comes takes
// only its share), as long as that replica's load stays within LoadFactor
// times the mean load plus one request — consistent hashing with bounded
// loads. Beyond the bound the session's next replica in hash order takes
// it; requests without a key are Inner's to place.
type Affinity struct {
	// Key returns the request's session key, "" when it has none.
	Key   func(*pool.Request) string
	Inner pool.Policy
	// LoadFactor bounds a session replica's load relative to the mean;
	// 0 means DefaultAffinityLoadFactor.
	LoadFactor float64
}

// DefaultAffinityLoadFactor bounds a session replica's load to 1.25 times
// the mean, the usual choice for consistent hashing with bounded loads: a
// session moves before its replica is much busier than the others.
const DefaultAffinityLoadFactor = 1.25

// Recorder is implemented by policies that learn from every decision (the
// prefix index): Affinity tells them where it sent a request, and they
// return the predicted cached share of the prompt there (negative when
// they do not predict).
type Recorder interface {
	Record(req *pool.Request, r *pool.Replica) float64
}

// Unwrap returns the policy that places requests without a session key.
func (a *Affinity) Unwrap() pool.Policy { return a.Inner }

// Select implements pool.Policy.
func (a *Affinity) Select(req *pool.Request, c []*pool.Replica) pool.Choice {
	key := a.Key(req)
	if key == "" {
		return a.Inner.Select(req, c)
	}
	lf := a.LoadFactor
	if lf <= 0 {
		lf = DefaultAffinityLoadFactor
	}
	var sum float64
	for _, r := range c {
		sum += r.Load()
	}
	bound := lf * (sum + 1) / float64(len(c))
	kh := xxhash.Sum64String(key)
	var best *pool.Replica
	var bestScore uint64
	for _, r := range c {
		if r.Load() > bound {
			continue
		}
		if s := mix(kh ^ xxhash.Sum64String(r.URL)); best == nil || s > bestScore {
			best, bestScore = r, s
		}
	}
	if best == nil { // every replica above the bound: cannot happen with a mean, but be safe
		return a.Inner.Select(req, c)
	}
	cached := -1.0
	if rec, ok := a.Inner.(Recorder); ok {
		cached = rec.Record(req, best)
	}
	return pool.Choice{Replica: best, Reason: pool.ReasonAffinity, Cached: cached}
}

// ReplicasChanged implements pool.ReplicaWatcher for Inner.
func (a *Affinity) ReplicasChanged(current []*pool.Replica) {
	if w, ok := a.Inner.(pool.ReplicaWatcher); ok {
		w.ReplicasChanged(current)
	}
}

// mix is splitmix64's finalizer: it spreads the combined hash's bits so
// that rendezvous scores of different replicas are independent.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// ByUser keys sessions by the authenticated principal.
func ByUser(req *pool.Request) string { return req.User }

// ByHeader keys sessions by a request header, e.g. X-Session-ID.
func ByHeader(name string) func(*pool.Request) string {
	name = http.CanonicalHeaderKey(name)
	return func(req *pool.Request) string {
		if req.Header == nil {
			return ""
		}
		return req.Header.Get(name)
	}
}

// ByCookie keys sessions by a cookie's value.
func ByCookie(name string) func(*pool.Request) string {
	return func(req *pool.Request) string {
		if req.Header == nil {
			return ""
		}
		for _, c := range req.Header.Values("Cookie") {
			cs, err := http.ParseCookie(c)
			if err != nil {
				continue
			}
			for _, ck := range cs {
				if ck.Name == name {
					return ck.Value
				}
			}
		}
		return ""
	}
}

var (
	_ pool.Policy         = (*Affinity)(nil)
	_ pool.ReplicaWatcher = (*Affinity)(nil)
)
