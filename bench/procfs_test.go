package bench

import (
	"maps"
	"os"
	"testing"
	"time"
)

func TestParseStatCPU(t *testing.T) {
	tests := []struct {
		name    string
		stat    string
		want    time.Duration
		wantErr bool
	}{
		{"plain", "1234 (llmedge) S 1 1234 1234 0 -1 4194560 5000 0 0 0 250 50 0 0 20 0 9 0 100 1000 2000",
			300 * clockTick, false},
		{"name with spaces and parens", "42 (a) b (c) R 1 42 42 0 -1 0 0 0 0 0 7 3 0 0 20 0 1 0 1 1 1",
			10 * clockTick, false},
		{"truncated", "42 (x) R 1 2 3", 0, true},
		{"no parenthesis", "42 x R", 0, true},
		{"not a number", "1 (x) S 1 1 1 0 -1 0 0 0 0 0 u 1 0 0 20 0 1 0 1 1 1", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseStatCPU([]byte(tt.stat))
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Errorf("parseStatCPU = %v, %v; want %v, error %t", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestParseStatusMem(t *testing.T) {
	tests := []struct {
		name    string
		status  string
		want    map[string]int64
		wantErr bool
	}{
		{"all", "Name:\tllmedge\nVmPeak:\t  900 kB\nVmHWM:\t   30000 kB\nVmRSS:\t   25000 kB\nRssAnon:\t 5000 kB\nRssFile:\t 20000 kB\nThreads:\t9\n",
			map[string]int64{"VmHWM": 30000 << 10, "VmRSS": 25000 << 10, "RssAnon": 5000 << 10, "RssFile": 20000 << 10}, false},
		{"without the Rss split", "VmRSS:\t 1 kB\nVmHWM:\t 2 kB\n", map[string]int64{"VmRSS": 1 << 10, "VmHWM": 2 << 10}, false},
		{"missing HWM", "VmRSS:\t 1 kB\n", nil, true},
		{"bad unit", "VmRSS:\t 1 MB\nVmHWM:\t 1 kB\n", nil, true},
		{"not a number", "VmRSS:\t x kB\nVmHWM:\t 1 kB\n", nil, true},
		{"empty (kernel thread)", "Name:\tkthreadd\n", nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseStatusMem([]byte(tt.status))
			if (err != nil) != tt.wantErr || !maps.Equal(got, tt.want) {
				t.Errorf("parseStatusMem = %v, %v; want %v, error %t", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

// TestReadProcSelf checks the parsers against this very process.
func TestReadProcSelf(t *testing.T) {
	s, err := ReadProc(os.Getpid())
	if err != nil {
		t.Skipf("no /proc here: %v", err)
	}
	if s.RSS <= 0 || s.PeakR < s.RSS {
		t.Errorf("implausible sample %+v", s)
	}
	if err := ResetPeakRSS(os.Getpid()); err != nil {
		t.Logf("clear_refs not writable (old kernel?): %v", err)
	}
}

func TestParseMachineBusy(t *testing.T) {
	tests := []struct {
		name    string
		stat    string
		want    time.Duration
		wantErr bool
	}{
		{"typical", "cpu  100 5 50 9000 20 1 2 3 0 0\ncpu0 50 2 25 4500 10 0 1 1 0 0\n", 155 * clockTick, false},
		{"no guest fields", "cpu 1 1 1 1 1 1 1 1\n", 3 * clockTick, false},
		{"per-cpu line first", "cpu0 1 1 1 1 1 1 1 1\n", 0, true},
		{"short", "cpu 1 2 3\n", 0, true},
		{"not a number", "cpu 1 x 1 1 1 1 1 1\n", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseMachineBusy([]byte(tt.stat))
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Errorf("parseMachineBusy = %v, %v; want %v, error %t", got, err, tt.want, tt.wantErr)
			}
		})
	}
}
