package portlock

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"testing"
	"time"
)

// testApp names this run's locks: the abstract socket names are global to
// the machine, and two runs of these tests at once (two clones) must not
// take each other's. A child process is given its parent's name.
var testApp = func() string {
	if app := os.Getenv("PORTLOCK_APP"); app != "" {
		return app
	}
	return fmt.Sprintf("llmedge-test-%d-%d", os.Getpid(), time.Now().UnixNano())
}()

// The lock is per process and counted: this process may take it again
// (a reload), and it is free once every holder released it.
func TestAcquireCounts(t *testing.T) {
	r1, err := Acquire(testApp, "tcp/:1")
	if err != nil {
		t.Fatal(err)
	}
	r2, err := Acquire(testApp, "tcp/:1")
	if err != nil {
		t.Fatalf("the same process could not take its lock again: %v", err)
	}
	r1()
	r1() // twice is once
	if _, ok := held[testApp+"/tcp/:1"]; !ok {
		t.Fatal("released while still held")
	}
	r2()
	if _, ok := held[testApp+"/tcp/:1"]; ok {
		t.Fatal("not released")
	}
}

// Another process holding the lock makes Acquire fail with ErrHeld.
func TestAcquireHeldByAnotherProcess(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("locks are Linux only")
	}
	if os.Getenv("PORTLOCK_CHILD") == "1" {
		if _, err := Acquire(testApp, "tcp/:2"); err != nil {
			os.Exit(3)
		}
		os.Stdout.WriteString("held\n")
		select {} // hold until killed
	}
	cmd := exec.Command(os.Args[0], "-test.run", "^TestAcquireHeldByAnotherProcess$")
	cmd.Env = append(os.Environ(), "PORTLOCK_CHILD=1", "PORTLOCK_APP="+testApp)
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	buf := make([]byte, 5)
	if _, err := out.Read(buf); err != nil || string(buf) != "held\n" {
		t.Fatalf("child: %q %v", buf, err)
	}
	if _, err := Acquire(testApp, "tcp/:2"); !errors.Is(err, ErrHeld) {
		t.Fatalf("Acquire while another process holds it: %v", err)
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	release, err := Acquire(testApp, "tcp/:2")
	if err != nil {
		t.Fatalf("not free once the holder died: %v", err)
	}
	release()
}
