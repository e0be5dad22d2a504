package llmapp

import (
	"time"

	"github.com/llmedge/llmedge/metrics"
	"github.com/llmedge/llmedge/pool"
	"github.com/llmedge/llmedge/routing"
	"github.com/llmedge/llmedge/routing/prefix"
)

// ReplicaStates implements metrics.Source: replicas per model and state.
func (a *App) ReplicaStates() map[string]map[string]int {
	out := map[string]map[string]int{}
	for _, m := range a.models {
		states := map[string]int{"usable": 0}
		for _, r := range m.Pool.Replicas() {
			states[replicaState(r)]++
		}
		out[m.Name] = states
	}
	return out
}

// BreakerStates implements metrics.Source: each replica's breaker state.
func (a *App) BreakerStates() map[string]map[string]int {
	out := map[string]map[string]int{}
	for _, m := range a.models {
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
	}
	return "usable"
}

// EngineLoads implements metrics.Source: the fresh engine figures of every
// replica.
func (a *App) EngineLoads() []metrics.EngineLoad {
	var out []metrics.EngineLoad
	now := time.Now()
	for _, m := range a.models {
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
func (a *App) PrefixStats() map[string]metrics.PrefixStats {
	out := map[string]metrics.PrefixStats{}
	for _, m := range a.models {
		if st, ok := prefixStats(m.Pool.Policy()); ok {
			out[m.Name] = metrics.PrefixStats{HitRate: st.HitRate(), Blocks: st.Blocks, MemoryBytes: st.MemoryBytes}
		}
	}
	return out
}

// prefixStats finds the prefix index of a policy, through session
// affinity if it wraps one.
func prefixStats(p pool.Policy) (prefix.Stats, bool) {
	if a, ok := p.(*routing.Affinity); ok {
		p = a.Inner
	}
	if s, ok := p.(interface{ PrefixStats() prefix.Stats }); ok {
		return s.PrefixStats(), true
	}
	return prefix.Stats{}, false
}
