package freeport

import (
	"errors"
	"net"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// No port is handed out twice in a process, and none below 10000.
func TestGetDistinct(t *testing.T) {
	seen := map[int]bool{}
	ports, err := GetN(50)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ports {
		if seen[p] || p < lowest {
			t.Fatalf("port %d handed out twice or below %d: %v", p, lowest, ports)
		}
		seen[p] = true
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			t.Fatalf("port %d is not free: %v", p, err)
		}
		l.Close()
	}
}

// A port whose lock another process holds is not taken: the lock is what
// keeps test processes from handing out each other's ports.
func TestLockHeldElsewhere(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("cross-process locks are Linux only")
	}
	p, err := kernelPick()
	if err != nil {
		t.Fatal(err)
	}
	// A socket of this process stands in for the other process's: the
	// name is what counts.
	other, err := net.Listen("unix", "@llmedge-freeport/"+strconv.Itoa(p))
	if err != nil {
		t.Skipf("port %d locked already: %v", p, err)
	}
	mu.Lock()
	ok := lock(p)
	mu.Unlock()
	if ok {
		t.Fatalf("took the lock of port %d that another socket holds", p)
	}
	other.Close()
	mu.Lock()
	ok = lock(p)
	mu.Unlock()
	if !ok {
		t.Fatalf("the lock of port %d is not free once its holder closed it", p)
	}
}

// A refusing port refuses connections and cannot be bound by a listener
// (which, as Go's, asks for address reuse).
func TestRefusing(t *testing.T) {
	p := Refusing(t)
	addr := "127.0.0.1:" + strconv.Itoa(p)
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err == nil {
		c.Close()
		t.Fatalf("a connection to the refusing port %d was accepted", p)
	}
	if runtime.GOOS != "linux" {
		return
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial: %v, want connection refused", err)
	}
	if l, err := net.Listen("tcp", addr); err == nil {
		l.Close()
		t.Fatalf("a listener took the held port %d", p)
	}
	if l, err := net.Listen("tcp", ":"+strconv.Itoa(p)); err == nil {
		l.Close()
		t.Fatalf("a listener on every address took the held port %d", p)
	}
}

func TestAddrInUse(t *testing.T) {
	for log, want := range map[string]bool{
		"Error: loading initial config: ... listen tcp :41234: bind: address already in use":                    true,
		"# Warning: Could not create server TCP listening socket 127.0.0.1:41234: bind: Address already in use": true,
		"Error: ... another llmedge process already serves :41234":                                              true,
		"Error: adapting config using caddyfile: unrecognized directive":                                        false,
	} {
		if got := AddrInUse(log); got != want {
			t.Errorf("AddrInUse(%q) = %v", log, got)
		}
	}
}
