package gateway

import (
	"net/http"
	"net/url"
	"sort"
	"strings"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/backends/pool"
)

// ModelStatus is one model's entry in the operators' readiness report.
type ModelStatus struct {
	// Ready: the model's own replicas can take a request (for a weighted
	// rollout: one of its models can).
	Ready bool `json:"ready"`
	// Routable: a request for the model is served now, by its own
	// replicas or, when they cannot, by one of its fallbacks (fallbacks
	// count only while they are on by default: fallback_default on).
	Routable bool `json:"routable"`
	// Via names the model that serves it while it cannot itself.
	Via string `json:"via,omitempty"`
	// Required: the instance is ready only while the model is routable.
	Required bool `json:"required,omitempty"`
	Replicas int  `json:"replicas"`
	// Usable counts the replicas requests can go to: not failing their
	// health probes, breaker not open.
	Usable int `json:"usable"`
	// Source is where the replicas come from: "static" or "consul".
	Source string `json:"source"`
	// Synced: discovery has answered at least once (always, for static).
	Synced bool `json:"synced"`
	// DiscoveryError is discovery's last error; the last-known-good
	// replicas stay in use meanwhile.
	DiscoveryError string `json:"discovery_error,omitempty"`
	Reason         string `json:"reason,omitempty"`
}

// Readiness reports, per model, whether it can serve requests; the bool
// is true when every model's own replicas can.
func (g *Gateway) Readiness() (bool, map[string]ModelStatus) {
	out := make(map[string]ModelStatus, len(g.Models))
	for name, m := range g.Models {
		st := ModelStatus{Source: "static", Synced: true, Required: m.Required}
		for _, r := range m.Pool.Replicas() {
			st.Replicas++
			if r.Healthy() && r.BreakerState() != pool.StateOpen {
				st.Usable++
			}
		}
		if m.Discovery != nil {
			ds := m.Discovery()
			st.Source, st.Synced, st.DiscoveryError = ds.Source, ds.Synced, ds.LastError
		}
		st.Ready = st.Synced && st.Usable > 0
		switch {
		case !st.Synced:
			st.Reason = "discovery has not synced"
			if st.DiscoveryError != "" {
				st.Reason += ": " + st.DiscoveryError
			}
		case st.Replicas == 0:
			st.Reason = "no replicas"
		case st.Usable == 0:
			st.Reason = "no usable replica: every one is failing its health checks or its circuit breaker is open"
		}
		out[name] = st
	}
	// A model with a weighted rollout has no replicas of its own: it is
	// ready when a share is, and counts its shares' replicas.
	for name, m := range g.Models {
		if len(m.Rollout) == 0 {
			continue
		}
		st := ModelStatus{Source: "rollout", Synced: true, Required: m.Required}
		for _, s := range m.Rollout {
			ts := out[s.Model]
			st.Replicas += ts.Replicas
			st.Usable += ts.Usable
			st.Ready = st.Ready || ts.Ready
		}
		if !st.Ready {
			st.Reason = "no model of its rollout is ready"
		}
		out[name] = st
	}
	all := true
	for name, st := range out {
		all = all && st.Ready
		st.Routable = st.Ready
		if !st.Ready && !g.FallbackOff {
			// The chain is flattened already (FallbackChains): the first
			// ready one is the one a request would reach.
			for _, f := range g.Models[name].Fallbacks {
				if out[f].Ready {
					st.Routable, st.Via = true, f
					break
				}
			}
		}
		out[name] = st
	}
	return all, out
}

// Dependency is a service the gateway relies on beyond its replicas,
// reported by the readiness report.
type Dependency interface {
	Name() string
	Check() DependencyStatus
}

// DependencyStatus is one dependency's entry in the readiness report.
type DependencyStatus struct {
	// Status is "up", "degraded" (unreachable, and the gateway works on
	// without it) or "down" (unreachable, and requests fail for it: the
	// instance is not ready).
	Status string `json:"status"`
	// Detail says what the gateway does meanwhile, or why it is down.
	Detail string `json:"detail,omitempty"`
}

// Check is one condition of the instance's readiness.
type Check struct {
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail,omitempty"`
}

// Words of the readiness answers.
const (
	StatusReady    = "ready"
	StatusDegraded = "degraded"
	StatusNotReady = "not ready"
)

// Report is the instance's readiness with its reasons: the operators'
// view (admin API, status page), never the public one.
type Report struct {
	// Status is "ready", "degraded" (ready, with a dependency or an
	// optional model down) or "not ready".
	Status string `json:"status"`
	// Checks are what the instance's readiness is made of: its
	// configuration, its dependencies (credentials, shared stores) and
	// its required models.
	Checks       []Check                     `json:"checks"`
	Models       map[string]ModelStatus      `json:"models"`
	Dependencies map[string]DependencyStatus `json:"dependencies,omitempty"`
	// Detail lists the failed checks' reasons, sorted.
	Detail []string `json:"detail,omitempty"`
}

