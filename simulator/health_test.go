package simulator

import (
	"net/http"
	"testing"
)

// health_status makes /health fail (e.g. to fail a Consul check) while chat
// keeps working, and 0 restores 200.
func TestHealthStatus(t *testing.T) {
	ts, _ := start(t, Config{})
	for _, step := range []struct {
		patch string
		want  int
	}{
		{`{"health_status":503}`, 503},
		{`{"health_status":0}`, 200},
	} {
		if resp, b := do(t, http.MethodPost, ts.URL+"/sim/config", step.patch); resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", step.patch, resp.StatusCode, b)
		}
		if resp, _ := do(t, http.MethodGet, ts.URL+"/health", ""); resp.StatusCode != step.want {
			t.Errorf("after %s: /health %d, want %d", step.patch, resp.StatusCode, step.want)
		}
		if resp, b := do(t, http.MethodPost, ts.URL+"/v1/chat/completions", `{"model":"sim-model","messages":[{"role":"user","content":"hi"}]}`); resp.StatusCode != 200 {
			t.Errorf("after %s: chat %d %s", step.patch, resp.StatusCode, b)
		}
	}
	if resp, _ := do(t, http.MethodPost, ts.URL+"/sim/config", `{"health_status":42}`); resp.StatusCode != 400 {
		t.Errorf("health_status 42 accepted: %d", resp.StatusCode)
	}
}
