package discovery

import (
	"context"
	"sync"
	"time"

	"go.uber.org/zap"
)

// published is what a watching source (Consul, DNS, Kubernetes) keeps of
// the set it last found and how it passes it on: the subscribers, the
// current set, whether the first one came, and the last error and sync
// for Status. A watcher embeds it and adds what its own loop needs,
// guarded by the same mu.
type published struct {
	mu       sync.Mutex // guards the fields below, and the embedding watcher's own; serializes deliveries
	subs     map[uint64]func([]Instance)
	nextSub  uint64
	current  []Instance
	synced   bool
	syncedCh chan struct{} // closed once the first set is delivered
	lastErr  error
	lastSync time.Time
}

// newPublished is an empty published set, not yet synced.
func newPublished() published {
	return published{subs: map[uint64]func([]Instance){}, syncedCh: make(chan struct{})}
}

// WaitSynced waits for the first answer until ctx ends, and reports
// whether it came.
func (p *published) WaitSynced(ctx context.Context) bool {
	select {
	case <-p.syncedCh:
		return true
	case <-ctx.Done():
		return false
	}
}

// Instances returns the current set and whether the watcher has synced.
func (p *published) Instances() ([]Instance, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.current, p.synced
}

// Subscribe implements Source.
func (p *published) Subscribe(fn func([]Instance)) func() {
	p.mu.Lock()
	defer p.mu.Unlock()
	id := p.nextSub
	p.nextSub++
	p.subs[id] = fn
	if p.synced {
		fn(p.current)
	}
	return func() {
		p.mu.Lock()
		delete(p.subs, id)
		p.mu.Unlock()
	}
}

// status is Status for a source of the given kind and service.
func (p *published) status(source, service string) Status {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := Status{Source: source, Service: service, Synced: p.synced, Instances: len(p.current), LastSync: p.lastSync}
	if p.lastErr != nil {
		st.LastError = p.lastErr.Error()
	}
	return st
}

// deliver passes list on to the subscribers unless it is the set they
// have, logging it as source's; p.mu is held.
func (p *published) deliver(list []Instance, logger *zap.Logger, source string) {
	if p.synced && equalInstances(p.current, list) {
		return // a wake-up or a change that does not touch the replicas
	}
	first := !p.synced
	p.current, p.synced = list, true
	logger.Info(source+" replicas updated", zap.Int("replicas", len(list)), zap.Strings("urls", urls(list)))
	for _, fn := range p.subs {
		fn(list)
	}
	if first {
		close(p.syncedCh) // after the deliveries: a synced watcher's subscribers have the set
	}
}
