package pgtest

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/llmedge/llmedge/internal/freeport"
)

// StartPrimary is Start for a primary that a replica will follow
// (StartReplica): its commits wait until the replica has written them
// (synchronous replication), so that a record the primary acknowledged is
// on the replica when the primary stops. Until a replica connects, commits
// wait: start the replica before writing.
func StartPrimary(t testing.TB) *Server {
	t.Helper()
	return start(t, []string{"-c", "synchronous_standby_names=*", "-c", "synchronous_commit=remote_write",
		"-c", "wal_level=replica", "-c", "max_wal_senders=4"})
}

// StartReplica copies primary (pg_basebackup) into a streaming replica
// of it on a free port, read-only until Promote.
func StartReplica(t testing.TB, primary *Server) *Server {
	t.Helper()
	s := &Server{bin: primary.bin, cred: primary.cred}
	dir, err := os.MkdirTemp("", "pgtest-replica-")
	if err != nil {
		t.Fatal(err)
	}
	s.dir = dir
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if s.cred != nil {
		if err := os.Chown(dir, int(s.cred.Uid), int(s.cred.Gid)); err != nil {
			t.Fatal(err)
		}
	}
	basebackup := filepath.Join(s.bin, "pg_basebackup")
	if !isFile(basebackup) {
		basebackup = "/usr/bin/pg_basebackup"
	}
	data := filepath.Join(dir, "data")
	// -R writes standby.signal and the primary's conninfo.
	cmd := s.command(basebackup, "-h", "127.0.0.1", "-p", strconv.Itoa(primary.Port), "-U", "postgres",
		"-D", data, "-R", "-X", "stream", "--no-sync")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("pgtest: pg_basebackup: %v\n%s", err, out.String())
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
		if try == 5 || !strings.Contains(s.output(), "already in use") {
			t.Fatal(err)
		}
	}
	t.Cleanup(s.Kill)
	return s
}

// Stop shuts the server down cleanly (a fast shutdown, SIGINT): a
// primary first sends its replicas everything it wrote.
func (s *Server) Stop() {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return
	}
	_ = cmd.Process.Signal(os.Interrupt)
	<-done
}

// Promote makes a replica the primary (pg_ctl promote, waiting until it
// accepts writes).
func (s *Server) Promote(t testing.TB) {
	t.Helper()
	ctl := filepath.Join(s.bin, "pg_ctl")
	if !isFile(ctl) {
		t.Fatalf("pgtest: %s is missing", ctl)
	}
	cmd := s.command(ctl, "promote", "-w", "-D", filepath.Join(s.dir, "data"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("pgtest: pg_ctl promote: %v\n%s", err, out)
	}
}

// MultiHostDSN is a DSN naming every server, that connects only to the
// one that accepts writes (target_session_attrs=read-write).
func MultiHostDSN(servers ...*Server) string {
	hosts := make([]string, len(servers))
	for i, s := range servers {
		hosts[i] = "127.0.0.1:" + strconv.Itoa(s.Port)
	}
	return "postgres://postgres@" + strings.Join(hosts, ",") + "/postgres?sslmode=disable&target_session_attrs=read-write&connect_timeout=2"
}
