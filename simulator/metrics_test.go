package simulator

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// parseMetrics parses a /metrics body as Prometheus's text format 0.0.4
// with the legacy (colon-allowing) name rules.
func parseMetrics(body string) (map[string]*dto.MetricFamily, error) {
	p := expfmt.NewTextParser(model.LegacyValidation)
	return p.TextToMetricFamilies(strings.NewReader(body))
}

// series is one expected sample: its family's type, its labels and value.
type series struct {
	typ    dto.MetricType
	labels map[string]string
	value  float64
}

func TestMetricsPerDialect(t *testing.T) {
	vllm := map[string]string{"model_name": "qwen", "engine": "0"}
	sgl := map[string]string{"model_name": "qwen"}
	gauge, counter := dto.MetricType_GAUGE, dto.MetricType_COUNTER
	// The state scraped: three 6-token prompts queried, the last two hit a
	// block of 4; one request running (6+2 tokens: 2 blocks of 10) and
	// one waiting, not yet looked up.
	tests := []struct {
		dialect string
		want    map[string]series
	}{
		{DialectVLLM, map[string]series{
			"vllm:num_requests_running":       {gauge, vllm, 1},
			"vllm:num_requests_waiting":       {gauge, vllm, 1},
			"vllm:kv_cache_usage_perc":        {gauge, vllm, 0.2},
			"vllm:prefix_cache_queries_total": {counter, vllm, 18},
			"vllm:prefix_cache_hits_total":    {counter, vllm, 8},
			"vllm:num_preemptions_total":      {counter, vllm, 0},
		}},
		{DialectSGLang, map[string]series{
			"sglang:num_running_reqs": {gauge, sgl, 1},
			"sglang:num_queue_reqs":   {gauge, sgl, 1},
			"sglang:token_usage":      {gauge, sgl, 0.2},
			"sglang:cache_hit_rate":   {gauge, sgl, 8.0 / 18},
		}},
		{DialectTGI, map[string]series{
			"tgi_queue_size":         {gauge, nil, 1},
			"tgi_batch_current_size": {gauge, nil, 1},
		}},
		{DialectLlamaCpp, map[string]series{
			"llamacpp:requests_processing":  {gauge, nil, 1},
			"llamacpp:requests_deferred":    {gauge, nil, 1},
			"llamacpp:kv_cache_usage_ratio": {gauge, nil, 0.2},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.dialect, func(t *testing.T) {
			ts, sim := start(t, Config{Dialect: tt.dialect, Model: "qwen", Tokens: 2, BlockSize: 4, KVCacheBlocks: 10, MaxNumSeqs: 1})
			complete(t, ts.URL, hello)
			complete(t, ts.URL, hello)

			// One request decodes for an hour and holds the only slot;
			// another waits for it.
			do(t, http.MethodPost, ts.URL+"/sim/config", `{"itl":"1h"}`)
			ctx, cancel := context.WithCancel(t.Context())
			var wg sync.WaitGroup
			for range 2 {
				wg.Go(func() {
					req, _ := http.NewRequestWithContext(ctx, http.MethodPost, ts.URL+"/v1/chat/completions", strings.NewReader(hello))
					if resp, err := http.DefaultClient.Do(req); err == nil {
						resp.Body.Close()
					}
				})
			}
			defer wg.Wait()
			defer cancel()
			waitStats(t, sim, "one running, one waiting", func(st Stats) bool { return st.Running == 1 && st.Waiting == 1 })

			resp, b := do(t, http.MethodGet, ts.URL+"/metrics", "")
			if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/plain; version=0.0.4; charset=utf-8" {
				t.Fatalf("GET /metrics: %d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
			}
			fams, err := parseMetrics(string(b))
			if err != nil {
				t.Fatalf("parsing /metrics: %v\n%s", err, b)
			}
			if len(fams) != len(tt.want) {
				t.Errorf("%d families, want %d:\n%s", len(fams), len(tt.want), b)
			}
			for name, want := range tt.want {
				f := fams[name]
				if f == nil {
					t.Errorf("no %s in\n%s", name, b)
					continue
				}
				if f.GetType() != want.typ || f.GetHelp() == "" || len(f.GetMetric()) != 1 {
					t.Errorf("%s: type %v help %q with %d series, want %v, a help text and 1 series", name, f.GetType(), f.GetHelp(), len(f.GetMetric()), want.typ)
					continue
				}
				m := f.GetMetric()[0]
				labels := map[string]string{}
				for _, l := range m.GetLabel() {
					labels[l.GetName()] = l.GetValue()
				}
				if len(labels) != len(want.labels) || !mapsEqual(labels, want.labels) {
					t.Errorf("%s: labels %v, want %v", name, labels, want.labels)
				}
				got := m.GetGauge().GetValue()
				if want.typ == counter {
					got = m.GetCounter().GetValue()
				}
				if got != want.value {
					t.Errorf("%s = %v, want %v", name, got, want.value)
				}
			}
			if st := sim.Stats(); st.MetricsScrapes != 1 {
				t.Errorf("metrics_scrapes %d, want 1", st.MetricsScrapes)
			}
		})
	}
}

func mapsEqual(a, b map[string]string) bool {
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return len(a) == len(b)
}

func TestMetricsNotServed(t *testing.T) {
	tests := []struct {
		dialect string
		status  int
	}{
		{DialectOllama, http.StatusNotFound},
		{DialectNative, http.StatusNotFound},
	}
	for _, tt := range tests {
		ts, _ := start(t, Config{Dialect: tt.dialect})
		if resp, b := do(t, http.MethodGet, ts.URL+"/metrics", ""); resp.StatusCode != tt.status {
			t.Errorf("%s: GET /metrics %d %s, want %d", tt.dialect, resp.StatusCode, b, tt.status)
		}
	}
	ts, _ := start(t, Config{APIKey: "k"})
	if resp, _ := do(t, http.MethodGet, ts.URL+"/metrics", ""); resp.StatusCode != 200 {
		t.Errorf("vllm with an API key: GET /metrics %d, want 200 without the key", resp.StatusCode)
	}
	if resp, _ := do(t, http.MethodPost, ts.URL+"/metrics", ""); resp.StatusCode != 405 {
		t.Errorf("POST /metrics %d, want 405", resp.StatusCode)
	}
}

func TestMetricsEscapesModelName(t *testing.T) {
	ts, _ := start(t, Config{Model: "org/m \"q\" \\ x\ny"})
	_, b := do(t, http.MethodGet, ts.URL+"/metrics", "")
	fams, err := parseMetrics(string(b))
	if err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	for _, l := range fams["vllm:num_requests_running"].GetMetric()[0].GetLabel() {
		if l.GetName() == "model_name" && l.GetValue() != "org/m \"q\" \\ x\ny" {
			t.Errorf("model_name %q", l.GetValue())
		}
	}
}

// TestMetricsFaults switches /metrics between failures and back, through
// POST /sim/config.
func TestMetricsFaults(t *testing.T) {
	ts, sim := start(t, Config{})
	client := &http.Client{Timeout: 200 * time.Millisecond}
	scrape := func() (int, string, error) {
		resp, err := client.Get(ts.URL + "/metrics")
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), err
	}
	tests := []struct {
		fault  string
		status int  // 0: no answer
		parses bool // the body is valid text format
	}{
		{MetricsFaultError, 500, false},
		{MetricsFaultGarbage, 200, false},
		{MetricsFaultHang, 0, false},
		{"", 200, true},
	}
	for i, tt := range tests {
		t.Run("fault="+tt.fault, func(t *testing.T) {
			if resp, b := do(t, http.MethodPost, ts.URL+"/sim/config", `{"metrics_fault":"`+tt.fault+`"}`); resp.StatusCode != 200 {
				t.Fatalf("setting metrics_fault: %d %s", resp.StatusCode, b)
			}
			status, body, err := scrape()
			if tt.status == 0 {
				if err == nil || !errors.Is(err, context.DeadlineExceeded) && !strings.Contains(err.Error(), "Timeout") {
					t.Fatalf("hang: got %d %v, want a client timeout", status, err)
				}
			} else if err != nil || status != tt.status {
				t.Fatalf("got %d %v, want %d", status, err, tt.status)
			}
			if tt.status != 0 {
				if _, perr := parseMetrics(body); (perr == nil) != tt.parses || body == "" {
					t.Errorf("body %q parses: %v, want %v", body, perr, tt.parses)
				}
			}
			// The hung scrape's handler ends with its client.
			waitStats(t, sim, "the scrape counted", func(st Stats) bool { return st.MetricsScrapes == int64(i+1) })
		})
	}
	if resp, _ := do(t, http.MethodPost, ts.URL+"/sim/config", `{"metrics_fault":"slow"}`); resp.StatusCode != 400 {
		t.Errorf("unknown metrics_fault: %d, want 400", resp.StatusCode)
	}
}
