package fleet

import (
	"sort"
	"time"

	"github.com/llmedge/llmedge/backends/pool"
	"github.com/llmedge/llmedge/gateway"
	"github.com/llmedge/llmedge/metrics"
	"github.com/llmedge/llmedge/routing/prefix"
	"github.com/llmedge/llmedge/status"
)

// What the operators see of the fleet: the metrics' gauges (Fleet is a
// metrics.Source) and the status page's rows.

// ReplicaStates implements metrics.Source: replicas per model and state.
func (f *Fleet) ReplicaStates() map[string]map[string]int {
	out := map[string]map[string]int{}
	for _, m := range f.models {
		states := map[string]int{"usable": 0}
		for _, r := range m.Pool.Replicas() {
			states[replicaState(r)]++
		}
		out[m.Name] = states
	}
	return out
}

// BreakerStates implements metrics.Source: each replica's breaker state.
func (f *Fleet) BreakerStates() map[string]map[string]int {
	out := map[string]map[string]int{}
	for _, m := range f.models {
		states := map[string]int{}
		for _, r := range m.Pool.Replicas() {
			switch r.BreakerState() {
			case pool.StateHalfOpen:
				states[r.URL] = 1
			case pool.StateOpen:
				states[r.URL] = 2
			default:
				states[r.URL] = 0
			}
		}
		out[m.Name] = states
	}
	return out
}

func replicaState(r *pool.Replica) string {
	switch {
	case !r.Healthy():
		return "unhealthy"
	case r.BreakerState() == pool.StateOpen:
		return "open"
	case r.BreakerState() == pool.StateHalfOpen:
		return "half_open"
	case r.Slowness(time.Now()).State == pool.SlowEjected:
		return "slow_ejected"
	}
	return "usable"
}

// SlowReplicas implements metrics.SlowSource: where each replica stands in
// the detection of slow replicas.
func (f *Fleet) SlowReplicas() []metrics.SlowReplica {
	var out []metrics.SlowReplica
	now := time.Now()
	for _, m := range f.models {
		for _, r := range m.Pool.Replicas() {
			v := r.Slowness(now)
			out = append(out, metrics.SlowReplica{Model: m.Name, Replica: r.URL, Score: v.Score,
				State: int(v.State), Ejections: v.Ejections})
		}
	}
	return out
}

// EngineLoads implements metrics.Source: the fresh engine figures of every
// replica.
func (f *Fleet) EngineLoads() []metrics.EngineLoad {
	var out []metrics.EngineLoad
	now := time.Now()
	for _, m := range f.models {
		for _, r := range m.Pool.Replicas() {
			if l, ok := r.EngineLoad(); ok {
				out = append(out, metrics.EngineLoad{Model: m.Name, Replica: r.URL,
					Running: l.Running, Waiting: l.Waiting, KVUsage: l.KVUsage, Age: now.Sub(l.At)})
			}
		}
	}
	return out
}

// PrefixStats implements metrics.Source: the figures of the models whose
// policy keeps a prefix index.
func (f *Fleet) PrefixStats() map[string]metrics.PrefixStats {
	out := map[string]metrics.PrefixStats{}
	for _, m := range f.models {
		if st, ok := prefixStats(m.Pool.Policy()); ok {
			out[m.Name] = metrics.PrefixStats{HitRate: st.HitRate(), Blocks: st.Blocks, MemoryBytes: st.MemoryBytes}
		}
	}
	return out
}

// PrefixIndexed is implemented by policies that keep a prefix index.
type PrefixIndexed interface {
	PrefixStats() prefix.Stats
}

// Wrapper is implemented by policies that wrap another (session
// affinity): the fleet looks through them for a prefix index.
type Wrapper interface {
	Unwrap() pool.Policy
}

// prefixStats finds the prefix index of a policy, through wrappers.
func prefixStats(p pool.Policy) (prefix.Stats, bool) {
	for p != nil {
		if s, ok := p.(PrefixIndexed); ok {
			return s.PrefixStats(), true
		}
		w, ok := p.(Wrapper)
		if !ok {
			break
		}
		p = w.Unwrap()
	}
	return prefix.Stats{}, false
}

