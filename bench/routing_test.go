package bench

import (
	"bufio"
	"maps"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParsePolicy(t *testing.T) {
	tests := []struct {
		in      string
		want    policySpec
		wantErr bool
	}{
		{"prefix_cache", policySpec{Name: "prefix_cache"}, false},
		{"round_robin", policySpec{Name: "round_robin"}, false},
		{"prefix_cache:load_factor=2", policySpec{Name: "prefix_cache", Options: [][2]string{{"load_factor", "2"}}}, false},
		{"prefix_cache:load_factor=2:kv_full=0.9", policySpec{Name: "prefix_cache", Options: [][2]string{{"load_factor", "2"}, {"kv_full", "0.9"}}}, false},
		{"least_conn", policySpec{}, true},
		{"prefix_cache:load_factor", policySpec{}, true},
		{"prefix_cache:load_factor=2}", policySpec{}, true}, // would close the Caddyfile block
		{"prefix_cache:x=1 2", policySpec{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := parsePolicy(tt.in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("error %v, want error %t", err, tt.wantErr)
			}
			if err == nil && !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestModelName(t *testing.T) {
	tests := []struct{ workload, policy, want string }{
		{WorkloadUniform, "prefix_cache", "routing-uniform-prefix_cache"},
		{WorkloadSkewed, "prefix_cache:load_factor=2", "routing-skewed-prefix_cache-load_factor-2"},
	}
	for _, tt := range tests {
		if got := modelName(tt.workload, tt.policy); got != tt.want {
			t.Errorf("modelName(%s, %s) = %s, want %s", tt.workload, tt.policy, got, tt.want)
		}
	}
}

func TestRoutingConfigValidate(t *testing.T) {
	tests := []struct {
		name    string
		change  func(*RoutingConfig)
		wantErr bool
	}{
		{"default", func(*RoutingConfig) {}, false},
		{"tiny", func(c *RoutingConfig) { *c = tinyRoutingConfig() }, false},
		{"off", func(c *RoutingConfig) { c.Policies, c.Rate = nil, -1 }, false},
		{"unknown policy", func(c *RoutingConfig) { c.Policies = []string{"fastest"} }, true},
		{"unknown workload", func(c *RoutingConfig) { c.Workloads = []string{"bursty"} }, true},
		{"one tenant", func(c *RoutingConfig) { c.Tenants = 1 }, true},
		{"no rate", func(c *RoutingConfig) { c.Rate = 0 }, true},
		{"hot share of 1", func(c *RoutingConfig) { c.HotShare = 1 }, true},
		{"reversed range", func(c *RoutingConfig) { c.SystemWords = [2]int{10, 5} }, true},
		{"prefill too slow", func(c *RoutingConfig) { c.PrefillPerToken = 2 * time.Second }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := DefaultRoutingConfig()
			tt.change(&c)
			if err := c.validate(); (err != nil) != tt.wantErr {
				t.Errorf("validate() = %v, want error %t", err, tt.wantErr)
			}
		})
	}
}

func TestCaddyfileRouting(t *testing.T) {
	pc := proxyConfig{Port: 1, AdminPort: 2, Data: "/d", Hash: "H", Replicas: []string{"http://a:1", "http://b:2"},
		Models: []routingModel{
			{Name: "m1", Policy: policySpec{Name: "round_robin"}},
			{Name: "m2", Policy: policySpec{Name: "prefix_cache", Options: [][2]string{{"load_factor", "2"}}}},
		}}
	tests := []struct {
		name, log string
		want      []string
		absent    []string
	}{
		{"without log", "", []string{
			"model m1 {\n\t\t\tstatic http://a:1 http://b:2\n\t\t\tprotocol vllm\n\t\t\tlb_policy round_robin\n\t\t}",
			"lb_policy prefix_cache {\n\t\t\t\tload_factor 2\n\t\t\t}",
		}, []string{"log {"}},
		{"with log", "/tmp/a.log", []string{"output file /tmp/a.log"}, nil},
		// Each simulated tenant its own principal, so its own cache
		// partition, as real tenants are.
		{"tenants", "", []string{"user bench H\n\t\tuser tenant0 H\n\t\tuser tenant1 H\n"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pc.AccessLog = tt.log
			pc.Tenants = nil
			if tt.name == "tenants" {
				pc.Tenants = []string{"tenant0", "tenant1"}
			}
			b, err := pc.render(caddyfileRouting)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tt.want {
				if !strings.Contains(string(b), w) {
					t.Errorf("Caddyfile lacks %q:\n%s", w, b)
				}
			}
			for _, w := range tt.absent {
				if strings.Contains(string(b), w) {
					t.Errorf("Caddyfile has %q:\n%s", w, b)
				}
			}
		})
	}
}

func TestParseDecisions(t *testing.T) {
	const text = `# HELP llmedge_routing_decisions_total Replica choices.
# TYPE llmedge_routing_decisions_total counter
llmedge_routing_decisions_total{model_type="m",reason="load"} 12
llmedge_routing_decisions_total{model_type="m",reason="prefix"} 88
llmedge_routing_decisions_total{model_type="m-2",reason="prefix"} 5
llmedge_routing_decisions_total{model_type="other",reason="round_robin"} 3
`
	tests := []struct {
		model string
		want  map[string]int
	}{
		{"m", map[string]int{"load": 12, "prefix": 88}},
		{"m-2", map[string]int{"prefix": 5}},
		{"none", map[string]int{}},
	}
	for _, tt := range tests {
		got, err := parseDecisions(bufio.NewScanner(strings.NewReader(text)), tt.model)
		if err != nil || !maps.Equal(got, tt.want) {
			t.Errorf("parseDecisions(%s) = %v, %v; want %v", tt.model, got, err, tt.want)
		}
	}
}

func TestDecisionsCell(t *testing.T) {
	tests := []struct {
		in   map[string]int
		want string
	}{
		{nil, "–"},
		{map[string]int{"round_robin": 10}, "round_robin 100%"},
		{map[string]int{"load": 15, "prefix": 85}, "prefix 85%, load 15%"},
	}
	for _, tt := range tests {
		if got := decisionsCell(tt.in); got != tt.want {
			t.Errorf("decisionsCell(%v) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestFromSims(t *testing.T) {
	before := []simStats{{Requests: 10, PrefixCacheQueries: 1000, PrefixCacheHits: 500}, {Requests: 0}}
	after := []simStats{{Requests: 40, PrefixCacheQueries: 5000, PrefixCacheHits: 3500}, {Requests: 10, PrefixCacheQueries: 2000, PrefixCacheHits: 0}}
	var r RoutingResult
	r.fromSims(before, after, 2*time.Second, 100*time.Microsecond)
	// 6,000 tokens looked up, 3,000 found; 3,000 prefilled in 2 s over 2
	// lanes at 100 µs each: 0.3 s of 4 lane-seconds.
	want := RoutingResult{WindowSeconds: 2, PromptTokens: 6000, CachedTokens: 3000, HitRate: 0.5,
		PrefillTokensPerS: 1500, PrefillBusy: 0.075, ReplicaShares: []float64{0.75, 0.25}, BusiestShare: 0.75}
	if !reflect.DeepEqual(r, want) {
		t.Errorf("got %+v\nwant %+v", r, want)
	}
}

func TestRoutingChecks(t *testing.T) {
	res := func(wl, p string, p90 float64, errs int) RoutingResult {
		return RoutingResult{Workload: wl, Policy: p, TTFT: &Summary{P90: p90}, Errors: errs, Sent: 100}
	}
	rep := &Report{Routing: []RoutingResult{
		res(WorkloadUniform, "prefix_cache", 100, 0), res(WorkloadUniform, "round_robin", 400, 0), res(WorkloadUniform, "p2c", 150, 0),
		res(WorkloadSkewed, "prefix_cache", 130, 0), res(WorkloadSkewed, "round_robin", 100, 2),
	}}
	got := map[string]bool{}
	for _, c := range rep.routingChecks() {
		if c.Group != groupRouting {
			t.Errorf("check %q in group %q", c.Target, c.Group)
		}
		got[c.Target] = c.Met
	}
	want := map[string]bool{
		"uniform: prefix_cache p90 TTFT ≤ 0.35× round_robin's": true,  // 0.25×
		"uniform: prefix_cache p90 TTFT ≤ 0.50× p2c's":         false, // 0.67×
		"skewed: prefix_cache p90 TTFT ≤ 1.20× round_robin's":  false, // 1.3×
		"no errors (every policy, both workloads)":             false,
	}
	if !maps.Equal(got, want) {
		t.Errorf("checks %v, want %v", got, want)
	}
}
