package bench

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// doorsReport is a fixed run of the doors scenario: two doors at two
// sizes, the chat door within the targets at both, the anthropic door
// over the CPU target at 1 MB and with errors there.
func doorsReport() *Report {
	run := func(door string, size int, kind, path string, rate, cpu, p50, p99 float64, errs int) DoorRun {
		return DoorRun{Door: door, Size: size, Result: Result{Scenario: door + "-" + sizeName(size) + "-" + kind, Path: path, Kind: kind,
			Workers: 8, TargetRate: map[string]float64{"rate": 20}[kind], AchievedRate: rate, CPUPer1k: cpu, Errors: errs,
			Latency: &Summary{P50: p50, P99: p99}}}
	}
	r := &Report{Started: time.Date(2026, 11, 28, 0, 5, 0, 0, time.UTC), Seconds: 330, Command: "llmbench -scenarios doors",
		DoorsConfig: DefaultDoorsConfig().report(16)}
	r.DoorsConfig.Sizes, r.DoorsConfig.Rates, r.DoorsConfig.Turns, r.DoorsConfig.Rounds = []int{1 << 10, 1 << 20}, []float64{500, 19}, []int{5, 39}, 1
	r.Doors = []DoorRun{
		run("chat", 1<<10, "max", PathCaddy, 1000, 0.100, 1, 2, 0), run("chat", 1<<10, "max", PathLLMEdge, 950, 0.105, 1.1, 2.2, 0),
		run("chat", 1<<10, "rate", PathCaddy, 500, 0.200, 0.5, 1, 0), run("chat", 1<<10, "rate", PathLLMEdge, 500, 0.210, 0.52, 1.5, 0),
		run("anthropic", 1<<10, "max", PathLLMEdge, 900, 0.108, 1, 2, 0), run("anthropic", 1<<10, "max", PathCaddy, 1000, 0.100, 1, 2, 0),
		run("chat", 1<<20, "max", PathCaddy, 50, 5.0, 150, 300, 0), run("chat", 1<<20, "max", PathLLMEdge, 48, 5.2, 160, 310, 0),
		run("anthropic", 1<<20, "max", PathLLMEdge, 30, 8.0, 250, 500, 2), run("anthropic", 1<<20, "max", PathCaddy, 50, 5.0, 150, 300, 0),
	}
	r.DoorCounts = []DoorCount{{Door: "chat", Size: 1 << 10, Iterations: 200, Instructions: 163_312.4}, {Door: "chat", Size: 1 << 20, Iterations: 10, Instructions: 11_129_087}}
	r.finish()
	r.Seconds = 330
	return r
}

func TestDoorsMatrix(t *testing.T) {
	m := doorsReport().doorMatrix()
	if len(m) != 4 {
		t.Fatalf("%d cells, want 4: %+v", len(m), m)
	}
	c := m[0] // chat 1KB
	if c.Door != "chat" || c.Size != 1<<10 || !c.HasClosed || !c.HasOpen || !near(c.CPURatio, 1.05) || !near(c.RateRatio, 0.95) ||
		!near(c.OpenCPURatio, 1.05) || !near(c.AddedP50, 0.02) || !near(c.AddedP99, 0.5) || c.Instructions != 163_312.4 || !c.Met() {
		t.Errorf("chat 1KB: %+v", c)
	}
	a := m[1] // anthropic 1KB: throughput 0.90 is met, no open loop
	if a.Door != "anthropic" || !near(a.RateRatio, 0.9) || a.HasOpen || a.Instructions != 0 || !a.Met() {
		t.Errorf("anthropic 1KB: %+v", a)
	}
	if big := m[3]; !near(big.CPURatio, 1.6) || big.Errors != 2 || big.Met() {
		t.Errorf("anthropic 1MB: %+v", big)
	}
}

// TestDoorsMatrixRounds: the closed loop's ratios are the medians of the
// rounds', each round's llmedge run against the same round's Caddy run.
func TestDoorsMatrixRounds(t *testing.T) {
	run := func(round int, path string, rate, cpu float64) DoorRun {
		return DoorRun{Door: "chat", Size: 1 << 10, Round: round, Result: Result{Path: path, Kind: "max", AchievedRate: rate, CPUPer1k: cpu}}
	}
	r := &Report{Doors: []DoorRun{
		run(0, PathCaddy, 1000, 0.1), run(0, PathLLMEdge, 900, 0.11),
		run(1, PathLLMEdge, 1000, 0.22), run(1, PathCaddy, 500, 0.2),
		run(2, PathCaddy, 1000, 0.1), run(2, PathLLMEdge, 100, 0.5),
	}}
	m := r.doorMatrix()
	if len(m) != 1 {
		t.Fatalf("%d cells: %+v", len(m), m)
	}
	// CPU ratios 1.1, 1.1, 5; throughput 0.9, 2, 0.1.
	if f := m[0]; !near(f.CPURatio, 1.1) || !near(f.RateRatio, 0.9) || len(f.CPURatios) != 3 || !near(f.CPURatios[2], 5) || !f.Met() {
		t.Fatalf("%+v", f)
	}
}

