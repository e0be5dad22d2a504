package gateway

import (
	"net/http"
	"sort"
)

// ModelStatus is one model's entry in the /readyz answer.
type ModelStatus struct {
	Ready    bool   `json:"ready"`
	Replicas int    `json:"replicas"`
	Reason   string `json:"reason,omitempty"`
}

// Readiness reports, per model, whether it can serve requests.
func (g *Gateway) Readiness() (bool, map[string]ModelStatus) {
	all := true
	out := make(map[string]ModelStatus, len(g.Models))
	for name, m := range g.Models {
		st := ModelStatus{Replicas: len(m.Pool.Replicas())}
		st.Ready = st.Replicas > 0
		if !st.Ready {
			st.Reason = "no replicas"
			all = false
		}
		out[name] = st
	}
	return all, out
}

// ServeReady answers GET /readyz: 200 when every model has a replica,
// else 503 with the reasons.
func (g *Gateway) ServeReady(w http.ResponseWriter, r *http.Request) {
	ok, models := g.Readiness()
	status, word := http.StatusOK, "ready"
	var reasons []string
	if !ok {
		status, word = http.StatusServiceUnavailable, "not ready"
		for name, st := range models {
			if !st.Ready {
				reasons = append(reasons, "model '"+name+"': "+st.Reason)
			}
		}
		sort.Strings(reasons)
		w.Header().Set("Retry-After", "5")
	}
	w.Header().Set("Cache-Control", "no-store")
	body := map[string]any{"status": word, "models": models}
	if len(reasons) > 0 {
		body["detail"] = reasons
	}
	writeJSON(w, status, body)
}

// ServeHealth answers GET /healthz: the process is up.
func ServeHealth(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}
