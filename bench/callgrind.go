package bench

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
)

// Instructions per request of each door's pipeline, counted as
// docs/benchmarks/hot-path.md counts BenchmarkPipeline: BenchmarkDoors
// (doors_pipeline_test.go) run under callgrind on one core without
// asynchronous preemption, with N+1 iterations and with one; the
// difference divided by N is one request's, the start-up and the setup
// cancelling out. Wall time on a shared machine moves by 2×; this count
// moves by a few percent.

// callgrindGODEBUG is the Go runtime's settings under callgrind: no
// asynchronous preemption (its signals make the count move from run to
// run), and no RDTSCP. The runtime reads the cycle counter with RDTSCP
// when CPUID offers it, and valgrind, which passes CPUID through, cannot
// execute it on every CPU (3.19 on AMD Zen 5 stops the program with
// SIGILL); the fallback, fences and RDTSC, it can.
const callgrindGODEBUG = "asyncpreemptoff=1,cpu.rdtscp=off"

// countDoors counts every cell of the doors scenario, or records why the
// counts are skipped.
func (r *runner) countDoors(ctx context.Context) error {
	dc := r.cfg.Doors
	valgrind, testBin, skipped := dc.callgrindTools(r.cfg.BinDir)
	if skipped != "" {
		r.report.DoorsCountSkipped = skipped
		r.log("doors: %s", skipped)
		return nil
	}
	for _, cell := range dc.cells() {
		n := countIterations(cell.size)
		bench := doorsBenchPattern(cell.door.Name, cell.size)
		per, err := instructionsPerRequest(ctx, valgrind, testBin, bench, n)
		if err != nil {
			return fmt.Errorf("callgrind of %s: %w", bench, err)
		}
		r.log("%-22s callgrind %.0f instructions per request (%d iterations)", cell.door.Name+"-"+sizeName(cell.size), per, n)
		r.report.DoorCounts = append(r.report.DoorCounts, DoorCount{Door: cell.door.Name, Size: cell.size, Iterations: n, Instructions: per})
	}
	return nil
}

// doorsBenchPattern selects BenchmarkDoors' sub-benchmark of door at
// size, and no other.
func doorsBenchPattern(door string, size int) string {
	return "^BenchmarkDoors$/^" + regexp.QuoteMeta(door) + "$/^" + sizeName(size) + "$"
}

// instructionsPerRequest runs bench in testBin under callgrind with n+1
// iterations and with one, and returns the difference per iteration.
func instructionsPerRequest(ctx context.Context, valgrind, testBin, bench string, n int) (float64, error) {
	one, err := callgrindCount(ctx, valgrind, testBin, bench, 1)
	if err != nil {
		return 0, err
	}
	many, err := callgrindCount(ctx, valgrind, testBin, bench, n+1)
	if err != nil {
		return 0, err
	}
	if many <= one {
		return 0, fmt.Errorf("%d iterations counted %d instructions, one %d", n+1, many, one)
	}
	return float64(many-one) / float64(n), nil
}

// callgrindCount runs bench in testBin for iterations under callgrind and
// returns the instructions counted.
func callgrindCount(ctx context.Context, valgrind, testBin, bench string, iterations int) (int64, error) {
	cmd := exec.CommandContext(ctx, valgrind, "--tool=callgrind", "--callgrind-out-file=/dev/null",
		testBin, "-test.run", "^$", "-test.bench", bench, "-test.benchtime", fmt.Sprintf("%dx", iterations))
	cmd.Env = append(os.Environ(), "GODEBUG="+callgrindGODEBUG, "GOMAXPROCS=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return 0, fmt.Errorf("%w\n%s%s", err, tail(stdout.String(), 800), tail(stderr.String(), 800))
	}
	if got := benchIterations(stdout.String()); got != iterations {
		return 0, fmt.Errorf("the benchmark ran %d iterations, want %d (does %s match one benchmark?):\n%s", got, iterations, bench, tail(stdout.String(), 800))
	}
	return parseCallgrindTotal(stderr.String())
}

// collected is callgrind's summary line of the events counted:
// "==PID== Collected : 294699453".
var collected = regexp.MustCompile(`(?m)^==\d+== Collected\s*:\s*(\d+)\s*$`)

// parseCallgrindTotal reads the instructions counted from callgrind's
// summary on stderr.
func parseCallgrindTotal(stderr string) (int64, error) {
	m := collected.FindAllStringSubmatch(stderr, -1)
	if len(m) != 1 {
		return 0, fmt.Errorf("callgrind's output has %d totals, want one:\n%s", len(m), tail(stderr, 800))
	}
	return strconv.ParseInt(m[0][1], 10, 64)
}

// benchIterations is the iteration count of the one benchmark line in a
// test binary's output ("BenchmarkDoors/chat/1MB  21  31674870 ns/op ..."),
// or 0 when there is not exactly one.
func benchIterations(stdout string) int {
	n, found := 0, 0
	for line := range strings.SplitSeq(stdout, "\n") {
		f := strings.Fields(line)
		if len(f) < 3 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		if v, err := strconv.Atoi(f[1]); err == nil {
			n, found = v, found+1
		}
	}
	if found != 1 {
		return 0
	}
	return n
}

// tail is the end of s, at most n bytes.
func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}