// Status is the status page's view of every model's replicas as they
// are now; ready is the gateway's readiness by model.
func (f *Fleet) Status(ready map[string]gateway.ModelStatus) []status.Model {
	now := time.Now()
	models := make([]status.Model, 0, len(f.models))
	for _, m := range f.models {
		sm := status.Model{Name: m.Name, Policy: m.Policy, QueueWaiting: m.Pool.Waiting(),
			Aliases: m.Aliases, Fallbacks: m.Fallbacks, Overload: overloadStatus(m.Pool, m.BatchRunning())}
		for _, sh := range m.Rollout {
			sm.Rollout = append(sm.Rollout, status.Share{Model: sh.Model, Weight: sh.Weight})
		}
		if a := m.Adapters; a != nil {
			sm.Adapters = &status.Adapters{Names: append([]string{}, a.Names...), Dynamic: a.Dynamic, Cap: a.EffectiveCap()}
		}
		if st, ok := ready[m.Name]; ok {
			sm.Source, sm.Ready, sm.Synced, sm.DiscoveryError = st.Source, st.Ready, st.Synced, st.DiscoveryError
			sm.Required, sm.Routable, sm.Via = st.Required, st.Routable, st.Via
			if !st.Ready {
				sm.NotReady = st.Reason
			}
		}
		pst, hasIndex := prefixStats(m.Pool.Policy())
		perReplica := map[string]int{}
		if hasIndex {
			rate := pst.HitRate()
			sm.PrefixHitRate = &rate
			for i, r := range pst.Replicas {
				perReplica[r.Replica] = i
			}
		}
		replicas := m.Pool.Replicas()
		sm.Replicas = make([]status.Replica, 0, len(replicas))
		for _, r := range replicas {
			sr := status.Replica{
				URL: r.PublicURL(), State: replicaState(r), Healthy: r.Healthy(), Breaker: r.BreakerState().String(),
				InFlight: r.Outstanding(), Served: r.Served(), Weight: r.EffectiveWeight(), MaxConcurrency: r.MaxConcurrency,
			}
			if l, ok := r.EngineLoad(); ok {
				e := &status.Engine{Running: l.Running, Waiting: l.Waiting, AgeSeconds: now.Sub(l.At).Seconds()}
				if l.KVUsage >= 0 {
					kv := l.KVUsage
					e.KVCacheUsage = &kv
				}
				sr.Engine = e
			}
			if a := m.Adapters; a != nil {
				v := a.Known.View(r.URL)
				sr.Adapters = &status.ReplicaAdapters{Loaded: v.Loaded, Running: v.Running}
				if sr.Adapters.Loaded == nil {
					sr.Adapters.Loaded = []string{}
				}
				if sr.Adapters.Running == nil {
					sr.Adapters.Running = []string{}
				}
			}
			if v := r.Slowness(now); v.Score > 0 || v.State != pool.SlowOK {
				sr.Slow = v.State.String()
				if v.Score > 0 {
					score := v.Score
					sr.LatencyScore = &score
				}
				if v.State == pool.SlowEjected {
					until := v.Until.UTC().Truncate(time.Millisecond)
					sr.SlowUntil = &until
				}
			}
			if i, ok := perReplica[r.URL]; ok {
				rate, blocks := pst.Replicas[i].HitRate(), pst.Replicas[i].Blocks
				sr.PrefixHitRate, sr.PrefixBlocks = &rate, &blocks
			}
			sm.Replicas = append(sm.Replicas, sr)
		}
		// A stable order, so that rows do not jump between refreshes.
		sort.Slice(sm.Replicas, func(i, j int) bool { return sm.Replicas[i].URL < sm.Replicas[j].URL })
		models = append(models, sm)
	}
	return models
}

// ReplicaAdapters implements metrics.AdapterSource: the adapters each
// replica of a model with adapters holds.
func (f *Fleet) ReplicaAdapters() []metrics.ReplicaAdapters {
	var out []metrics.ReplicaAdapters
	for _, m := range f.models {
		if m.Adapters == nil {
			continue
		}
		for _, r := range m.Pool.Replicas() {
			v := m.Adapters.Known.View(r.URL)
			out = append(out, metrics.ReplicaAdapters{Model: m.Name, Replica: r.URL, Loaded: len(v.Loaded), Running: len(v.Running)})
		}
	}
	return out
}

var (
	_ metrics.Source        = (*Fleet)(nil)
	_ metrics.AdapterSource = (*Fleet)(nil)
	_ metrics.SlowSource    = (*Fleet)(nil)
)
