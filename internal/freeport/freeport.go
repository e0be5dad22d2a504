// Package freeport hands out loopback ports to servers that tests run as
// other processes (the gateway from a Caddyfile, Consul, Redis, Ollama).
// A server a test runs in its own process needs none of this: it listens
// on 127.0.0.1:0 and keeps the listener.
//
// A port is picked by the kernel (a listener on port 0), then closed so
// that the child can bind it: in between, another process may take it.
// Callers therefore start the child again on new ports when it fails to
// bind (see [AddrInUse]). What this package rules out is the suite taking
// one port twice:
//
//   - within a process, no port is handed out twice, nor one marked taken
//     (Mark: a port a child chose itself, as llmsim does);
//   - across processes, every port handed out or marked is locked for as
//     long as the process lives (an abstract Unix socket named after the
//     port, on Linux: released by the kernel however the process ends),
//     and ports another process locked are skipped. Test binaries of
//     several packages, or two clones running the suite at once, do not
//     get the same port from here.
//
// Ports below 10000 are never handed out: the quickstart's 8443, 2019,
// 2020 and 9101 onwards stay free for people running it beside the tests.
package freeport

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
)

// TB is what Must and Refusing use of a testing.TB (this package does not
// import testing: the benchmark tool, a program, uses it too).
type TB interface {
	Helper()
	Fatal(args ...any)
	Cleanup(func())
}

// lowest is the smallest port handed out.
const lowest = 10000

var (
	mu    sync.Mutex
	taken = map[int]bool{}
)

// Get returns a port that is free on every local address, for TCP and
// for UDP (Caddy serves HTTP/3 on the HTTPS port, Consul's Serf gossips
// on UDP), and that this process never handed out before.
func Get() (int, error) {
	mu.Lock()
	defer mu.Unlock()
	for range 100 {
		port, err := kernelPick()
		if err != nil {
			return 0, err
		}
		if port < lowest || taken[port] || !udpFree(port) {
			continue
		}
		if !lock(port) { // another process's
			continue
		}
		taken[port] = true
		return port, nil
	}
	return 0, errors.New("freeport: no free port found in 100 tries")
}

// GetN returns n distinct ports, as Get.
func GetN(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for len(ports) < n {
		p, err := Get()
		if err != nil {
			return nil, err
		}
		ports = append(ports, p)
	}
	return ports, nil
}

// Must is Get that fails the test on error.
func Must(t TB) int {
	t.Helper()
	p, err := Get()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Mark records port, bound by a child that chose it itself, as taken:
// Get will not hand it out in this process, nor (on Linux) in another,
// after the child is gone.
func Mark(port int) {
	mu.Lock()
	defer mu.Unlock()
	if !taken[port] {
		taken[port] = true
		lock(port)
	}
}

// AddrInUse reports whether a server's output says it could not bind its
// address because another socket has it: Go's and Redis's "address
// already in use", and llmedge's refusal of an address another llmedge
// process serves.
func AddrInUse(log string) bool {
	l := strings.ToLower(log)
	return strings.Contains(l, "address already in use") ||
		strings.Contains(l, "another llmedge process already serves")
}

func kernelPick() (int, error) {
	l, err := net.Listen("tcp", ":0")
	if err != nil {
		return 0, fmt.Errorf("freeport: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func udpFree(port int) bool {
	u, err := net.ListenPacket("udp", ":"+strconv.Itoa(port))
	if err != nil {
		return false
	}
	u.Close()
	return true
}

// Refusing returns a loopback port where connections are refused (a dead
// replica's address) for as long as the test runs: on Linux the test
// holds it bound without listening, so that no other socket can take it
// meanwhile.
func Refusing(t TB) int {
	t.Helper()
	port, release, err := refusing()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(release)
	return port
}
