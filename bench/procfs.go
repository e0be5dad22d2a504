package bench

import (
	"bytes"
	"fmt"
	"os"
	"slices"
	"strconv"
	"time"
)

// clockTick is the unit of utime and stime in /proc/PID/stat: USER_HZ,
// which Linux fixes at 100 on every architecture Go supports
// (`getconf CLK_TCK` says so; Go cannot call sysconf without cgo).
const clockTick = 10 * time.Millisecond

// ProcSample is what /proc says about a process at one moment.
type ProcSample struct {
	CPU     time.Duration // user + system time so far, all threads
	RSS     int64         // VmRSS, bytes
	PeakR   int64         // VmHWM, bytes: peak RSS since start or the last ResetPeakRSS
	RSSAnon int64         // RssAnon, bytes: heap, stacks (the part the program controls)
	RSSFile int64         // RssFile, bytes: pages of the binary and other mapped files
}

// ReadProc samples /proc/PID/stat and /proc/PID/status.
func ReadProc(pid int) (ProcSample, error) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ProcSample{}, err
	}
	cpu, err := parseStatCPU(stat)
	if err != nil {
		return ProcSample{}, err
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return ProcSample{}, err
	}
	mem, err := parseStatusMem(status)
	if err != nil {
		return ProcSample{}, err
	}
	return ProcSample{CPU: cpu, RSS: mem["VmRSS"], PeakR: mem["VmHWM"], RSSAnon: mem["RssAnon"], RSSFile: mem["RssFile"]}, nil
}

// ResetPeakRSS sets the process's VmHWM back to its current RSS (Linux 4.0
// and later), so that the next sample's peak covers only what follows.
func ResetPeakRSS(pid int) error {
	return os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0)
}

// parseStatCPU returns utime+stime from the contents of /proc/PID/stat.
// The command name (field 2) may hold spaces and parentheses, so fields
// are counted from the last ')'.
func parseStatCPU(stat []byte) (time.Duration, error) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc stat: no ')' in %q", stat)
	}
	f := bytes.Fields(stat[i+1:])
	// f[0] is field 3 (state); utime is field 14, stime field 15.
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc stat: %d fields after the command, want at least 13", len(f))
	}
	var ticks int64
	for _, s := range f[11:13] {
		n, err := strconv.ParseInt(string(s), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc stat: %w", err)
		}
		ticks += n
	}
	return time.Duration(ticks) * clockTick, nil
}

// statusMemKeys are the /proc/PID/status lines parseStatusMem reads; the
// first two are required.
var statusMemKeys = []string{"VmRSS", "VmHWM", "RssAnon", "RssFile"}

// parseStatusMem returns the memory figures of statusMemKeys, in bytes,
// from the contents of /proc/PID/status.
func parseStatusMem(status []byte) (map[string]int64, error) {
	mem := map[string]int64{}
	for line := range bytes.Lines(status) {
		key, rest, ok := bytes.Cut(line, []byte(":"))
		if !ok || !slices.Contains(statusMemKeys, string(key)) {
			continue
		}
		f := bytes.Fields(rest)
		if len(f) != 2 || string(f[1]) != "kB" {
			return nil, fmt.Errorf("/proc status: unexpected line %q", line)
		}
		kb, err := strconv.ParseInt(string(f[0]), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("/proc status: %w", err)
		}
		mem[string(key)] = kb << 10
	}
	for _, k := range statusMemKeys[:2] {
		if _, ok := mem[k]; !ok {
			return nil, fmt.Errorf("/proc status: no %s", k)
		}
	}
	return mem, nil
}

// ReadMachineBusy returns the CPU time all cores have spent running
// processes since boot, from the first line of /proc/stat.
func ReadMachineBusy() (time.Duration, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, err
	}
	return parseMachineBusy(b)
}

// parseMachineBusy reads the "cpu" line of /proc/stat: user nice system
// idle iowait irq softirq steal ...; busy is user + nice + system, the
// time that is also charged to processes. Interrupt time is left out: it
// is charged to no process, and on loopback much of it is the
// benchmark's own network traffic.
func parseMachineBusy(stat []byte) (time.Duration, error) {
	line, _, _ := bytes.Cut(stat, []byte("\n"))
	f := bytes.Fields(line)
	if len(f) < 9 || string(f[0]) != "cpu" {
		return 0, fmt.Errorf("/proc/stat: unexpected first line %q", line)
	}
	var busy int64
	for _, s := range f[1:9] {
		if _, err := strconv.ParseInt(string(s), 10, 64); err != nil {
			return 0, fmt.Errorf("/proc/stat: %w", err)
		}
	}
	for _, s := range f[1:4] { // user, nice, system
		n, _ := strconv.ParseInt(string(s), 10, 64)
		busy += n
	}
	return time.Duration(busy) * clockTick, nil
}
