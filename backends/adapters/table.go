package adapters

import (
	"slices"
	"sync"
	"time"

	"github.com/llmedge/llmedge/backends/pool"
)

// Table is what a model's gateway knows of the LoRA adapters on each of
// its replicas, by replica URL: the adapters the engine lists as its
// models (read off the request path), the ones its metrics say the
// running and waiting requests use, the ones the gateway loaded itself
// since the last listing, when a request through this gateway last used
// each and how many use it now; and, per tenant, the adapters its
// requests caused to be loaded lately. It outlives a config reload (the
// glue keeps it by model name) and is safe for concurrent use.
//
// An engine forgets the adapters loaded at run time when it restarts, and
// another client may load or unload some: a listing read after the
// gateway's own load is the truth, one read before it is not.
type Table struct {
	mu      sync.RWMutex
	byURL   map[string]*entry
	tenants map[string][]tenantLoad
}

type entry struct {
	listed   map[string]bool
	listedAt time.Time // when the listing was asked for
	running  []string  // from the engine's metrics, until runUntil
	waiting  []string
	runUntil time.Time
	maxLoRA  int
	mine     map[string]time.Time // loaded by the gateway, when
	// used is when a request through this gateway last used each adapter
	// held (or when it was first seen held); inflight how many use it now.
	used     map[string]time.Time
	inflight map[string]int
	// loading are the loads under way here: they hold a slot.
	loading map[string]bool
}

// tenantLoad is one adapter a tenant's request caused to be loaded.
type tenantLoad struct {
	name string
	at   time.Time
}

// NewTable returns an empty table.
func NewTable() *Table {
	return &Table{byURL: map[string]*entry{}, tenants: map[string][]tenantLoad{}}
}

func (a *Table) entry(url string) *entry {
	e := a.byURL[url]
	if e == nil {
		e = &entry{listed: map[string]bool{}, mine: map[string]time.Time{},
			used: map[string]time.Time{}, inflight: map[string]int{}, loading: map[string]bool{}}
		a.byURL[url] = e
	}
	return e
}

// SetListed records the adapters url's engine listed in a listing asked
// for at at. The gateway's own loads from before at are settled by it.
func (a *Table) SetListed(url string, names []string, at time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	e := a.entry(url)
	if at.Before(e.listedAt) {
		return // an older listing answered late
	}
	clear(e.listed)
	for _, n := range names {
		e.listed[n] = true
		if _, ok := e.used[n]; !ok {
			e.used[n] = at // idle since it was first seen
		}
	}
	e.listedAt = at
	for n, t := range e.mine {
		if !t.After(at) {
			delete(e.mine, n)
		}
	}
	e.dropUnheld()
}

// dropUnheld forgets the use times of adapters no longer held.
func (e *entry) dropUnheld() {
	for n := range e.used {
		if !e.loaded(n) && e.inflight[n] == 0 {
			delete(e.used, n)
		}
	}
}

// SetRunning records the adapters of url's running and waiting requests,
// as its metrics told them, until until; maxLoRA is the engine's cap per
// batch (0: unknown). Those adapters are in use now, however their
// requests came (another gateway instance, another client): their idle
// time starts again.
func (a *Table) SetRunning(url string, running, waiting []string, maxLoRA int, until time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	e := a.entry(url)
	e.running, e.waiting, e.runUntil = slices.Clone(running), slices.Clone(waiting), until
	if maxLoRA > 0 {
		e.maxLoRA = maxLoRA
	}
	now := time.Now()
	for _, names := range [][]string{running, waiting} {
		for _, n := range names {
			if e.loaded(n) {
				e.used[n] = now
			}
		}
	}
}

// MarkLoaded records that the gateway loaded name on url just now.
func (a *Table) MarkLoaded(url, name string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	e := a.entry(url)
	now := time.Now()
	e.mine[name], e.used[name] = now, now
}

// Forget records that url does not have name (it said so to a request,
// or the gateway unloaded it): the engine restarted, or someone unloaded
// it.
func (a *Table) Forget(url, name string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if e := a.byURL[url]; e != nil {
		delete(e.listed, name)
		delete(e.mine, name)
		e.dropUnheld()
	}
}

// Retain forgets the replicas not in urls (they left the pool).
func (a *Table) Retain(urls []string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for u := range a.byURL {
		if !slices.Contains(urls, u) {
			delete(a.byURL, u)
		}
	}
}

// loaded reports whether e has name; call with a.mu held.
func (e *entry) loaded(name string) bool {
	if e == nil {
		return false
	}
	_, mine := e.mine[name]
	return e.listed[name] || mine
}

func (e *entry) isRunning(name string, now time.Time) bool {
	return e != nil && now.Before(e.runUntil) && (slices.Contains(e.running, name) || slices.Contains(e.waiting, name))
}

// inUse reports whether a request uses name on e now: through this
// gateway, or (the engine's metrics say) any other way.
func (e *entry) inUse(name string, now time.Time) bool {
	return e.inflight[name] > 0 || e.isRunning(name, now)
}

