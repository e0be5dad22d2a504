package bench

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParseVariant(t *testing.T) {
	tests := []struct {
		in      string
		want    scaleVariant
		wantErr bool
	}{
		{"round_robin", scaleVariant{Name: "round_robin", Policy: policySpec{Name: "round_robin"}}, false},
		{"prefix_cache+share", scaleVariant{Name: "prefix_cache+share", Policy: policySpec{Name: "prefix_cache"}, Share: true}, false},
		{"prefix_cache:load_factor=2+share", scaleVariant{Name: "prefix_cache:load_factor=2+share",
			Policy: policySpec{Name: "prefix_cache", Options: [][2]string{{"load_factor", "2"}}}, Share: true}, false},
		{"+share", scaleVariant{}, true},
		{"prefix_cache+shared", scaleVariant{}, true},
		{"prefix_cache+share+share", scaleVariant{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := parseVariant(tt.in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("error %v, want error %t", err, tt.wantErr)
			}
			if err == nil && !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestScaleModelName(t *testing.T) {
	tests := []struct{ in, want string }{
		{"round_robin", "scaleout-round_robin"},
		{"prefix_cache+share", "scaleout-prefix_cache-share"},
		{"prefix_cache:load_factor=2+share", "scaleout-prefix_cache-load_factor-2-share"},
	}
	for _, tt := range tests {
		if got := scaleModelName(tt.in); got != tt.want {
			t.Errorf("scaleModelName(%s) = %s, want %s", tt.in, got, tt.want)
		}
	}
}

func TestShareGroups(t *testing.T) {
	v := func(name string, share bool) scaleVariant { return scaleVariant{Name: name, Share: share} }
	tests := []struct {
		name string
		in   []scaleVariant
		want [][]string
	}{
		{"none", nil, nil},
		{"default", []scaleVariant{v("rr", false), v("pc", false), v("pc+share", true)}, [][]string{{"rr", "pc"}, {"pc+share"}}},
		{"interleaved, order of first appearance", []scaleVariant{v("a+share", true), v("b", false), v("c+share", true)},
			[][]string{{"a+share", "c+share"}, {"b"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got [][]string
			for _, g := range shareGroups(tt.in) {
				var names []string
				for _, x := range g {
					names = append(names, x.Name)
				}
				got = append(got, names)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestScaleoutConfigValidate(t *testing.T) {
	tests := []struct {
		name    string
		change  func(*ScaleoutConfig, *RoutingConfig)
		wantErr bool
	}{
		{"default", func(*ScaleoutConfig, *RoutingConfig) {}, false},
		{"tiny", func(c *ScaleoutConfig, _ *RoutingConfig) { *c = tinyScaleoutConfig() }, false},
		{"off ignores the rest", func(c *ScaleoutConfig, _ *RoutingConfig) { c.Variants, c.Rate = nil, -1 }, false},
		{"routing off does not matter", func(_ *ScaleoutConfig, r *RoutingConfig) { r.Policies = nil }, false},
		{"unknown policy", func(c *ScaleoutConfig, _ *RoutingConfig) { c.Variants = []string{"least_conn+share"} }, true},
		{"variant twice", func(c *ScaleoutConfig, _ *RoutingConfig) { c.Variants = []string{"p2c", "p2c"} }, true},
		{"zero instances", func(c *ScaleoutConfig, _ *RoutingConfig) { c.Instances = []int{1, 0} }, true},
		{"too many instances", func(c *ScaleoutConfig, _ *RoutingConfig) { c.Instances = []int{maxInstances + 1} }, true},
		{"unknown workload", func(c *ScaleoutConfig, _ *RoutingConfig) { c.Workload = "bursty" }, true},
		{"control spread", func(c *ScaleoutConfig, _ *RoutingConfig) { c.Spread = SpreadFirst }, false},
		{"unknown spread", func(c *ScaleoutConfig, _ *RoutingConfig) { c.Spread = "round" }, true},
		{"no rate", func(c *ScaleoutConfig, _ *RoutingConfig) { c.Rate = 0 }, true},
		{"no duration", func(c *ScaleoutConfig, _ *RoutingConfig) { c.Duration = 0 }, true},
		{"bad shape from routing", func(_ *ScaleoutConfig, r *RoutingConfig) { r.Tenants = 1 }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, r := DefaultScaleoutConfig(), DefaultRoutingConfig()
			tt.change(&c, &r)
			if err := c.validate(r); (err != nil) != tt.wantErr {
				t.Errorf("validate() = %v, want error %t", err, tt.wantErr)
			}
		})
	}
}

func TestScaleoutSpec(t *testing.T) {
	c, r := DefaultScaleoutConfig(), DefaultRoutingConfig()
	c.Rate, c.Warmup, c.Duration, c.Workload = 7, time.Second, 2*time.Second, WorkloadSkewed
	s := c.spec(r)
	if s.Rate != 7 || s.Span != 3*time.Second || s.HotShare != r.HotShare || s.Tenants != r.Tenants || s.Seed != r.Seed {
		t.Errorf("spec = %+v", s)
	}
}

func TestParseInfoInt(t *testing.T) {
	info := "# Stats\r\ntotal_connections_received:12\r\ntotal_commands_processed:3456\r\ninstantaneous_ops_per_sec:7\r\nbad:x\r\n"
	tests := []struct {
		key     string
		want    int64
		wantErr bool
	}{
		{"total_commands_processed", 3456, false},
		{"instantaneous_ops_per_sec", 7, false},
		{"total_commands", 0, true}, // a prefix is not the key
		{"bad", 0, true},
		{"missing", 0, true},
	}
	for _, tt := range tests {
		got, err := parseInfoInt(info, tt.key)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("parseInfoInt(%s) = %d, %v; want %d, error %t", tt.key, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestMetricValue(t *testing.T) {
	text := `# HELP llmedge_routing_share_insertions_total x
llmedge_routing_share_insertions_total{outcome="applied"} 42
llmedge_routing_share_insertions_total{outcome="published"} 1.5e+06
llmedge_routing_share_up 1
llmedge_routing_share_up_extra 9
broken{a="b"} x
`
	tests := []struct {
		series string
		want   float64
	}{
		{`llmedge_routing_share_insertions_total{outcome="applied"}`, 42},
		{`llmedge_routing_share_insertions_total{outcome="published"}`, 1.5e6},
		{`llmedge_routing_share_up`, 1},
		{`llmedge_routing_share_insertions_total{outcome="dropped"}`, 0},
		{`broken{a="b"}`, 0},
	}
	for _, tt := range tests {
		if got := metricValue(text, tt.series); got != tt.want {
			t.Errorf("metricValue(%s) = %g, want %g", tt.series, got, tt.want)
		}
	}
}

func TestScaleoutFromProcs(t *testing.T) {
	// this process, Redis, two instances, one simulator.
	procs := func(cpu ...time.Duration) []ProcSample {
		out := make([]ProcSample, len(cpu))
		for i, c := range cpu {
			out[i].CPU = c
		}
		return out
	}
	s := time.Second
	before := scaleSample{busy: 100 * s, procs: procs(0, 0, 0, 0, 0), commands: 1000}
	after := scaleSample{busy: 104 * s, procs: procs(s/2, s/10, s, s, s/2), commands: 1201}
	var res ScaleoutResult
	res.OK = 100
	res.fromProcs(before, after, 2*s, 2)
	want := ScaleoutResult{GatewayCPUMsPerReq: 20, RedisCPUSeconds: 0.1, RedisCPUMsPerReq: 1, RedisCommands: 200, RedisOpsPerS: 100, MachineBusyCores: 2}
	want.OK, want.GatewayCPUSeconds, want.OtherCPUCores = 100, 2, 0.45
	if !reflect.DeepEqual(res, want) {
		t.Errorf("got %+v\nwant %+v", res, want)
	}

	// A missing sample leaves the figures at zero rather than wrong.
	var empty ScaleoutResult
	empty.fromProcs(scaleSample{}, after, 2*s, 2)
	if !reflect.DeepEqual(empty, ScaleoutResult{}) {
		t.Errorf("from a missing sample: %+v", empty)
	}
}

// scaleRes is a result with the figures the checks read.
func scaleRes(variant string, n int, share bool, p90, rate float64, errs int) ScaleoutResult {
	x := ScaleoutResult{Variant: variant, Instances: n, Share: share}
	x.TTFT, x.AchievedRate, x.Errors, x.Sent = &Summary{P90: p90}, rate, errs, 100
	return x
}

func TestScaleoutChecks(t *testing.T) {
	tests := []struct {
		name string
		runs []ScaleoutResult
		want map[string]bool // target -> met
	}{
		{"none ran", nil, map[string]bool{}},
		{"met", []ScaleoutResult{
			scaleRes("round_robin", 1, false, 300, 20, 0), scaleRes("round_robin", 2, false, 500, 20, 0),
			scaleRes("prefix_cache+share", 1, true, 200, 20, 0), scaleRes("prefix_cache+share", 2, true, 219, 18.1, 0),
		}, map[string]bool{
			"prefix_cache+share, 2 instances: p90 TTFT ≤ 1.1× one instance's":   true,
			"prefix_cache+share, 2 instances: throughput ≥ 0.9× one instance's": true,
			"no errors (every variant, every instance count)":                   true,
		}},
		{"missed, errors anywhere count", []ScaleoutResult{
			scaleRes("round_robin", 1, false, 300, 20, 1),
			scaleRes("prefix_cache+share", 1, true, 200, 20, 0), scaleRes("prefix_cache+share", 4, true, 221, 17.9, 0),
		}, map[string]bool{
			"prefix_cache+share, 4 instances: p90 TTFT ≤ 1.1× one instance's":   false,
			"prefix_cache+share, 4 instances: throughput ≥ 0.9× one instance's": false,
			"no errors (every variant, every instance count)":                   false,
		}},
		{"no one-instance run to compare with", []ScaleoutResult{scaleRes("prefix_cache+share", 2, true, 200, 20, 0)},
			map[string]bool{"no errors (every variant, every instance count)": true}},
		{"against round robin through as many instances, uniform workload", uniform(
			scaleRes("round_robin", 1, false, 500, 20, 0), scaleRes("round_robin", 4, false, 600, 20, 0),
			scaleRes("prefix_cache+share", 1, true, 70, 20, 0), scaleRes("prefix_cache+share", 4, true, 95, 20, 0),
		), map[string]bool{
			"prefix_cache+share, 1 instance: p90 TTFT ≤ 0.15× round_robin's":    true,
			"prefix_cache+share, 4 instances: p90 TTFT ≤ 0.15× round_robin's":   false,
			"prefix_cache+share, 4 instances: p90 TTFT ≤ 1.1× one instance's":   false,
			"prefix_cache+share, 4 instances: throughput ≥ 0.9× one instance's": true,
			"no errors (every variant, every instance count)":                   true,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &Report{Scaleout: tt.runs}
			got := map[string]bool{}
			for _, c := range r.scaleoutChecks() {
				if c.Group != groupScaleout {
					t.Errorf("check %q in group %q", c.Target, c.Group)
				}
				got[c.Target] = c.Met
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %v\nwant %v", got, tt.want)
			}
		})
	}
}

func TestScaleoutMarkdown(t *testing.T) {
	shared, rr := scaleRes("prefix_cache+share", 1, true, 60, 20, 0), scaleRes("round_robin", 1, false, 400, 20, 0)
	shared.Workload, shared.Floor = WorkloadUniform, &Summary{Count: 100, P90: 52}
	r := &Report{Scaleout: []ScaleoutResult{
		scaleRes("prefix_cache", 1, false, 200, 20, 0), scaleRes("prefix_cache", 2, false, 300, 19, 0), shared, rr,
	}}
	r.Checks = r.scaleoutChecks()
	md := r.Markdown()
	for _, want := range []string{
		"#### Scale-out", "| prefix_cache | 1 | 0 | 200 | – | 0 | – |", "| prefix_cache | 2 | 0 | 300 | – | 0 | 1.50× | 19.0 | 0.95× |",
		"| prefix_cache+share | 1 | 0 | 60 | 52 | 0 | – |", "#### Scale-out targets",
		// The floor the target is to be read against: 52 of 400 ms.
		"| prefix_cache+share, 1 instance: p90 TTFT ≤ 0.15× round_robin's | 0.15× (60 vs 400 ms; floor 52 ms, 0.13×) | yes |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}

	r.ScaleoutConfig = &scaleoutReportConfig{Spread: SpreadFirst}
	if md := r.Markdown(); !strings.Contains(md, "Control run: every turn to the first instance") {
		t.Errorf("a control run does not say so:\n%s", md)
	}

	skipped := &Report{ScaleoutSkipped: "redis-server not found on PATH"}
	if md := skipped.Markdown(); !strings.Contains(md, "Scale-out scenario skipped: redis-server not found on PATH.") {
		t.Errorf("a skipped scenario says:\n%s", md)
	}
}

func TestSharedCell(t *testing.T) {
	tests := []struct {
		applied, dropped, errs int
		want                   string
	}{
		{0, 0, 0, "0"},
		{657, 0, 0, "657"},
		{657, 3, 0, "657, 3 dropped"},
		{10, 0, 2, "10, 2 Redis errors"},
		{10, 1, 2, "10, 1 dropped, 2 Redis errors"},
	}
	for _, tt := range tests {
		x := ScaleoutResult{SharedApplied: tt.applied, SharedDropped: tt.dropped, ShareErrors: tt.errs}
		if got := x.sharedCell(); got != tt.want {
			t.Errorf("sharedCell(%d, %d, %d) = %q, want %q", tt.applied, tt.dropped, tt.errs, got, tt.want)
		}
	}
}

// uniform marks runs as the uniform workload's.
func uniform(runs ...ScaleoutResult) []ScaleoutResult {
	for i := range runs {
		runs[i].Workload = WorkloadUniform
	}
	return runs
}
