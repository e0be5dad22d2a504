package prefix

import (
	"runtime"
	"syscall"
	"testing"
)

// threadCPU is the CPU time of the calling thread, which on a shared,
// overloaded machine measures the work better than the wall clock does.
func threadCPU() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(1 /* RUSAGE_THREAD */, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// cpuTimer reports, next to ns/op, the thread's CPU time per op
// ("cpu-ns/op"). It locks the goroutine to its thread for the run.
type cpuTimer struct {
	b     *testing.B
	start int64
}

func startCPU(b *testing.B) *cpuTimer {
	runtime.LockOSThread()
	return &cpuTimer{b: b, start: threadCPU()}
}

func (c *cpuTimer) stop() {
	used := threadCPU() - c.start
	runtime.UnlockOSThread()
	if c.b.N > 0 && used > 0 {
		c.b.ReportMetric(float64(used)/float64(c.b.N), "cpu-ns/op")
	}
}
