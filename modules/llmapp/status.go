package llmapp

import (
	"sort"
	"sync"
	"time"

	"go.opentelemetry.io/contrib/propagators/autoprop"
	"go.opentelemetry.io/otel"

	"github.com/llmedge/llmedge/gateway"
	"github.com/llmedge/llmedge/status"
)

// statusRecorder keeps the status page's windows for the whole process,
// so that a config reload (a new App) does not empty them.
var statusRecorder = status.NewRecorder()

var propagatorOnce sync.Once

// observability readies what operators see of a configuration: it returns
// the status recorder the gateway reports to, and makes the global
// propagator, with which backends pass the trace context to replicas, the
// one Caddy's tracing handler reads the client's with (W3C trace context
// and baggage, or what OTEL_PROPAGATORS says).
func observability() *status.Recorder {
	propagatorOnce.Do(func() { otel.SetTextMapPropagator(autoprop.NewTextMapPropagator()) })
	return statusRecorder
}

// StatusSnapshot is the status page's view of this configuration: every
// model's replicas as they are now, with the recorder's windows.
func (a *App) StatusSnapshot() *status.Snapshot {
	var ready map[string]gateway.ModelStatus
	if a.pipeline != nil {
		_, ready = a.pipeline.Gateway.Readiness()
	}
	now := time.Now()
	models := make([]status.Model, 0, len(a.models))
	for _, m := range a.models {
		sm := status.Model{Name: m.Name, Policy: m.Policy, QueueWaiting: m.Pool.Waiting()}
		if st, ok := ready[m.Name]; ok {
			sm.Source, sm.Ready, sm.Synced, sm.DiscoveryError = st.Source, st.Ready, st.Synced, st.DiscoveryError
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
	return statusRecorder.Snapshot(models)
}
