package auth

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/llmedge/llmedge/api"
)

// A key's class is its own, or else its user's; an access token's is its
// user's in the users file; an outside identity's is standard.
func TestPriorityOf(t *testing.T) {
	ctx := context.Background()
	users, err := NewUsers([]User{
		{Name: "int", PasswordHash: mustHash(t, testPW), Models: []string{"m"}, Priority: "critical"},
		{Name: "batch", PasswordHash: mustHash(t, testPW), Models: []string{"m"}, Priority: "sheddable"},
		{Name: "plain", PasswordHash: mustHash(t, testPW), Models: []string{"m"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	k := &APIKeys{Storage: newMemStorage(), Users: users, Now: newClock().Now, UnknownReloadEvery: -1}
	if err := k.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	key := func(user, prio string) *Principal {
		t.Helper()
		s, info, err := k.Create(ctx, NewAPIKey{User: user, Priority: prio})
		if err != nil {
			t.Fatal(err)
		}
		if info.Priority != prio {
			t.Errorf("info priority %q, want %q", info.Priority, prio)
		}
		p, err := k.Verify(s)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		name string
		p    *Principal
		want api.Priority
	}{
		{"a key of its own class", key("int", "sheddable"), api.PrioritySheddable},
		{"a key taking its user's", key("batch", ""), api.PrioritySheddable},
		{"a key of a plain user", key("plain", ""), api.PriorityStandard},
		{"a critical key of a plain user", key("plain", "critical"), api.PriorityCritical},
		{"a token of a critical user", &Principal{Subject: "int"}, api.PriorityCritical},
		{"a token of a plain user", &Principal{Subject: "plain"}, api.PriorityStandard},
		{"an unknown user", &Principal{Subject: "nobody"}, api.PriorityStandard},
		{"an outside identity of a local user's name", &Principal{Subject: "int", Provider: "https://idp"}, api.PriorityStandard},
		{"no principal", nil, api.PriorityStandard},
	} {
		if got := PriorityOf(users, tc.p); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
	if _, _, err := k.Create(ctx, NewAPIKey{User: "plain", Priority: "urgent"}); !errors.Is(err, ErrAPIKeyRequest) ||
		!strings.Contains(err.Error(), "critical, standard or sheddable") {
		t.Errorf("a key of an unknown class: %v", err)
	}
	_, err = NewUsers([]User{{Name: "x", PasswordHash: mustHash(t, testPW), Priority: "high"}})
	if err == nil || !strings.Contains(err.Error(), `user "x"`) {
		t.Errorf("a user of an unknown class: %v", err)
	}
}

// The users file keeps a user's class; one that names no class is not
// written.
func TestUsersFilePriority(t *testing.T) {
	path := t.TempDir() + "/users.json"
	if err := AddUserToFile(path, User{Name: "batch", PasswordHash: mustHash(t, testPW), Priority: "sheddable"}); err != nil {
		t.Fatal(err)
	}
	if err := AddUserToFile(path, User{Name: "x", PasswordHash: mustHash(t, testPW), Priority: "urgent"}); err == nil {
		t.Error("a user of an unknown class was written")
	}
	users, err := LoadUsersFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(users) != 1 || users[0].Priority != "sheddable" {
		t.Fatalf("users %+v", users)
	}
	u, err := NewUsers(users)
	if err != nil {
		t.Fatal(err)
	}
	if got := PriorityOf(u, &Principal{Subject: "batch"}); got != api.PrioritySheddable {
		t.Errorf("class %v", got)
	}
}
