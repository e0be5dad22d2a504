package gateway

import (
	"net/http"
	"sort"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/backends/pool"
)

// ModelStatus is one model's entry in the /readyz answer.
type ModelStatus struct {
	Ready    bool `json:"ready"`
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

// Readiness reports, per model, whether it can serve requests.
func (g *Gateway) Readiness() (bool, map[string]ModelStatus) {
	all := true
	out := make(map[string]ModelStatus, len(g.Models))
	for name, m := range g.Models {
		st := ModelStatus{Source: "static", Synced: true}
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
		if !st.Ready {
			all = false
		}
		out[name] = st
	}
	// A model with a weighted rollout has no replicas of its own: it is
	// ready when a share is, and counts its shares' replicas.
	for name, m := range g.Models {
		if len(m.Rollout) == 0 {
			continue
		}
		st := ModelStatus{Source: "rollout", Synced: true}
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
	all = true
	for _, st := range out {
		all = all && st.Ready
	}
	return all, out
}

// Dependency is a service the gateway relies on beyond its replicas,
// reported by /readyz.
type Dependency interface {
	Name() string
	Check() DependencyStatus
}

// DependencyStatus is one dependency's entry in the /readyz answer.
type DependencyStatus struct {
	// Status is "up", "degraded" (unreachable, and the gateway works on
	// without it) or "down" (unreachable, and requests fail for it).
	Status string `json:"status"`
	// Detail says what the gateway does meanwhile, or why it is down.
	Detail string `json:"detail,omitempty"`
}

// ServeReady answers GET /readyz: 200 when every model has a usable
// replica and no dependency is down ("degraded" when one is unreachable
// but the gateway works without it), else 503 with the reasons.
func (g *Gateway) ServeReady(w http.ResponseWriter, r *http.Request) {
	ok, models := g.Readiness()
	status, word := http.StatusOK, "ready"
	var reasons []string
	if !ok {
		for name, st := range models {
			if !st.Ready {
				reasons = append(reasons, "model '"+name+"': "+st.Reason)
			}
		}
	}
	var deps map[string]DependencyStatus
	degraded := false
	for _, d := range g.Dependencies {
		if deps == nil {
			deps = make(map[string]DependencyStatus, len(g.Dependencies))
		}
		st := d.Check()
		deps[d.Name()] = st
		switch st.Status {
		case "down":
			reasons = append(reasons, d.Name()+": "+st.Detail)
		case "degraded":
			degraded = true
		}
	}
	if len(reasons) > 0 {
		status, word = http.StatusServiceUnavailable, "not ready"
		sort.Strings(reasons)
		w.Header().Set("Retry-After", "5")
	} else if degraded {
		word = "degraded"
	}
	w.Header().Set("Cache-Control", "no-store")
	body := map[string]any{"status": word, "models": models}
	if deps != nil {
		body["dependencies"] = deps
	}
	if len(reasons) > 0 {
		body["detail"] = reasons
	}
	api.WriteJSON(w, status, body)
}

// ServeHealth answers GET /healthz: the process is up.
func ServeHealth(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	api.WriteJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// DependencyFunc is a Dependency checked by a function.
type DependencyFunc struct {
	// Dependency names the service in the /readyz answer.
	Dependency string
	Func       func() DependencyStatus
}

// Name implements Dependency.
func (d DependencyFunc) Name() string { return d.Dependency }

// Check implements Dependency.
func (d DependencyFunc) Check() DependencyStatus { return d.Func() }
