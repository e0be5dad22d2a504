package llmapp

import (
	"sync"

	"github.com/caddyserver/caddy/v2"
	"github.com/prometheus/client_golang/prometheus"

	"go.opentelemetry.io/contrib/propagators/autoprop"
	"go.opentelemetry.io/otel"

	"github.com/llmedge/llmedge/gateway"
	"github.com/llmedge/llmedge/metrics"
	"github.com/llmedge/llmedge/status"
)

// recorderKey keeps the status page's windows for the whole process, so
// that a config reload (a new App) does not empty them. It is never let
// go of: the windows are the process's.
const recorderKey = "status.recorder"

// keptMetricsKey keeps the event metrics (counters, histograms) for the
// whole process: Caddy gives each configuration a registry of its own,
// and a reload must not start llmedge_* counters again at zero.
const keptMetricsKey = "metrics.kept"

// metricsRegistry is the configuration's registry, in which the process's
// kept event metrics are registered again rather than made anew.
func metricsRegistry(ctx caddy.Context) prometheus.Registerer {
	v, _, _ := kept.LoadOrNew(keptMetricsKey, func() (any, error) { return metrics.NewKept(), nil })
	return v.(*metrics.Kept).In(ctx.GetMetricsRegistry())
}

var propagatorOnce sync.Once

// observability readies what operators see of a configuration: it returns
// the status recorder the gateway reports to, and makes the global
// propagator, with which protocols pass the trace context to replicas, the
// one Caddy's tracing handler reads the client's with (W3C trace context
// and baggage, or what OTEL_PROPAGATORS says).
func observability() *status.Recorder {
	propagatorOnce.Do(func() { otel.SetTextMapPropagator(autoprop.NewTextMapPropagator()) })
	if v, ok := kept.Load(recorderKey); ok {
		return v.(*status.Recorder)
	}
	v, _, _ := kept.LoadOrNew(recorderKey, func() (any, error) { return status.NewRecorder(), nil })
	return v.(*status.Recorder)
}

// StatusSnapshot is the status page's view of this configuration: every
// model's replicas as they are now, with the recorder's windows.
func (a *App) StatusSnapshot() *status.Snapshot {
	var ready map[string]gateway.ModelStatus
	var readiness *status.Readiness
	if rep := a.ReadinessReport(); rep != nil {
		ready = rep.Models
		readiness = &status.Readiness{Status: rep.Status, Detail: rep.Detail}
		for _, c := range rep.Checks {
			readiness.Checks = append(readiness.Checks, status.ReadinessCheck{Name: c.Name, OK: c.OK, Detail: c.Detail})
		}
	}
	var models []status.Model
	if a.fleet != nil {
		models = a.fleet.Status(ready)
	}
	snap := observability().Snapshot(models)
	snap.Readiness = readiness
	snap.IdentityProviders = a.identityProviders()
	snap.RoutingShare = a.routingShareStatus()
	snap.Budgets = a.statusBudgets()
	if a.ledger != nil {
		snap.UsageToday = a.ledger.today.get(a.ledger.store)
	}
	if a.batches != nil {
		snap.Batches = a.batches.progress.get(a.batches.store)
	}
	return snap
}
