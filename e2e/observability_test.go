package e2e

import (
	"encoding/json"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// scrape reads the gateway's Prometheus metrics from its admin endpoint.
func (g *Gateway) scrape(t *testing.T) string {
	t.Helper()
	resp, err := g.Client.Get(g.Admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// metricValue finds one sample by its exact name and labels.
func metricValue(t *testing.T, text, series string) float64 {
	t.Helper()
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`)
	m := re.FindStringSubmatch(text)
	if m == nil {
		return -1
	}
	v, _ := strconv.ParseFloat(m[1], 64)
	return v
}

func TestMetricsAndAccessLog(t *testing.T) {
	sim := startSim(t, "-tokens", "5")
	logFile := filepath.Join(t.TempDir(), "access.log")
	g := startGateway(t, GatewayConfig{
		Models: map[string]string{"qwen": staticModel(sim), "gemma": staticModel(sim)},
		Site:   "log {\n\t\toutput file " + logFile + "\n\t\tformat json\n\t}\n\tllm_gateway",
	})
	const secretContent = "SECRET-MESSAGE-CONTENT-42"
	const secretPassword = "hunter2-SECRET-PW"
	body := map[string]any{"messages": []map[string]string{{"role": "user", "content": secretContent}}}

	before := g.scrape(t)
	tok := g.Token(t, "demo", "demo", "")
	resp, _ := g.Client.PostForm(g.Base+"/auth/token", url.Values{"username": {"demo"}, "password": {secretPassword}})
	readJSON(t, resp, nil)
	for _, stream := range []bool{false, true} {
		body["stream"] = stream
		resp := g.Infer(t, tok, body)
		if b := readJSON(t, resp, nil); resp.StatusCode != 200 {
			t.Fatalf("%s %s", resp.Status, b)
		}
	}
	resp = g.Infer(t, "", body)
	readJSON(t, resp, nil)

	after := g.scrape(t)
	delta := func(series string) float64 {
		a, b := metricValue(t, after, series), metricValue(t, before, series)
		if b < 0 {
			b = 0
		}
		return a - b
	}
	checks := []struct {
		series string
		want   float64
	}{
		{`llmedge_requests_total{model_type="qwen",status="200"}`, 2},
		{`llmedge_requests_total{model_type="none",status="401"}`, 1},
		{`llmedge_tokens_total{kind="completion",model_type="qwen"}`, 10},
		{`llmedge_access_tokens_issued_total`, 1},
		{`llmedge_auth_failures_total{reason="invalid_grant"}`, 1},
		{`llmedge_auth_failures_total{reason="missing_token"}`, 1},
		{`llmedge_gateway_overhead_seconds_count{model_type="qwen"}`, 2},
		{`llmedge_time_to_first_token_seconds_count{model_type="qwen"}`, 2},
	}
	for _, c := range checks {
		if got := delta(c.series); got != c.want {
			t.Errorf("%s moved by %v, want %v", c.series, got, c.want)
		}
	}
	if v := metricValue(t, after, `llmedge_replicas{model_type="qwen",state="usable"}`); v != 1 {
		t.Errorf("llmedge_replicas usable = %v", v)
	}
	if v := metricValue(t, after, `llmedge_breaker_state{model_type="qwen",replica="`+sim.URL+`"}`); v != 0 {
		t.Errorf("llmedge_breaker_state = %v", v)
	}

	// Access log: the inference entries carry the gateway's fields.
	var entries []map[string]any
	waitFor(t, 5*time.Second, func() bool {
		entries = entries[:0]
		b, _ := os.ReadFile(logFile)
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			var e map[string]any
			if json.Unmarshal([]byte(line), &e) == nil {
				if req, _ := e["request"].(map[string]any); req["uri"] == "/tasks/assistant_inference" {
					entries = append(entries, e)
				}
			}
		}
		return len(entries) >= 3
	})
	ok := 0
	for _, e := range entries {
		if e["status"] != float64(200) {
			continue
		}
		ok++
		if e["model_type"] != "qwen" || e["replica"] != sim.URL || e["attempts"] != float64(1) || e["user"] != "demo" ||
			e["prompt_tokens"].(float64) <= 0 || e["completion_tokens"] != float64(5) || e["request_id"] == "" || e["ttft"] == nil {
			t.Errorf("log entry lacks the gateway's fields: %v", e)
		}
	}
	if ok != 2 {
		t.Errorf("%d successful inference entries in the access log", ok)
	}
	all, _ := os.ReadFile(logFile)
	for _, secret := range []string{secretContent, secretPassword, tok} {
		if strings.Contains(string(all), secret) || strings.Contains(g.log.String(), secret) {
			t.Errorf("a secret reached the logs: %.20q...", secret)
		}
	}
}
