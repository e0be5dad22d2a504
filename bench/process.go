package bench

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// process is a child process: the simulator or a proxy.
type process struct {
	name string
	cmd  *exec.Cmd
	log  *syncBuffer
	done chan struct{}
}

// syncBuffer is a bytes.Buffer safe for the concurrent writes of a
// child's stdout and stderr.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// tail returns the last n lines written.
func (s *syncBuffer) tail(n int) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	lines := strings.Split(strings.TrimRight(s.b.String(), "\n"), "\n")
	return strings.Join(lines[max(len(lines)-n, 0):], "\n")
}

// start runs cmd with its output kept for error messages (stdout only
// when the caller has not taken it already).
func start(name string, cmd *exec.Cmd) (*process, error) {
	p := &process{name: name, cmd: cmd, log: new(syncBuffer), done: make(chan struct{})}
	cmd.Stderr = p.log
	if cmd.Stdout == nil {
		cmd.Stdout = p.log
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	go func() { _ = cmd.Wait(); close(p.done) }()
	return p, nil
}

// pid is the child's process id.
func (p *process) pid() int { return p.cmd.Process.Pid }

// exited reports whether the child has ended.
func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM and, after a grace period, SIGKILL; it waits for the
// child to end.
func (p *process) stop() {
	if p == nil || p.exited() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// startSim runs bin/llmsim on a free loopback port and returns it with its
// base URL, read from the line it prints once listening. Its prefill costs
// nothing unless args say otherwise (a later flag wins): llmsim's default
// prefill time goes through one serialised lane, which would cap the
// request rates measured here at about a thousand per second.
func startSim(bin string, args ...string) (*process, string, error) {
	cmd := exec.Command(bin, append([]string{"-addr", "127.0.0.1:0", "-prefill-per-token", "0"}, args...)...)
	// An os.Pipe rather than StdoutPipe: Wait (running in the background)
	// must not close the end this function reads.
	out, w, err := os.Pipe()
	if err != nil {
		return nil, "", err
	}
	cmd.Stdout = w
	p, err := start("llmsim", cmd)
	w.Close()
	if err != nil {
		out.Close()
		return nil, "", err
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		p.stop()
		return nil, "", fmt.Errorf("llmsim did not start: %v\n%s", err, p.log.tail(20))
	}
	go func() { _, _ = io.Copy(io.Discard, out); out.Close() }()
	url, ok := strings.CutPrefix(strings.TrimSpace(line), "llmsim listening on ")
	if !ok {
		p.stop()
		return nil, "", fmt.Errorf("llmsim printed %q", line)
	}
	return p, url, nil
}
