package pool

import (
	"slices"
	"sync"
	"time"
)

// Adapters is what a model's gateway knows of the LoRA adapters on each
// of its replicas, by replica URL: the adapters the engine lists as its
// models (read off the request path), the ones its metrics say the
// running and waiting requests use, and the ones the gateway loaded
// itself since the last listing. It is safe for concurrent use.
//
// An engine forgets the adapters loaded at run time when it restarts, and
// another client may load or unload some: a listing read after the
// gateway's own load is the truth, one read before it is not.
type Adapters struct {
	mu    sync.RWMutex
	byURL map[string]*adapterEntry
}

type adapterEntry struct {
	listed   map[string]bool
	listedAt time.Time // when the listing was asked for
	running  []string  // from the engine's metrics, until runUntil
	waiting  []string
	runUntil time.Time
	maxLoRA  int
	mine     map[string]time.Time // loaded by the gateway, when
}

// NewAdapters returns an empty table.
func NewAdapters() *Adapters { return &Adapters{byURL: map[string]*adapterEntry{}} }

func (a *Adapters) entry(url string) *adapterEntry {
	e := a.byURL[url]
	if e == nil {
		e = &adapterEntry{listed: map[string]bool{}, mine: map[string]time.Time{}}
		a.byURL[url] = e
	}
	return e
}

// SetListed records the adapters url's engine listed in a listing asked
// for at at. The gateway's own loads from before at are settled by it.
func (a *Adapters) SetListed(url string, names []string, at time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	e := a.entry(url)
	if at.Before(e.listedAt) {
		return // an older listing answered late
	}
	clear(e.listed)
	for _, n := range names {
		e.listed[n] = true
	}
	e.listedAt = at
	for n, t := range e.mine {
		if !t.After(at) {
			delete(e.mine, n)
		}
	}
}

// SetRunning records the adapters of url's running and waiting requests,
// as its metrics told them, until until; maxLoRA is the engine's cap per
// batch (0: unknown).
func (a *Adapters) SetRunning(url string, running, waiting []string, maxLoRA int, until time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	e := a.entry(url)
	e.running, e.waiting, e.runUntil = slices.Clone(running), slices.Clone(waiting), until
	if maxLoRA > 0 {
		e.maxLoRA = maxLoRA
	}
}

// MarkLoaded records that the gateway loaded name on url just now.
func (a *Adapters) MarkLoaded(url, name string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.entry(url).mine[name] = time.Now()
}

// Forget records that url does not have name (it said so to a request):
// the engine restarted, or someone unloaded it.
func (a *Adapters) Forget(url, name string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if e := a.byURL[url]; e != nil {
		delete(e.listed, name)
		delete(e.mine, name)
	}
}

// Retain forgets the replicas not in urls (they left the pool).
func (a *Adapters) Retain(urls []string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for u := range a.byURL {
		if !slices.Contains(urls, u) {
			delete(a.byURL, u)
		}
	}
}

// loaded reports whether e has name; call with a.mu held.
func (e *adapterEntry) loaded(name string) bool {
	if e == nil {
		return false
	}
	_, mine := e.mine[name]
	return e.listed[name] || mine
}

func (e *adapterEntry) isRunning(name string, now time.Time) bool {
	return e != nil && now.Before(e.runUntil) && (slices.Contains(e.running, name) || slices.Contains(e.waiting, name))
}

func (e *adapterEntry) count() int {
	if e == nil {
		return 0
	}
	n := len(e.listed)
	for name := range e.mine {
		if !e.listed[name] {
			n++
		}
	}
	return n
}

// Holders returns, among candidates, the replicas that have name loaded,
// and of those the ones whose requests use it right now (its weights are
// on the GPU: the best place for another).
func (a *Adapters) Holders(candidates []*Replica, name string) (running, loaded []*Replica) {
	a.mu.RLock()
	defer a.mu.RUnlock()
	now := time.Now()
	for _, r := range candidates {
		e := a.byURL[r.URL]
		if !e.loaded(name) && !e.isRunning(name, now) {
			continue
		}
		loaded = append(loaded, r)
		if e.isRunning(name, now) {
			running = append(running, r)
		}
	}
	return running, loaded
}

// Usable filters replicas down to those a request could go to now:
// healthy, breaker not open, below their concurrency cap, not in exclude.
func Usable(replicas, exclude []*Replica) []*Replica {
	out := make([]*Replica, 0, len(replicas))
	for _, r := range replicas {
		if r.Healthy() && !r.breakerOpen() && !slices.Contains(exclude, r) {
			out = append(out, r)
		}
	}
	return out
}

// Full reports whether r is at its concurrency cap.
func (r *Replica) Full() bool { return r.full() }

// LoadTarget picks, among candidates, the replica on which to load an
// adapter no candidate has: one with fewer than limit adapters loaded
// (limit <= 0: no cap), the fewest first, then the least loaded. Nil
// when every candidate is at the cap.
func (a *Adapters) LoadTarget(candidates []*Replica, limit int) *Replica {
	a.mu.RLock()
	defer a.mu.RUnlock()
	var best *Replica
	bestCount, bestLoad := 0, 0.0
	for _, r := range candidates {
		n := a.byURL[r.URL].count()
		if limit > 0 && n >= limit {
			continue
		}
		l := r.Load()
		if best == nil || n < bestCount || (n == bestCount && l < bestLoad) {
			best, bestCount, bestLoad = r, n, l
		}
	}
	return best
}

// AdapterView is one replica's adapters as the status page shows them.
type AdapterView struct {
	// Loaded are the adapters the replica has, sorted; Running those its
	// requests use now.
	Loaded  []string `json:"loaded"`
	Running []string `json:"running,omitempty"`
	// MaxLoRA is the engine's cap per batch, when its metrics say.
	MaxLoRA int `json:"max_lora,omitempty"`
}

// View returns what is known of url's adapters.
func (a *Adapters) View(url string) AdapterView {
	a.mu.RLock()
	defer a.mu.RUnlock()
	e := a.byURL[url]
	if e == nil {
		return AdapterView{}
	}
	v := AdapterView{Loaded: []string{}, MaxLoRA: e.maxLoRA}
	for n := range e.listed {
		v.Loaded = append(v.Loaded, n)
	}
	for n := range e.mine {
		if !e.listed[n] {
			v.Loaded = append(v.Loaded, n)
		}
	}
	slices.Sort(v.Loaded)
	if time.Now().Before(e.runUntil) {
		v.Running = slices.Clone(e.running)
	}
	return v
}
