package llmapp

import (
	"time"

	"go.uber.org/zap"

	"github.com/llmedge/llmedge/gateway"
)

// readyLogKey keeps the readiness last logged for the whole process: a
// reload does not warn again about a model the last configuration
// already reported down.
const readyLogKey = "readiness.log"

// readinessEvery spaces the checks that log changes of readiness when
// nobody probes /readyz.
const readinessEvery = time.Second

// readyLog is the process's ReadyLog.
func readyLog() *gateway.ReadyLog {
	v, _, _ := kept.LoadOrNew(readyLogKey, func() (any, error) { return new(gateway.ReadyLog), nil })
	return v.(*gateway.ReadyLog)
}

// watchReadiness logs each change of readiness within a second of it,
// probed or not, until stop is closed; done is closed on return.
func watchReadiness(g *gateway.Gateway, stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	t := time.NewTicker(readinessEvery)
	defer t.Stop()
	for {
		g.ObserveReadiness(g.Report())
		select {
		case <-stop:
			return
		case <-t.C:
		}
	}
}

// ReadinessReport is the operators' view of this configuration's
// readiness (the admin API's /llmedge/readyz, the status page).
func (a *App) ReadinessReport() *gateway.Report {
	if a.pipeline == nil {
		return nil
	}
	return a.pipeline.Gateway.Report()
}

// warnEmptyModels warns, when the configuration loads (and when it is
// validated), about each model whose static list of replicas is empty (a
// placeholder replaced by nothing, a model line without `static`): it
// will answer 503 until the configuration gives it replicas.
func (a *App) warnEmptyModels() {
	for name, m := range a.fleet.Models() {
		if len(m.Rollout) > 0 || m.Discovery == nil || m.Discovery().Source != "static" || len(m.Pool.Replicas()) > 0 {
			continue
		}
		a.logger.Warn("model has no replicas: its requests get 503 until the configuration gives it some",
			zap.String("model_type", name))
	}
}
