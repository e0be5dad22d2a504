package auth

import (
	"strings"
	"testing"
)

func TestCheckNamespaces(t *testing.T) {
	kc := Namespace{Source: "https://kc.example/realms/a", Prefix: "kc:"}
	tests := []struct {
		name string
		ns   []Namespace
		want string // in the error; "" for none
	}{
		{"none", nil, ""},
		{"distinct", []Namespace{kc, {Source: "mtls", Prefix: "cert:"}}, ""},
		{"defaults", []Namespace{{Source: "https://a.example", Prefix: "https://a.example#"}, {Source: "https://a.example/x", Prefix: "https://a.example/x#"}}, ""},
		{"one source twice", []Namespace{kc, kc}, ""},
		{"same prefix", []Namespace{kc, {Source: "mtls", Prefix: "kc:"}}, `https://kc.example/realms/a (user_prefix "kc:") and of mtls (user_prefix "kc:")`},
		{"one starts the other", []Namespace{kc, {Source: "https://other.example", Prefix: "kc:x:"}}, `user_prefix "kc:x:"`},
		{"empty", []Namespace{{Source: "mtls"}}, "mtls: its principals have no namespace"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckNamespaces(tt.ns)
			if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
				t.Fatalf("err %v, want %q", err, tt.want)
			}
		})
	}
}

// TestReserveNamespaces: a local user whose name lies in an outside
// source's namespace is refused, naming both, at Reserve (the load) and
// at every later Replace (a users-file reload), which keeps the users.
func TestReserveNamespaces(t *testing.T) {
	kc := Namespace{Source: "https://kc.example/realms/a", Prefix: "kc:"}
	user := func(name string) User { return User{Name: name, PasswordHash: mustHash(t, testPW)} }
	tests := []struct {
		name    string
		users   []User
		ns      []Namespace
		reload  []User
		want    string // Reserve's error
		wantRel string // Replace's error
	}{
		{"bare names beside a prefix", []User{user("alice"), user("eve")}, []Namespace{kc}, []User{user("bob")}, "", ""},
		{"a local user in the namespace", []User{user("alice"), user("kc:eve")}, []Namespace{kc}, nil,
			`local user "kc:eve" has a name in the namespace of https://kc.example/realms/a (user_prefix "kc:")`, ""},
		{"in a default namespace", []User{user("https://kc.example/realms/a#eve")}, []Namespace{{Source: kc.Source, Prefix: kc.Source + "#"}}, nil,
			`local user "https://kc.example/realms/a#eve"`, ""},
		{"a reload adds one", []User{user("alice")}, []Namespace{kc}, []User{user("alice"), user("kc:mallory")}, "",
			`local user "kc:mallory"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u, err := NewUsers(tt.users)
			if err != nil {
				t.Fatal(err)
			}
			err = u.Reserve(tt.ns)
			if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
				t.Fatalf("Reserve: %v, want %q", err, tt.want)
			}
			if tt.reload == nil {
				return
			}
			err = u.Replace(tt.reload)
			if tt.wantRel == "" && err != nil || tt.wantRel != "" && (err == nil || !strings.Contains(err.Error(), tt.wantRel)) {
				t.Fatalf("Replace: %v, want %q", err, tt.wantRel)
			}
			if tt.wantRel != "" && u.Len() != len(tt.users) {
				t.Fatal("a refused reload changed the users")
			}
		})
	}
}

// TestUnplaced: an exchanged token's user must lie in its provider's
// namespace as configured now.
func TestUnplaced(t *testing.T) {
	const iss = "https://kc.example/realms/a"
	u, err := NewUsers([]User{{Name: "alice", PasswordHash: mustHash(t, testPW)}})
	if err != nil {
		t.Fatal(err)
	}
	if u.Unplaced(iss, "alice") {
		t.Fatal("before Reserve, nothing is known to be unplaced")
	}
	if err := u.Reserve([]Namespace{{Source: iss, Prefix: "kc:"}, {Source: "mtls", Prefix: "cert:"}}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		source, name string
		want         bool
	}{
		{iss, "kc:alice", false},
		{iss, "alice", true},                   // issued before the prefix: would be the local alice
		{iss, "cert:bot", true},                // another source's namespace
		{"https://gone.example", "kc:x", true}, // a trust since removed
		{"mtls", "cert:bot", false},
	}
	for _, tt := range tests {
		if got := u.Unplaced(tt.source, tt.name); got != tt.want {
			t.Errorf("Unplaced(%q, %q) = %v, want %v", tt.source, tt.name, got, tt.want)
		}
	}
	var none *Users
	if none.Unplaced(iss, "alice") {
		t.Fatal("nil Users")
	}
}
