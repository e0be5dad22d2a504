package auth

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

func TestAddUserAndWatch(t *testing.T) {
	path := filepath.Join(t.TempDir(), "users.json")
	hash := mustHash(t, testPW)
	if err := AddUserToFile(path, User{Name: "ann", PasswordHash: hash, Models: []string{"qwen"}}); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v", fi.Mode())
	}
	users, err := NewUsers(nil)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var errs []error
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		WatchUsersFile(ctx, path, 10*time.Millisecond, users.Replace, func(err error) {
			mu.Lock()
			errs = append(errs, err)
			mu.Unlock()
		})
		close(done)
	}()
	defer func() { cancel(); <-done }()

	// A change is picked up.
	if err := AddUserToFile(path, User{Name: "ben", PasswordHash: hash}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, func() bool { _, err := users.Authenticate("ben", testPW); return err == nil })
	// Replacing a user (disabling it) is picked up.
	if err := AddUserToFile(path, User{Name: "ben", PasswordHash: hash, Disabled: true}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, func() bool { _, err := users.Authenticate("ben", testPW); return errors.Is(err, ErrInvalidCredentials) })
	// A broken file is reported and the users stay.
	if err := os.WriteFile(path, []byte(`{"users":[{"username":"x"`), 0o600); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(errs) > 0 })
	if _, err := users.Authenticate("ann", testPW); err != nil {
		t.Fatalf("users lost after a bad file: %v", err)
	}
	if err := AddUserToFile(path, User{Name: "cid", PasswordHash: hash}); err == nil {
		t.Fatal("AddUserToFile overwrote a file it could not read")
	}
}

func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in time")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
