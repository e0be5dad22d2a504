package bench

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestLedgerOrder(t *testing.T) {
	tests := []struct {
		round int
		want  [2]bool
	}{{0, [2]bool{false, true}}, {1, [2]bool{true, false}}, {2, [2]bool{false, true}}}
	for _, tt := range tests {
		if got := ledgerOrder(tt.round); got != tt.want {
			t.Errorf("round %d: %v, want %v", tt.round, got, tt.want)
		}
	}
}

func TestLedgerTotalsAndRatios(t *testing.T) {
	tests := []struct {
		name           string
		rs             []LedgerResult
		off, on, ratio float64
		rounds         []float64
	}{
		{"none", nil, 0, 0, 0, nil},
		{"without only", []LedgerResult{{Round: 1, OK: 1000, CPUSeconds: 0.4, CPUPer1k: 0.4}}, 0.4, 0, 0, nil},
		{"one round", []LedgerResult{
			{Round: 1, OK: 1000, CPUSeconds: 0.4, CPUPer1k: 0.4},
			{Round: 1, Ledger: true, OK: 1000, CPUSeconds: 0.42, CPUPer1k: 0.42},
		}, 0.4, 0.42, 1.05, []float64{1.05}},
		// The totals weigh the rounds by their requests: not the mean of
		// the rounds' ratios.
		{"two rounds", []LedgerResult{
			{Round: 1, OK: 1000, CPUSeconds: 0.4, CPUPer1k: 0.4},
			{Round: 1, Ledger: true, OK: 1000, CPUSeconds: 0.44, CPUPer1k: 0.44},
			{Round: 2, Ledger: true, OK: 3000, CPUSeconds: 1.2, CPUPer1k: 0.4},
			{Round: 2, OK: 3000, CPUSeconds: 1.2, CPUPer1k: 0.4},
		}, 0.4, 0.41, 1.025, []float64{1.1, 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			off, on, ratio := ledgerTotals(tt.rs)
			if !near(off, tt.off) || !near(on, tt.on) || !near(ratio, tt.ratio) {
				t.Errorf("totals %g, %g, ratio %g; want %g, %g, %g", off, on, ratio, tt.off, tt.on, tt.ratio)
			}
			got := ledgerRoundRatios(tt.rs)
			if len(got) != len(tt.rounds) {
				t.Fatalf("round ratios %v, want %v", got, tt.rounds)
			}
			for i := range got {
				if !near(got[i], tt.rounds[i]) {
					t.Errorf("round ratios %v, want %v", got, tt.rounds)
				}
			}
		})
	}
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestLedgerChecks(t *testing.T) {
	base := func(onCPU float64, records int64, errs int) *Report {
		r := &Report{LedgerConfig: DefaultLedgerConfig().report(16), LedgerRecords: records, Ledger: []LedgerResult{
			{Round: 1, OK: 8000, CPUSeconds: 3.2, CPUPer1k: 0.4},
			{Round: 1, Ledger: true, OK: 8000, CPUSeconds: onCPU, CPUPer1k: onCPU / 8, Errors: errs},
		}}
		r.finish()
		return r
	}
	tests := []struct {
		name         string
		rep          *Report
		cpuMet, recs bool
	}{
		{"within", base(3.28, 9000, 0), true, true},
		{"over", base(3.36, 9000, 0), false, true},
		{"records missing", base(3.2, 7999, 0), true, false},
		{"errors shown, not failed", base(3.2, 9000, 1), true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var cs []Check
			for _, c := range tt.rep.Checks {
				if c.Group == groupLedger {
					cs = append(cs, c)
				}
			}
			if len(cs) != 2 {
				t.Fatalf("checks %+v", cs)
			}
			if cs[0].Met != tt.cpuMet || cs[1].Met != tt.recs {
				t.Errorf("met %t, %t; want %t, %t: %+v", cs[0].Met, cs[1].Met, tt.cpuMet, tt.recs, cs)
			}
			md := tt.rep.Markdown()
			for _, want := range []string{"#### Usage ledger", "| 1 | ledger sqlite |", "CPU per request with the ledger ≤ 1.03× without (rate-1000)"} {
				if !strings.Contains(md, want) {
					t.Errorf("markdown lacks %q:\n%s", want, md)
				}
			}
		})
	}
	if cs := (&Report{}).ledgerChecks(); cs != nil {
		t.Errorf("checks without the scenario: %+v", cs)
	}
}

// TestCaddyfilesLedger: the two gateways differ by the ledger line only.
func TestCaddyfilesLedger(t *testing.T) {
	pc := proxyConfig{AdminPort: 1, Port: 2, Data: "/tmp/x", Replica: "http://127.0.0.1:3", Hash: "h"}
	off, err := pc.render(caddyfileLedgerOff)
	if err != nil {
		t.Fatal(err)
	}
	on, err := pc.render(caddyfileLedgerOn)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Replace(string(on), "\t\tledger sqlite /tmp/x/ledger.db\n", "", 1); got != string(off) {
		t.Errorf("the gateways differ by more than the ledger:\n%s\n---\n%s", on, off)
	}
}

// ledgerOnly is cfg with the ledger scenario alone, in its tiny form.
func ledgerOnly(cfg Config) Config {
	cfg.Rates, cfg.MaxWorkers, cfg.Streams, cfg.LargePrompt, cfg.ProfileScenario = nil, 0, nil, 0, ""
	cfg.Routing.Policies, cfg.Overload.Modes, cfg.Tenants.Modes = nil, nil, nil
	cfg.Doors = DoorsConfig{}
	cfg.Ledger = tinyLedgerConfig()
	cfg.Ledger.Rounds = 2
	return cfg
}

// TestRunLedgerTiny runs the ledger scenario, two rounds: every run
// answers without errors, the ledger holds every answer, and the report
// has its rows and targets.
func TestRunLedgerTiny(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binaries and runs processes: not with -short")
	}
	cfg := ledgerOnly(TinyConfig(buildBinaries(t)))
	rep := runTiny(t, cfg, 2*time.Minute)
	if len(rep.Ledger) != 4 {
		t.Fatalf("%d ledger results, want 4", len(rep.Ledger))
	}
	var with []bool
	answered := 0
	for _, x := range rep.Ledger {
		with = append(with, x.Ledger)
		if x.OK == 0 || x.Errors != 0 || x.CPUSeconds <= 0 || x.CPUPer1k <= 0 || x.P50Ms <= 0 {
			t.Errorf("round %d %s: %+v", x.Round, ledgerLabel(x.Ledger), x)
		}
		if x.Ledger {
			answered += x.OK
		}
	}
	if !slices.Equal(with, []bool{false, true, true, false}) {
		t.Errorf("run order %v", with)
	}
	if rep.LedgerRecords < int64(answered) {
		t.Errorf("%d records in the ledger for %d answers", rep.LedgerRecords, answered)
	}
	md := rep.Markdown()
	for _, want := range []string{"#### Usage ledger", "| 2 | no ledger |", "CPU per request with the ledger ≤ 1.03× without (rate-50)",
		"every answered request recorded", "Ratio with / without, per round"} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
}
