package bench

import (
	"strings"
	"testing"
	"time"
)

// The tenants targets: the gateway's queue within the non-preemptive
// ideal (alone's p90 + 0.8 of a request), engine priority below it; a
// mode with failures meets nothing.
func TestTenantsChecks(t *testing.T) {
	alone := TenantsResult{Mode: TenantsAlone, Light: 30, TTFTP90Ms: 50, DurationP50Ms: 250} // ideal 250 ms
	tests := []struct {
		name   string
		res    []TenantsResult
		target string
		met    bool
	}{
		{"queue within", []TenantsResult{alone, {Mode: TenantsQueue, Light: 20, TTFTP90Ms: 250}}, "gateway queue only", true},
		{"queue beyond", []TenantsResult{alone, {Mode: TenantsQueue, Light: 20, TTFTP90Ms: 251}}, "gateway queue only", false},
		{"engine below", []TenantsResult{alone, {Mode: TenantsEngine, Light: 20, TTFTP90Ms: 60}}, "engine_priority fair", true},
		{"engine at the ideal", []TenantsResult{alone, {Mode: TenantsEngine, Light: 20, TTFTP90Ms: 250}}, "engine_priority fair", false},
		{"failures", []TenantsResult{alone, {Mode: TenantsEngine, Light: 20, Failed: 1, TTFTP90Ms: 60}}, "engine_priority fair", false},
		{"no reference", []TenantsResult{{Mode: TenantsEngine, Light: 20, TTFTP90Ms: 60}}, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &Report{Tenants: tt.res}
			cs := r.tenantsChecks()
			if tt.target == "" {
				if len(cs) != 0 {
					t.Fatalf("checks without the alone reference: %+v", cs)
				}
				return
			}
			if len(cs) != 1 || !strings.Contains(cs[0].Target, tt.target) || cs[0].Met != tt.met || cs[0].Group != groupTenants {
				t.Fatalf("checks %+v, want one on %q met %v", cs, tt.target, tt.met)
			}
		})
	}
}

// The scenario runs against real processes: the light user is answered
// in every mode, the engine preempts only with engine priority, and the
// report has its rows and targets.
func TestRunTenantsTiny(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binaries and runs processes: not with -short")
	}
	cfg := TinyConfig(buildBinaries(t))
	cfg.Rates, cfg.MaxWorkers, cfg.Streams, cfg.LargePrompt, cfg.ProfileScenario = nil, 0, nil, 0, ""
	cfg.Routing.Policies, cfg.Overload.Modes = nil, nil
	rep := runTiny(t, cfg, time.Minute)
	if len(rep.Tenants) != len(TenantsModes) {
		t.Fatalf("%d tenants results, want %d", len(rep.Tenants), len(TenantsModes))
	}
	for _, x := range rep.Tenants {
		if x.Light == 0 || x.Failed != 0 || x.TTFTP90Ms <= 0 {
			t.Errorf("%s: %d light answers, %d failed, p90 %g ms", x.Mode, x.Light, x.Failed, x.TTFTP90Ms)
		}
		if (x.Preemptions > 0) != (x.Mode == TenantsEngine) {
			t.Errorf("%s: %d preemptions", x.Mode, x.Preemptions)
		}
		if (x.HeavyPerS > 0) != (x.Mode != TenantsAlone) {
			t.Errorf("%s: heavy %g answers/s", x.Mode, x.HeavyPerS)
		}
	}
	md := rep.Markdown()
	for _, want := range []string{"#### Tenants", "| engine |", "Non-preemptive ideal", "engine_priority fair |"} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
}
