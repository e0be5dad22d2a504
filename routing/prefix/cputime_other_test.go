//go:build !linux

package prefix

import "testing"

// cpuTimer reports nothing where the thread's CPU time is not at hand.
type cpuTimer struct{}

func startCPU(*testing.B) *cpuTimer { return &cpuTimer{} }
func (*cpuTimer) stop()             {}
