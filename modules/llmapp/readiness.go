package llmapp

import (
	"time"

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