func TestDoorsChecks(t *testing.T) {
	cs := doorsReport().doorsChecks()
	if len(cs) != 2 {
		t.Fatalf("%d checks, want one per door: %+v", len(cs), cs)
	}
	if c := cs[0]; !c.Met || c.Group != groupDoors || !strings.HasPrefix(c.Target, "chat door: CPU per request ≤ 1.10× and throughput ≥ 0.90×") ||
		c.Measured != "worst CPU 1.05× (1KB), worst throughput 0.95× (1KB); 2 of 2 sizes met" {
		t.Errorf("chat: %+v", c)
	}
	if c := cs[1]; c.Met || c.Measured != "worst CPU 1.60× (1MB), worst throughput 0.60× (1MB); 1 of 2 sizes met, 2 errors" {
		t.Errorf("anthropic: %+v", c)
	}
}

func TestDoorsMarkdown(t *testing.T) {
	r := doorsReport()
	r.DoorsCountSkipped = "valgrind is not installed here: no instruction counts"
	md := r.doorsMarkdown()
	for _, want := range []string{
		"Run 2026-11-28 00:05 UTC, 330 s: `llmbench -scenarios doors`",
		"messages: 1KB 6, 1MB 40",
		"open loop (req/s): 1KB 500, 1MB 19",
		"| chat | 1KB | 1.05× | 0.95× | 1.05× | +0.020 | +0.500 | 163,312 | yes |",
		"| anthropic | 1KB | 1.08× | 0.90× |  |  |  | – | yes |",
		"| chat | 1MB | 1.04× | 0.96× |  |  |  | 11,129,087 | yes |",
		"| anthropic | 1MB | 1.60× | 0.60× |  |  |  | – | no |",
		"Not counted in this run: valgrind is not installed here",
		"| anthropic | 1MB | closed, 8 workers | llmedge | 30 | 250.000 | 500.000 | 2 |",
		"| chat | 1KB | 20 req/s | caddy | 500 |",
		"| chat door: CPU per request ≤ 1.10× and throughput ≥ 0.90× stock Caddy at every size (closed loop) | worst CPU 1.05× (1KB)",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
	// The front page's summary takes the targets, one row per door.
	rows := summaryRows(doorsBeginMarker+"\n"+md+doorsEndMarker+"\n", "doors", "docs/benchmarks/doors.md")
	if len(rows) != 2 || !strings.Contains(rows[1], "| [doors](docs/benchmarks/doors.md) | anthropic door:") || !strings.HasSuffix(rows[1], "| no | 2026-11-28 00:05 |\n") {
		t.Errorf("summary rows %q", rows)
	}
}

// TestDoorsUpdateFile writes the doors section into its page and the
// summary's rows into the front page.
func TestDoorsUpdateFile(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "BENCHMARKS.md")
	if err := doorsReport().UpdateFile(file); err != nil {
		t.Fatal(err)
	}
	page, err := os.ReadFile(filepath.Join(dir, "docs", "benchmarks", "doors.md"))
	if err != nil || !strings.Contains(string(page), doorsBeginMarker) || !strings.Contains(string(page), "| chat | 1MB |") {
		t.Fatalf("doors page: %v\n%s", err, page)
	}
	front, _ := os.ReadFile(file)
	if !strings.Contains(string(front), "| [doors](docs/benchmarks/doors.md) | chat door:") {
		t.Errorf("front page without the doors' rows:\n%s", front)
	}
}

func TestDoorsRate(t *testing.T) {
	c := DefaultDoorsConfig()
	for size, want := range map[int]float64{1 << 10: 500, 16 << 10: 500, 100 << 10: 195, 1 << 20: 19, 100 << 20: 1} {
		if got := c.rate(size); got != want {
			t.Errorf("rate at %s: %g, want %g", sizeName(size), got, want)
		}
	}
}

func TestThousands(t *testing.T) {
	for v, want := range map[float64]string{0: "0", 999: "999", 1000: "1,000", 163312.4: "163,312", 11129087: "11,129,087", 1234567890: "1,234,567,890"} {
		if got := thousands(v); got != want {
			t.Errorf("thousands(%g) = %s, want %s", v, got, want)
		}
	}
}

func TestDoorsConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		edit func(*DoorsConfig)
		want string // in the error; "" for none
	}{
		{"the default", func(*DoorsConfig) {}, ""},
		{"off", func(c *DoorsConfig) { c.Doors = nil; c.Workers = 0 }, ""},
		{"unknown door", func(c *DoorsConfig) { c.Doors = []string{"chat", "gemini"} }, `unknown door "gemini"`},
		{"size over the body limit", func(c *DoorsConfig) { c.Sizes = []int{5 << 20} }, "at most"},
		{"size under the structure", func(c *DoorsConfig) { c.Sizes = []int{200} }, "its structure alone takes"},
		{"no workers", func(c *DoorsConfig) { c.Workers = 0 }, "workers"},
		{"no rate", func(c *DoorsConfig) { c.Bandwidth = 0 }, "bandwidth"},
		{"no window", func(c *DoorsConfig) { c.Duration = 0 }, "duration"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := DefaultDoorsConfig()
			tt.edit(&c)
			err := c.validate()
			if (tt.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.want)) {
				t.Errorf("error %v, want %q", err, tt.want)
			}
		})
	}
}