// Ready reports whether the instance can serve.
func (r *Report) Ready() bool { return r.Status != StatusNotReady }

// Report says whether this instance can serve: its configuration is
// loaded (it answers), no dependency is down (its credentials can admit
// someone, its shared stores answer or it works without them), and every
// required model is routable. A model that is not required never makes
// the instance unready: a balancer would drain every instance at once for
// it, and the clients of every other model with them.
func (g *Gateway) Report() *Report {
	_, models := g.Readiness()
	rep := &Report{Models: models, Checks: []Check{{Name: "config", OK: true, Detail: "loaded"}}}
	degraded := false
	for _, d := range g.Dependencies {
		if rep.Dependencies == nil {
			rep.Dependencies = make(map[string]DependencyStatus, len(g.Dependencies))
		}
		st := d.Check()
		rep.Dependencies[d.Name()] = st
		c := Check{Name: d.Name(), OK: st.Status != "down", Detail: st.Detail}
		if !c.OK {
			rep.Detail = append(rep.Detail, d.Name()+": "+st.Detail)
		}
		degraded = degraded || st.Status == "degraded"
		rep.Checks = append(rep.Checks, c)
	}
	names := make([]string, 0, len(models))
	for name := range models {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		st := models[name]
		if !st.Required {
			degraded = degraded || !st.Routable
			continue
		}
		c := Check{Name: "model " + name, OK: st.Routable}
		switch {
		case !st.Routable:
			c.Detail = "required, and nothing routable: " + st.Reason
			rep.Detail = append(rep.Detail, "model '"+name+"': "+c.Detail)
		case st.Via != "":
			c.Detail = "served by its fallback '" + st.Via + "': " + st.Reason
			degraded = true
		}
		rep.Checks = append(rep.Checks, c)
	}
	sort.Strings(rep.Detail)
	switch {
	case len(rep.Detail) > 0:
		rep.Status = StatusNotReady
	case degraded:
		rep.Status = StatusDegraded
	default:
		rep.Status = StatusReady
	}
	return rep
}

// ModelReady reports whether the model (or alias) named is routable;
// known is false when the gateway serves no such model.
func (g *Gateway) ModelReady(name string) (ready, known bool) {
	if to, ok := g.Aliases[name]; ok {
		name = to
	}
	if _, ok := g.Models[name]; !ok {
		return false, false
	}
	_, models := g.Readiness()
	return models[name].Routable, true
}

// ServeReady answers GET /readyz: 200 {"status":"ready"} when this
// instance can serve (Report), else 503 {"status":"not ready"}. The
// answer is public, so it names nothing: no model, replica or issuer;
// operators read the reasons in the admin API and on the status page.
func (g *Gateway) ServeReady(w http.ResponseWriter, r *http.Request) {
	rep := g.Report()
	g.ObserveReadiness(rep)
	writeReady(w, rep.Ready())
}

// ServeModelReady answers GET /readyz/<model>: 200 when requests for the
// model (or alias) are served now, by its replicas or a fallback, 503
// when not, 404 for a model the gateway does not serve; bare, as
// /readyz.
func (g *Gateway) ServeModelReady(w http.ResponseWriter, r *http.Request) {
	name, err := url.PathUnescape(strings.TrimPrefix(r.URL.EscapedPath(), PathReady+"/"))
	ready, known := g.ModelReady(name)
	if err != nil || !known {
		api.NewError(http.StatusNotFound, "Not Found").Write(w)
		return
	}
	writeReady(w, ready)
}

// Bare answers, written once.
var (
	readyBody    = []byte(`{"status":"ready"}` + "\n")
	notReadyBody = []byte(`{"status":"not ready"}` + "\n")
)

func writeReady(w http.ResponseWriter, ready bool) {
	h := w.Header()
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Type", "application/json")
	if ready {
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(readyBody)
		return
	}
	h.Set("Retry-After", "5")
	w.WriteHeader(http.StatusServiceUnavailable)
	_, _ = w.Write(notReadyBody)
}

// ServeReport answers with the operators' readiness report: 200 when the
// instance is ready, else 503, with every check and model and the
// reasons. Serve it only where operators alone reach it.
func (g *Gateway) ServeReport(w http.ResponseWriter, r *http.Request) {
	rep := g.Report()
	g.ObserveReadiness(rep)
	status := http.StatusOK
	if !rep.Ready() {
		status = http.StatusServiceUnavailable
	}
	w.Header().Set("Cache-Control", "no-store")
	api.WriteJSON(w, status, rep)
}

// ServeHealth answers GET /healthz: the process is up (liveness; it
// never depends on replicas or stores).
func ServeHealth(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	api.WriteJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// DependencyFunc is a Dependency checked by a function.
type DependencyFunc struct {
	// Dependency names the service in the readiness report.
	Dependency string
	Func       func() DependencyStatus
}

// Name implements Dependency.
func (d DependencyFunc) Name() string { return d.Dependency }

// Check implements Dependency.
func (d DependencyFunc) Check() DependencyStatus { return d.Func() }
