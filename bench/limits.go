package bench

import (
	"fmt"
	"syscall"
)

// fdsNeeded is how many open files the busiest process of a run needs:
// a proxy holds two sockets per stream (client and replica side).
func fdsNeeded(maxStreams int) uint64 { return uint64(2*maxStreams + 512) }

// raiseNoFile lifts this process's soft RLIMIT_NOFILE to at least need,
// and makes the children it starts inherit it. It fails, saying what to do, when
// the hard limit is lower.
func raiseNoFile(need uint64) error {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return err
	}
	if lim.Max < need {
		return fmt.Errorf("open-file limit too low: hard limit %d, this run needs %d; raise it (ulimit -Hn %d as root, or limits.conf) or run fewer streams", lim.Max, need, need)
	}
	// Set it even when it is high enough: the Go runtime raises its own
	// soft limit at start but gives children the original one unless the
	// program sets the limit itself.
	lim.Cur = max(lim.Cur, need)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return fmt.Errorf("raising the open-file limit to %d: %w (try ulimit -n %d)", lim.Max, err, need)
	}
	return nil
}
