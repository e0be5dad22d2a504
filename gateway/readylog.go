package gateway

import (
	"sort"
	"sync"

	"go.uber.org/zap"
)

// ReadyLog remembers the readiness last seen, so that a change is logged
// once, when it happens, rather than on every probe: a model that goes
// down is one warning with its reason, one that comes back one info line;
// the instance likewise. Kept across reloads, it does not log again what
// the previous configuration already said.
type ReadyLog struct {
	mu       sync.Mutex
	seen     bool
	instance bool
	models   map[string]bool
}

// ObserveReadiness logs what changed since the last report; a Gateway
// without a ReadyLog logs nothing.
func (g *Gateway) ObserveReadiness(rep *Report) {
	if g.ReadyLog != nil {
		g.ReadyLog.Observe(g.logger(), rep)
	}
}

// Observe logs the changes rep shows against the last report observed.
// Before the first, every model counts as ready: one that is not is
// logged.
func (l *ReadyLog) Observe(logger *zap.Logger, rep *Report) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.models == nil {
		l.models = make(map[string]bool, len(rep.Models))
	}
	names := make([]string, 0, len(rep.Models))
	for name := range rep.Models {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		st := rep.Models[name]
		was, ok := l.models[name]
		if !ok {
			was = true
		}
		l.models[name] = st.Ready
		switch {
		case was && !st.Ready:
			fields := []zap.Field{zap.String("model_type", name), zap.String("reason", st.Reason), zap.Bool("required", st.Required)}
			if st.Via != "" {
				fields = append(fields, zap.String("served_by", st.Via))
			}
			logger.Warn("model not ready", fields...)
		case !was && st.Ready:
			logger.Info("model ready again", zap.String("model_type", name))
		}
	}
	for name := range l.models {
		if _, ok := rep.Models[name]; !ok {
			delete(l.models, name) // gone with a reload: it starts afresh if it returns
		}
	}
	ready := rep.Ready()
	was := l.instance || !l.seen
	l.seen, l.instance = true, ready
	switch {
	case was && !ready:
		logger.Warn("instance not ready", zap.Strings("reasons", rep.Detail))
	case !was && ready:
		logger.Info("instance ready again")
	}
}
