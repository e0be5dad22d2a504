package e2e

import (
	"strings"
	"testing"
)

// TestMetricsSurviveReload: a reload (a new configuration, a new
// registry) keeps the llmedge_* counters where they were, and the
// replicas' gauges read the new configuration.
func TestMetricsSurviveReload(t *testing.T) {
	sim := startSim(t, "-tokens", "3")
	g := startGateway(t, GatewayConfig{Models: map[string]string{"qwen": staticModel(sim)}})
	tok := g.Token(t, "demo", "demo", "")
	for range 2 {
		if resp := g.Infer(t, tok, withModel("qwen")); resp.StatusCode != 200 {
			t.Fatalf("before the reload: %s", resp.Status)
		} else {
			resp.Body.Close()
		}
	}
	const series = `llmedge_requests_total{model_type="qwen",status="200"}`
	if v := metricValue(t, g.scrape(t), series); v != 2 {
		t.Fatalf("before the reload: %s %v", series, v)
	}
	issued := metricValue(t, g.scrape(t), "llmedge_access_tokens_issued_total")
	g.Reload(t, func(c string) string { return strings.Replace(c, "llmedge {", "llmedge {\n\t\tmax_attempts 2", 1) })
	text := g.scrape(t)
	if v := metricValue(t, text, series); v != 2 {
		t.Fatalf("after the reload: %s %v, want 2", series, v)
	}
	if v := metricValue(t, text, "llmedge_access_tokens_issued_total"); v != issued {
		t.Errorf("tokens issued after the reload: %v, want %v", v, issued)
	}
	if v := metricValue(t, text, `llmedge_replicas{model_type="qwen",state="usable"}`); v != 1 {
		t.Errorf("the replicas' gauge after the reload: %v", v)
	}
	if resp := g.Infer(t, tok, withModel("qwen")); resp.StatusCode != 200 {
		t.Fatalf("after the reload: %s", resp.Status)
	} else {
		resp.Body.Close()
	}
	if v := metricValue(t, g.scrape(t), series); v != 3 {
		t.Fatalf("a request after the reload: %s %v, want 3", series, v)
	}
}
