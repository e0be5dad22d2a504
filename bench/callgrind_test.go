package bench

import (
	"context"
	"os"
	"os/exec"
	"regexp"
	"testing"
	"time"
)

func TestParseCallgrindTotal(t *testing.T) {
	const summary = "==19997== \n==19997== Events    : Ir\n==19997== Collected : 294699453\n==19997== \n==19997== I   refs:      294,699,453\n"
	tests := []struct {
		name    string
		stderr  string
		want    int64
		wantErr bool
	}{
		{"callgrind's summary", "==19997== Callgrind, a call-graph generating cache profiler\n" + summary, 294699453, false},
		{"the program's own output around it", "some log line\nCollected : 12\n" + summary + "more\n", 294699453, false},
		{"no summary (valgrind failed)", "valgrind: ./x: No such file or directory\n", 0, true},
		{"two processes' summaries (a child traced)", summary + "==20001== Collected : 5\n", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseCallgrindTotal(tt.stderr)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Errorf("got %d, %v; want %d, error %t", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestBenchIterations(t *testing.T) {
	tests := []struct {
		name, stdout string
		want         int
	}{
		{"one line", "goos: linux\nBenchmarkDoors/chat/1MB         \t      21\t  31674870 ns/op\t  33.10 MB/s\nPASS\n", 21},
		{"with GOMAXPROCS suffix", "BenchmarkDoors/chat/1KB-2 \t 201 \t 18104 ns/op\n", 201},
		{"no benchmark matched", "PASS\n", 0},
		{"two benchmarks matched", "BenchmarkDoors/chat/1KB 1 2 ns/op\nBenchmarkDoors/chat/16KB 1 3 ns/op\n", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := benchIterations(tt.stdout); got != tt.want {
				t.Errorf("got %d, want %d", got, tt.want)
			}
		})
	}
}

func TestDoorsBenchPattern(t *testing.T) {
	// The pattern selects one sub-benchmark: the names as b.Run makes
	// them, and no other door's or size's.
	p := doorsBenchPattern("chat", 1<<10)
	if p != "^BenchmarkDoors$/^chat$/^1KB$" {
		t.Fatalf("pattern %s", p)
	}
	parts := []string{"^BenchmarkDoors$", "^chat$", "^1KB$"}
	for i, name := range []string{"BenchmarkDoors", "chat", "1KB"} {
		if !regexp.MustCompile(parts[i]).MatchString(name) {
			t.Errorf("%s does not match %s", parts[i], name)
		}
	}
	if regexp.MustCompile("^1KB$").MatchString("100KB") || regexp.MustCompile("^chat$").MatchString("chatty") {
		t.Error("a pattern matches another sub-benchmark")
	}
}

// TestInstructionsPerRequest counts one cell with this test binary under
// valgrind, as llmbench does with bench.test: a count of a plausible
// size, and a larger one for a larger body.
func TestInstructionsPerRequest(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("runs valgrind: not with -short or -race")
	}
	valgrind, err := exec.LookPath("valgrind")
	if err != nil {
		t.Skip("valgrind is not installed")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	small, err := instructionsPerRequest(ctx, valgrind, os.Args[0], doorsBenchPattern("chat", 1<<10), 5)
	if err != nil {
		t.Fatal(err)
	}
	large, err := instructionsPerRequest(ctx, valgrind, os.Args[0], doorsBenchPattern("chat", 100<<10), 5)
	if err != nil {
		t.Fatal(err)
	}
	// A request through the pipeline is tens of thousands of
	// instructions at least; checking 100 KB more costs more.
	if small < 20_000 || small > 5_000_000 || large <= small {
		t.Errorf("chat 1KB %.0f, 100KB %.0f instructions per request", small, large)
	}
	if _, err := instructionsPerRequest(ctx, valgrind, os.Args[0], doorsBenchPattern("nosuchdoor", 1<<10), 2); err == nil {
		t.Error("a pattern that matches no benchmark was counted")
	}
}
