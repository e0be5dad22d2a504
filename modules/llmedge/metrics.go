package llmedge

import (
	"github.com/llmedge/llmedge/pool"
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