func (e *entry) count() int {
	if e == nil {
		return 0
	}
	n := len(e.listed)
	for name := range e.mine {
		if !e.listed[name] {
			n++
		}
	}
	for name := range e.loading {
		if !e.loaded(name) {
			n++
		}
	}
	return n
}

// Holders returns, among candidates, the replicas that have name loaded,
// and of those the ones whose requests use it right now (its weights are
// on the GPU: the best place for another).
func (a *Table) Holders(candidates []*pool.Replica, name string) (running, loaded []*pool.Replica) {
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

// Held reports whether some replica of the table holds name now.
func (a *Table) Held(name string) bool {
	a.mu.RLock()
	defer a.mu.RUnlock()
	for _, e := range a.byURL {
		if e.loaded(name) {
			return true
		}
	}
	return false
}

// LoadTarget picks, among candidates, the replica on which to load an
// adapter no candidate has: one with fewer than limit adapters loaded
// (limit <= 0: no cap), the fewest first, then the least loaded. Nil
// when every candidate is at the cap.
func (a *Table) LoadTarget(candidates []*pool.Replica, limit int) *pool.Replica {
	a.mu.RLock()
	defer a.mu.RUnlock()
	return a.loadTarget(candidates, limit)
}

// claim is LoadTarget that also holds the slot it found for name until
// unclaim: two loads at once never both take a replica's last slot.
func (a *Table) claim(candidates []*pool.Replica, limit int, name string) *pool.Replica {
	a.mu.Lock()
	defer a.mu.Unlock()
	r := a.loadTarget(candidates, limit)
	if r != nil {
		a.entry(r.URL).loading[name] = true
	}
	return r
}

// unclaim lets go of the slot claim held for name on url.
func (a *Table) unclaim(url, name string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if e := a.byURL[url]; e != nil {
		delete(e.loading, name)
	}
}

// loadTarget is LoadTarget; call with a.mu held.
func (a *Table) loadTarget(candidates []*pool.Replica, limit int) *pool.Replica {
	var best *pool.Replica
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

// begin counts a request using name on url until the returned end.
func (a *Table) begin(url, name string) (end func()) {
	a.mu.Lock()
	e := a.entry(url)
	e.inflight[name]++
	e.used[name] = time.Now()
	a.mu.Unlock()
	return func() {
		a.mu.Lock()
		defer a.mu.Unlock()
		e := a.entry(url)
		if e.inflight[name]--; e.inflight[name] <= 0 {
			delete(e.inflight, name)
		}
		e.used[name] = time.Now()
	}
}

// evictable tells whether an adapter idle for idleFor may make room.
type evictable func(name string, idleFor time.Duration) bool

// victim picks, among the candidates at limit, the adapter to unload to
// make room: one no request uses now and may evict allows, the longest
// idle first. Nil when there is none; wait then tells when the first
// adapter in the way will have been idle for idle (0: none will).
func (a *Table) victim(candidates []*pool.Replica, limit int, idle time.Duration, may evictable) (r *pool.Replica, name string, wait time.Duration) {
	a.mu.RLock()
	defer a.mu.RUnlock()
	now := time.Now()
	var oldest time.Time
	for _, c := range candidates {
		e := a.byURL[c.URL]
		if e == nil {
			continue
		}
		for n, used := range e.used {
			if !e.loaded(n) || e.inUse(n, now) {
				continue
			}
			idleFor := now.Sub(used)
			if !may(n, idleFor) {
				if left := idle - idleFor; left > 0 && (wait == 0 || left < wait) {
					wait = left
				}
				continue
			}
			if r == nil || used.Before(oldest) {
				r, name, oldest = c, n, used
			}
		}
	}
	return r, name, wait
}

// admitTenant records that tenant's request causes name to be loaded,
// unless tenant caused n other adapters to be loaded within window; then
// it tells how long until the oldest of those leaves the window. A name
// already counted in the window is free.
func (a *Table) admitTenant(tenant, name string, n int, window time.Duration, now time.Time) (ok bool, retry time.Duration) {
	a.mu.Lock()
	defer a.mu.Unlock()
	loads := slices.DeleteFunc(a.tenants[tenant], func(l tenantLoad) bool { return now.Sub(l.at) >= window })
	if slices.ContainsFunc(loads, func(l tenantLoad) bool { return l.name == name }) {
		a.tenants[tenant] = loads
		return true, 0
	}
	if len(loads) >= n {
		a.tenants[tenant] = loads
		return false, loads[0].at.Add(window).Sub(now)
	}
	a.tenants[tenant] = append(loads, tenantLoad{name: name, at: now})
	return true, 0
}

// View is one replica's adapters as the status page shows them.
type View struct {
	// Loaded are the adapters the replica has, sorted; Running those its
	// requests use now.
	Loaded  []string `json:"loaded"`
	Running []string `json:"running,omitempty"`
	// MaxLoRA is the engine's cap per batch, when its metrics say.
	MaxLoRA int `json:"max_lora,omitempty"`
}

// View returns what is known of url's adapters.
func (a *Table) View(url string) View {
	a.mu.RLock()
	defer a.mu.RUnlock()
	e := a.byURL[url]
	if e == nil {
		return View{}
	}
	v := View{Loaded: []string{}, MaxLoRA: e.maxLoRA}
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
