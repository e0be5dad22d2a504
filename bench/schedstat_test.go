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
// done, in steps finer than a clock tick.
func TestReadTaskCPU(t *testing.T) {
	before, err := ReadTaskCPU(os.Getpid())
	if err != nil {
		t.Skipf("no schedstat here: %v", err)
	}
	spin := time.Now()
	for time.Since(spin) < 3*time.Millisecond {
	}
	after, err := ReadTaskCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if d := after - before; d < time.Millisecond || d%clockTick == 0 {
		t.Errorf("3 ms of spinning counted as %v", d)
	}
}
