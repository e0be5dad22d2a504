package bench

import (
	"os"
	"testing"
	"time"
)

func TestParseSchedstat(t *testing.T) {
	tests := []struct {
		in      string
		want    time.Duration
		wantErr bool
	}{
		{"770279 153449 7\n", 770279, false},
		{"0 0 0", 0, false},
		{"12 34", 0, true},
		{"x 1 2", 0, true},
		{"-5 1 2", 0, true},
	}
	for _, tt := range tests {
		got, err := parseSchedstat([]byte(tt.in))
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("parseSchedstat(%q) = %v, %v; want %v, error %t", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}

// TestReadTaskCPU reads this process's threads: the time grows with work
// done, in steps finer than a clock tick. It spins until 3 ms of CPU are
// counted rather than for 3 ms of wall time, which a loaded machine may
// give the spinning thread only part of.
func TestReadTaskCPU(t *testing.T) {
	before, err := ReadTaskCPU(os.Getpid())
	if err != nil {
		t.Skipf("no schedstat here: %v", err)
	}
	var d time.Duration
	for deadline := time.Now().Add(10 * time.Second); d < 3*time.Millisecond; {
		if time.Now().After(deadline) {
			t.Fatalf("10 s of spinning counted as %v", d)
		}
		for spin := time.Now(); time.Since(spin) < time.Millisecond; {
		}
		after, err := ReadTaskCPU(os.Getpid())
		if err != nil {
			t.Fatal(err)
		}
		d = after - before
	}
	if d%clockTick == 0 {
		t.Errorf("CPU time %v counted in clock ticks", d)
	}
}
