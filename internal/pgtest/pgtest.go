// Package pgtest runs a real PostgreSQL server for tests: a fresh cluster
// (initdb) in a temporary folder, on a free loopback port (from
// internal/freeport; started again on a new port when that one was taken
// meanwhile), without fsync, removed when the test ends. The binaries
// (initdb, postgres) are looked for in $LLMEDGE_POSTGRES_BIN, then
// /usr/local/bin, then /usr/lib/postgresql/<version>/bin (Debian's
// postgresql package). A missing binary skips the test with the reason.
//
// PostgreSQL refuses to run as root: as root, the cluster is made and run
// as the postgres user (or nobody), the folder handed to it.
package pgtest

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/llmedge/llmedge/internal/freeport"
)

// BinaryEnv names the environment variable of the binaries' folder.
const BinaryEnv = "LLMEDGE_POSTGRES_BIN"

// RequireEnv names the environment variable that turns a missing
// PostgreSQL from a skip into a failure: .ci/run sets it, having installed
// PostgreSQL, so that the ledger's PostgreSQL tests cannot pass unrun.
const RequireEnv = "LLMEDGE_TEST_POSTGRES"

// skip skips the test, or fails it when RequireEnv is 1.
func skip(t testing.TB, format string, args ...any) {
	t.Helper()
	if os.Getenv(RequireEnv) == "1" {
		t.Fatalf(format, args...)
	}
	t.Skipf(format, args...)
}

// BinDir returns the folder holding initdb and postgres, skipping the
// test when there is none (failing it under RequireEnv).
func BinDir(t testing.TB) string {
	t.Helper()
	dirs := []string{os.Getenv(BinaryEnv), "/usr/local/bin"}
	versions, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Sort(sort.Reverse(sort.StringSlice(versions)))
	dirs = append(dirs, versions...)
	for _, d := range dirs {
		if d == "" {
			continue
		}
		if isFile(filepath.Join(d, "initdb")) && isFile(filepath.Join(d, "postgres")) {
			return d
		}
	}
	skip(t, "PostgreSQL's initdb and postgres are missing (looked in $%s, /usr/local/bin, /usr/lib/postgresql/*/bin): "+
		"`apt-get install -y postgresql`, or set %s to their folder", BinaryEnv, BinaryEnv)
	return ""
}

func isFile(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}

// Server is a running PostgreSQL.
type Server struct {
	// DSN connects to its postgres database as its superuser, postgres.
	DSN  string
	Port int

	dir  string
	bin  string
	cred *syscall.Credential
	// extra are more -c settings of the server (a primary's replication).
	extra []string
	mu    sync.Mutex
	cmd   *exec.Cmd
	done  chan struct{}
	out   *lockedBuffer
}

// Start makes a cluster and runs it until t ends.
func Start(t testing.TB) *Server { return start(t, nil) }

func start(t testing.TB, extra []string) *Server {
	t.Helper()
	s := &Server{bin: BinDir(t), extra: extra}
	dir, err := os.MkdirTemp("", "pgtest-")
	if err != nil {
		t.Fatal(err)
	}
	s.dir = dir
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if os.Geteuid() == 0 {
		if s.cred, err = unprivileged(); err != nil {
			skip(t, "pgtest: running as root and %v", err)
		}
		if err := os.Chown(dir, int(s.cred.Uid), int(s.cred.Gid)); err != nil {
			t.Fatal(err)
		}
	}
	data := filepath.Join(dir, "data")
	initdb := s.command(filepath.Join(s.bin, "initdb"), "-D", data, "-U", "postgres", "-A", "trust", "--no-sync", "-E", "UTF8")
	var out bytes.Buffer
	initdb.Stdout, initdb.Stderr = &out, &out
	if err := initdb.Run(); err != nil {
		t.Fatalf("pgtest: initdb: %v\n%s", err, out.String())
	}
	for try := 1; ; try++ {
		port, err := freeport.Get()
		if err != nil {
			t.Fatal(err)
		}
		s.Port = port
		s.DSN = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)
		err = s.start(data)
		if err == nil {
			break
		}
		s.Kill()
		if try == 5 || !freeport.AddrInUse(s.output()) {
			t.Fatal(err)
		}
		t.Logf("pgtest: port %d taken, again on a new one", port)
	}
	t.Cleanup(s.Kill)
	return s
}

// unprivileged is the user a root test runs PostgreSQL as.
func unprivileged() (*syscall.Credential, error) {
	for _, name := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
	}
	return nil, fmt.Errorf("there is no postgres or nobody user to run PostgreSQL as")
}

func (s *Server) command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.Dir = s.dir
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Credential: s.cred}
	return cmd
}

func (s *Server) start(data string) error {
	s.mu.Lock()
	s.out = new(lockedBuffer)
	args := []string{"-D", data, "-p", strconv.Itoa(s.Port),
		"-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories=" + s.dir,
		"-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off"}
	s.cmd = s.command(filepath.Join(s.bin, "postgres"), append(args, s.extra...)...)
	s.cmd.Stdout, s.cmd.Stderr = s.out, s.out
	if err := s.cmd.Start(); err != nil {
		s.mu.Unlock()
		return fmt.Errorf("pgtest: starting postgres: %w", err)
	}
	done := make(chan struct{})
	s.done = done
	cmd := s.cmd
	s.mu.Unlock()
	go func() { _ = cmd.Wait(); close(done) }()

	// Ready when it logs so (a replica: read-only connections) and accepts
	// connections on its port.
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case <-done:
			return fmt.Errorf("pgtest: postgres exited:\n%s", s.output())
		default:
		}
		if bytes.Contains([]byte(s.output()), []byte("ready to accept") /* "connections", or "read-only connections" on a replica */) {
			if c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(s.Port), time.Second); err == nil {
				c.Close()
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("pgtest: postgres did not start within 30s:\n%s", s.output())
		}
		time.Sleep(20 * time.Millisecond) // polling the log
	}
}

// Kill stops the server at once (its data is thrown away anyway): an
// immediate shutdown (SIGQUIT), which takes its backends along, then
// SIGKILL if it lingers.
func (s *Server) Kill() {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGQUIT)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
}

func (s *Server) output() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.out == nil {
		return ""
	}
	return s.out.String()
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

// Restart starts the server again on its data and port after Kill (an
// outage: what was committed before is there again).
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	if err := s.start(filepath.Join(s.dir, "data")); err != nil {
		t.Fatal(err)
	}
}
