package bench

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// ReadTaskCPU returns the time the process's threads have run on a CPU,
// from the first field of each /proc/PID/task/TID/schedstat, in
// nanoseconds: precise where utime+stime counts 10 ms ticks, which a run
// of a few dozen large requests (a 1 MB body's few milliseconds) cannot
// resolve. The time of a thread that exited is no longer counted; a Go
// server keeps its threads.
func ReadTaskCPU(pid int) (time.Duration, error) {
	dir := fmt.Sprintf("/proc/%d/task", pid)
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	var sum time.Duration
	for _, t := range tasks {
		b, err := os.ReadFile(filepath.Join(dir, t.Name(), "schedstat"))
		if errors.Is(err, fs.ErrNotExist) {
			continue // the thread ended since the listing
		}
		if err != nil {
			return 0, err
		}
		d, err := parseSchedstat(b)
		if err != nil {
			return 0, err
		}
		sum += d
	}
	return sum, nil
}

// parseSchedstat reads the time on CPU, the first of schedstat's three
// fields (on-CPU ns, waiting ns, time slices).
func parseSchedstat(b []byte) (time.Duration, error) {
	f := bytes.Fields(b)
	if len(f) != 3 {
		return 0, fmt.Errorf("schedstat: %q, want three fields", b)
	}
	ns, err := strconv.ParseInt(string(f[0]), 10, 64)
	if err != nil || ns < 0 {
		return 0, fmt.Errorf("schedstat: %q", b)
	}
	return time.Duration(ns), nil
}
