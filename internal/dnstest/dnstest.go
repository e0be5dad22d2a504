// Package dnstest runs a real DNS server (a slim CoreDNS: the file,
// reload, bind, errors and log plugins) on a free loopback port for tests,
// serving one zone from a file the test writes and edits. The binary is
// <repo>/bin/coredns (built by `make coredns` from the pinned tools
// module) or $LLMEDGE_COREDNS_BIN. Under `go test -short` a missing binary
// skips the test; otherwise it fails it, so CI cannot silently lose the
// DNS tests.
package dnstest

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/llmedge/llmedge/internal/freeport"
)

// BinaryEnv names the environment variable that overrides the binary path.
const BinaryEnv = "LLMEDGE_COREDNS_BIN"

// ZoneReload is how often CoreDNS looks for a new serial in the zone file.
const ZoneReload = 200 * time.Millisecond

// Binary returns the coredns binary's path, skipping (with -short) or
// failing the test when it is missing.
func Binary(t testing.TB) string {
	t.Helper()
	path := os.Getenv(BinaryEnv)
	if path == "" {
		root, err := repoRoot()
		if err != nil {
			t.Fatalf("dnstest: %v", err)
		}
		path = filepath.Join(root, "bin", "coredns")
	}
	if _, err := os.Stat(path); err != nil {
		msg := fmt.Sprintf("coredns binary %s is missing: run `make coredns` (builds a slim CoreDNS from tools/coredns) or set %s", path, BinaryEnv)
		if testing.Short() {
			t.Skip(msg)
		}
		t.Fatal(msg)
	}
	return path
}

func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil &&
			strings.HasPrefix(strings.TrimSpace(string(b)), "module github.com/llmedge/llmedge\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no github.com/llmedge/llmedge go.mod above the working directory")
		}
		dir = parent
	}
}

// Server is a running CoreDNS authoritative for one zone.
type Server struct {
	// Addr is 127.0.0.1:PORT, for UDP and TCP.
	Addr string
	// Zone is the zone's origin, with its final dot ("llm.test.").
	Zone string

	bin, dir, zoneFile, corefile string

	mu      sync.Mutex
	serial  uint32
	records []string
	cmd     *exec.Cmd
	done    chan struct{}
	log     *lockedBuffer
}

// Start runs CoreDNS for zone (e.g. "llm.test") with records, lines of a
// zone file relative to the origin ("r1 5 IN A 127.0.0.2"), and stops it
// when the test ends.
func Start(t testing.TB, zone string, records ...string) *Server {
	t.Helper()
	s := &Server{bin: Binary(t), dir: t.TempDir(), Zone: dns.Fqdn(zone), records: records}
	s.zoneFile = filepath.Join(s.dir, "db.zone")
	s.corefile = filepath.Join(s.dir, "Corefile")
	if err := s.writeZone(); err != nil {
		t.Fatal(err)
	}
	var lastErr error
	// The port is free when picked, but CoreDNS binds it later: when
	// another process took it in between, start again on a new one.
	for try := 0; try < 5; try++ {
		port := freeport.Must(t)
		s.Addr = fmt.Sprintf("127.0.0.1:%d", port)
		corefile := fmt.Sprintf("%s:%d {\n\tbind 127.0.0.1\n\terrors\n\tlog\n\tfile %s {\n\t\treload %s\n\t}\n}\n",
			s.Zone, port, s.zoneFile, ZoneReload)
		if err := os.WriteFile(s.corefile, []byte(corefile), 0o644); err != nil {
			t.Fatal(err)
		}
		if lastErr = s.start(); lastErr == nil {
			t.Cleanup(func() {
				s.Kill()
				if t.Failed() {
					t.Logf("coredns log (last lines):\n%s", lastLines(s.log.String(), 40))
				}
			})
			return s
		}
		s.Kill()
		if !freeport.AddrInUse(s.log.String()) {
			break
		}
	}
	t.Fatalf("coredns did not start: %v", lastErr)
	return nil
}

func (s *Server) start() error {
	s.mu.Lock()
	s.log = &lockedBuffer{}
	cmd := exec.Command(s.bin, "-conf", s.corefile)
	cmd.Dir = s.dir
	cmd.Stdout, cmd.Stderr = s.log, s.log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // never outlive the test binary
	if err := cmd.Start(); err != nil {
		s.mu.Unlock()
		return err
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	s.cmd, s.done = cmd, done
	serial := s.serial
	s.mu.Unlock()
	return s.waitServing(serial, 20*time.Second)
}

// waitServing waits until the server answers the zone's SOA with serial.
func (s *Server) waitServing(serial uint32, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		select {
		case <-s.done:
			return fmt.Errorf("coredns exited early:\n%s", lastLines(s.log.String(), 20))
		default:
		}
		if got, ok := s.soaSerial(); ok && got == serial {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("coredns not serving serial %d after %s:\n%s", serial, timeout, lastLines(s.log.String(), 20))
}

func (s *Server) soaSerial() (uint32, bool) {
	q := new(dns.Msg)
	q.SetQuestion(s.Zone, dns.TypeSOA)
	c := &dns.Client{Timeout: 500 * time.Millisecond}
	resp, _, err := c.Exchange(q, s.Addr)
	if err != nil || resp.Rcode != dns.RcodeSuccess {
		return 0, false
	}
	for _, rr := range resp.Answer {
		if soa, ok := rr.(*dns.SOA); ok {
			return soa.Serial, true
		}
	}
	return 0, false
}

// SetRecords replaces the zone's records (lines as for Start), bumps the
// serial and waits until CoreDNS serves the new zone.
func (s *Server) SetRecords(t testing.TB, records ...string) {
	t.Helper()
	s.mu.Lock()
	s.records = records
	err := s.writeZone()
	serial, running := s.serial, s.cmd != nil
	s.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	if running {
		if err := s.waitServing(serial, 10*time.Second); err != nil {
			t.Fatal(err)
		}
	}
}

// writeZone writes the zone file with the next serial; atomically, so
// that CoreDNS never reads half a file.
func (s *Server) writeZone() error {
	s.serial++
	var b strings.Builder
	fmt.Fprintf(&b, "$ORIGIN %s\n", s.Zone)
	// A negative TTL of 1 s: a name that did not exist is asked again soon.
	fmt.Fprintf(&b, "@ 1 IN SOA ns.%s hostmaster.%s %d 60 60 3600 1\n", s.Zone, s.Zone, s.serial)
	fmt.Fprintf(&b, "@ 60 IN NS ns.%s\nns 60 IN A 127.0.0.1\n", s.Zone)
	for _, r := range s.records {
		b.WriteString(r + "\n")
	}
	tmp := s.zoneFile + ".tmp"
	if err := os.WriteFile(tmp, []byte(b.String()), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, s.zoneFile)
}

// Kill ends CoreDNS with SIGKILL and waits for it.
func (s *Server) Kill() {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-done
}

// Restart starts CoreDNS again on the same port after Kill, serving the
// zone as it is now.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		err := s.start()
		if err == nil {
			return
		}
		s.Kill()
		if time.Now().After(deadline) {
			t.Fatalf("coredns did not restart: %v", err)
		}
		time.Sleep(200 * time.Millisecond) // the port may linger a moment
	}
}

// Log returns what CoreDNS logged (each query, with the log plugin).
func (s *Server) Log() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.log.String()
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
