package llmapp

import "github.com/llmedge/llmedge/metrics"

// The replica gauges are read from the fleet when Prometheus scrapes; the
// metrics are registered before the fleet is built, so the app answers
// for it.

// ReplicaStates implements metrics.Source.
func (a *App) ReplicaStates() map[string]map[string]int {
	if a.fleet == nil {
		return nil
	}
	return a.fleet.ReplicaStates()
}

// BreakerStates implements metrics.Source.
func (a *App) BreakerStates() map[string]map[string]int {
	if a.fleet == nil {
		return nil
	}
	return a.fleet.BreakerStates()
}

// EngineLoads implements metrics.Source.
func (a *App) EngineLoads() []metrics.EngineLoad {
	if a.fleet == nil {
		return nil
	}
	return a.fleet.EngineLoads()
}

// PrefixStats implements metrics.Source.
func (a *App) PrefixStats() map[string]metrics.PrefixStats {
	if a.fleet == nil {
		return nil
	}
	return a.fleet.PrefixStats()
}

// ReplicaAdapters implements metrics.AdapterSource.
func (a *App) ReplicaAdapters() []metrics.ReplicaAdapters {
	if a.fleet == nil {
		return nil
	}
	return a.fleet.ReplicaAdapters()
}

var (
	_ metrics.Source        = (*App)(nil)
	_ metrics.AdapterSource = (*App)(nil)
	_ metrics.SlowSource    = (*App)(nil)
)

// SlowReplicas implements metrics.SlowSource.
func (a *App) SlowReplicas() []metrics.SlowReplica {
	if a.fleet == nil {
		return nil
	}
	return a.fleet.SlowReplicas()
}
