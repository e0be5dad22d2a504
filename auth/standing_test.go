package auth

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestAPIKeyStanding: a key known by its id stands until it is revoked,
// expires, or its user is disabled; the answer names which.
func TestAPIKeyStanding(t *testing.T) {
	ctx := context.Background()
	c := newClock()
	k := newTestKeys(t, newMemStorage(), c)
	_, live, err := k.Create(ctx, NewAPIKey{User: "alice", TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	_, revoked, _ := k.Create(ctx, NewAPIKey{User: "alice", TTL: time.Hour})
	_, short, _ := k.Create(ctx, NewAPIKey{User: "alice", TTL: time.Minute})
	_, carols, _ := k.Create(ctx, NewAPIKey{User: "carol", TTL: time.Hour})
	if _, err := k.Revoke(ctx, revoked.ID); err != nil {
		t.Fatal(err)
	}
	c.Advance(2 * time.Minute)
	users := k.Users.All()
	for i := range users {
		users[i].Disabled = users[i].Name == "carol"
	}
	if err := k.Users.Replace(users); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, id string
		want     error
	}{
		{"live", live.ID, nil},
		{"revoked", revoked.ID, ErrAPIKeyInvalid},
		{"never issued", "0123456789abcdef", ErrAPIKeyInvalid},
		{"expired", short.ID, ErrAPIKeyExpired},
		{"its user disabled", carols.ID, ErrOwnerRevoked},
	} {
		if err := k.Standing(tc.id); !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
			t.Errorf("%s: Standing = %v, want %v", tc.name, err, tc.want)
		}
	}
	// A key revoked on another instance is seen at the next reload.
	other := &APIKeys{Storage: k.Storage, Users: k.Users, Now: c.Now, UnknownReloadEvery: -1}
	if _, err := other.Revoke(ctx, live.ID); err != nil {
		t.Fatal(err)
	}
	if err := k.Standing(live.ID); err != nil {
		t.Fatalf("before the reload: %v", err)
	}
	if err := k.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	if err := k.Standing(live.ID); !errors.Is(err, ErrAPIKeyInvalid) {
		t.Fatalf("after the reload: %v", err)
	}
}
