// Package redistest runs a real redis-server on a free loopback port for
// tests (from internal/freeport; started again on a new port when that one
// was taken meanwhile): no persistence, killed when the test ends. The binary is
// /usr/bin/redis-server (Debian's package redis-server) or
// $LLMEDGE_REDIS_BIN. Under `go test -short` a missing binary skips the
// test; otherwise it fails it, so CI cannot silently lose the Redis tests.
package redistest

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/llmedge/llmedge/internal/freeport"
)

// BinaryEnv names the environment variable that overrides the binary path.
const BinaryEnv = "LLMEDGE_REDIS_BIN"

// DefaultBinary is where Debian's redis-server package puts the server.
const DefaultBinary = "/usr/bin/redis-server"

// Binary returns the redis-server path, skipping (with -short) or failing
// the test when it is missing.
func Binary(t testing.TB) string {
	t.Helper()
	path := os.Getenv(BinaryEnv)
	if path == "" {
		path = DefaultBinary
	}
	if _, err := os.Stat(path); err != nil {
		msg := fmt.Sprintf("redis-server %s is missing: `apt-get install -y redis-server`, or set %s", path, BinaryEnv)
		if testing.Short() {
			t.Skip(msg)
		}
		t.Fatal(msg)
	}
	return path
}

// Server is a running redis-server.
type Server struct {
	// Addr is 127.0.0.1:PORT.
	Addr string
	// Password, when set, is required (requirepass).
	Password string

	bin string
	// args, when set, make the command line from the port (a replica, a
	// sentinel, a cluster node) instead of a plain server's.
	args func(port string) []string
	// dir is the server's working directory: a replica's full sync
	// writes an RDB file there even with saving off.
	dir  string
	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
	out  *lockedBuffer
}

// Start runs a redis-server on a free port and stops it when t ends.
func Start(t testing.TB) *Server { return StartWith(t, "") }

// StartWith is Start with a required password ("" for none).
func StartWith(t testing.TB, password string) *Server {
	t.Helper()
	return startServer(t, &Server{bin: Binary(t), Password: password})
}

func startServer(t testing.TB, s *Server) *Server {
	t.Helper()
	s.dir = t.TempDir()
	// The port is free when picked, but the server binds it later: when
	// another process took it in between, start again on a new one.
	for try := 1; ; try++ {
		port, err := freeport.Get()
		if err != nil {
			t.Fatal(err)
		}
		s.Addr = "127.0.0.1:" + strconv.Itoa(port)
		err = s.start()
		if err == nil {
			break
		}
		s.Kill()
		if try == 5 || !freeport.AddrInUse(s.output()) {
			t.Fatal(err)
		}
		t.Logf("redistest: port %d taken, again on a new one", port)
	}
	t.Cleanup(s.Kill)
	return s
}

func (s *Server) start() error {
	_, port, _ := net.SplitHostPort(s.Addr)
	args := []string{"--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--protected-mode", "no", "--daemonize", "no", "--loglevel", "warning"}
	if s.args != nil {
		args = s.args(port)
	}
	if s.Password != "" {
		args = append(args, "--requirepass", s.Password)
	}
	s.mu.Lock()
	s.out = new(lockedBuffer)
	s.cmd = exec.Command(s.bin, args...)
	s.cmd.Dir = s.dir
	s.cmd.Stdout, s.cmd.Stderr = s.out, s.out
	if err := s.cmd.Start(); err != nil {
		s.mu.Unlock()
		return fmt.Errorf("redistest: starting %s: %w", s.bin, err)
	}
	done := make(chan struct{})
	s.done = done
	cmd := s.cmd
	s.mu.Unlock()
	go func() { _ = cmd.Wait(); close(done) }()

	c := redis.NewClient(&redis.Options{Addr: s.Addr, Password: s.Password, MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-done:
			return fmt.Errorf("redistest: redis-server exited: %s", s.output())
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redistest: redis-server did not answer: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (s *Server) output() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.out.String()
}

// URL is the server's redis:// URL (with its password, if any).
func (s *Server) URL() string {
	if s.Password != "" {
		return "redis://:" + s.Password + "@" + s.Addr
	}
	return "redis://" + s.Addr
}

// Options are a universal client's options for the server.
func (s *Server) Options() *redis.UniversalOptions {
	return &redis.UniversalOptions{Addrs: []string{s.Addr}, Password: s.Password}
}

// Client returns a client of the server, closed when t ends.
func (s *Server) Client(t testing.TB) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: s.Addr, Password: s.Password})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// Kill ends the server with SIGKILL, as a crash: everything it held is
// gone (no persistence).
func (s *Server) Kill() {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-done
}

// Restart starts the server again on the same port, empty.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	s.Kill()
	if err := s.start(); err != nil {
		t.Fatal(err)
	}
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
