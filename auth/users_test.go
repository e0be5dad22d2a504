package auth

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"golang.org/x/crypto/bcrypt"
)

func TestNewUsersRejects(t *testing.T) {
	good := mustHash(t, "pw")
	tests := []struct {
		name    string
		users   []User
		wantErr string
	}{
		{"empty name", []User{{Name: "", PasswordHash: good}}, "username is empty"},
		{"control char", []User{{Name: "a\nb", PasswordHash: good}}, "control characters"},
		{"duplicate", []User{{Name: "a", PasswordHash: good}, {Name: "a", PasswordHash: good}}, `user #2: duplicate username "a"`},
		{"empty hash", []User{{Name: "a"}}, "password_hash is empty"},
		{"plain text hash", []User{{Name: "a", PasswordHash: "secret"}}, "not a bcrypt hash"},
		{"sha256 hash", []User{{Name: "a", PasswordHash: "$5$rounds=5000$abc$def"}}, "not a bcrypt hash"},
		{"model with space", []User{{Name: "a", PasswordHash: good, Models: []string{"qw en"}}}, `model "qw en"`},
		{"empty model", []User{{Name: "a", PasswordHash: good, Models: []string{""}}}, `model ""`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewUsers(tt.users)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want it to contain %q", err, tt.wantErr)
			}
			if strings.Contains(err.Error(), "secret") {
				t.Errorf("error echoes the hash: %v", err)
			}
		})
	}
}

func TestAuthenticate(t *testing.T) {
	long := strings.Repeat("x", 72)
	users, err := NewUsers([]User{
		{Name: "alice", PasswordHash: mustHash(t, "wonderland"), Models: []string{"qwen", "gemma"}},
		{Name: "bob", PasswordHash: mustHash(t, "builder"), Disabled: true},
		{Name: "carol", PasswordHash: mustHash(t, long)},
	})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, user, pw string
		ok             bool
	}{
		{"ok", "alice", "wonderland", true},
		{"wrong password", "alice", "Wonderland", false},
		{"empty password", "alice", "", false},
		{"unknown user", "mallory", "wonderland", false},
		{"name case differs", "Alice", "wonderland", false},
		{"disabled user, right password", "bob", "builder", false},
		{"72-byte password", "carol", long, true},
		{"over 72 bytes with matching prefix", "carol", long + "y", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u, err := users.Authenticate(tt.user, tt.pw)
			if tt.ok {
				if err != nil || u == nil || u.Name != tt.user {
					t.Fatalf("Authenticate = %v, %v; want user %s", u, err, tt.user)
				}
				return
			}
			if !errors.Is(err, ErrInvalidCredentials) || u != nil {
				t.Fatalf("Authenticate = %v, %v; want ErrInvalidCredentials", u, err)
			}
		})
	}
}

func TestAuthenticateReturnsCopy(t *testing.T) {
	users, err := NewUsers([]User{{Name: "alice", PasswordHash: mustHash(t, "pw"), Models: []string{"qwen"}}})
	if err != nil {
		t.Fatal(err)
	}
	u, _ := users.Authenticate("alice", "pw")
	u.Models[0] = "evil"
	u.Disabled = true
	u2, err := users.Authenticate("alice", "pw")
	if err != nil || u2.Models[0] != "qwen" {
		t.Fatalf("store was changed through a returned user: %v %v", u2, err)
	}
}

func TestDummyHashCost(t *testing.T) {
	// Unknown names are compared against a hash of the users' cost, so
	// they take as long as known names.
	tests := []struct {
		name  string
		costs []int
		want  int
	}{
		{"all min", []int{bcrypt.MinCost, bcrypt.MinCost}, bcrypt.MinCost},
		{"most common", []int{5, 4, 4}, 4},
		{"tie takes higher", []int{4, 5}, 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var list []User
			for i, c := range tt.costs {
				h, err := HashPasswordCost("pw", c)
				if err != nil {
					t.Fatal(err)
				}
				list = append(list, User{Name: string(rune('a' + i)), PasswordHash: h})
			}
			users, err := NewUsers(list)
			if err != nil {
				t.Fatal(err)
			}
			set := users.set.Load()
			got, err := bcrypt.Cost(set.dummy)
			if err != nil || got != tt.want || set.dummyCost != tt.want {
				t.Fatalf("dummy cost = %d (%v), want %d", got, err, tt.want)
			}
		})
	}
}

func TestReplace(t *testing.T) {
	users, err := NewUsers([]User{{Name: "alice", PasswordHash: mustHash(t, "a")}})
	if err != nil {
		t.Fatal(err)
	}
	if err := users.Replace([]User{{Name: "bob", PasswordHash: mustHash(t, "b")}}); err != nil {
		t.Fatal(err)
	}
	if _, err := users.Authenticate("alice", "a"); !errors.Is(err, ErrInvalidCredentials) {
		t.Errorf("alice still authenticates after Replace: %v", err)
	}
	if _, err := users.Authenticate("bob", "b"); err != nil {
		t.Errorf("bob: %v", err)
	}
	// A bad replacement keeps the current users.
	if err := users.Replace([]User{{Name: "", PasswordHash: "x"}}); err == nil {
		t.Fatal("Replace accepted an invalid user")
	}
	if _, err := users.Authenticate("bob", "b"); err != nil || users.Len() != 1 {
		t.Errorf("failed Replace changed the store: %v, len %d", err, users.Len())
	}
}

func TestReplaceConcurrent(t *testing.T) {
	h := mustHash(t, "pw")
	users, err := NewUsers([]User{{Name: "alice", PasswordHash: h}})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for j := 0; j < 20; j++ {
				if _, err := users.Authenticate("alice", "pw"); err != nil {
					t.Error(err)
				}
			}
		}()
		go func() {
			defer wg.Done()
			for j := 0; j < 20; j++ {
				if err := users.Replace([]User{{Name: "alice", PasswordHash: h}}); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
}

func TestLoadUsersFile(t *testing.T) {
	dir := t.TempDir()
	h := mustHash(t, "pw")
	tests := []struct {
		name    string
		content *string // nil: file does not exist
		wantErr string  // "" for success
	}{
		{"ok", ptr(`{"users":[{"username":"alice","password_hash":"` + h + `","models":["qwen"],"disabled":false},
			{"username":"bob","password_hash":"` + h + `"}]}`), ""},
		{"empty list", ptr(`{"users":[]}`), ""},
		{"missing file", nil, "no such file"},
		{"empty file", ptr(``), "empty or truncated"},
		{"truncated", ptr(`{"users":[`), "empty or truncated"},
		{"syntax error", ptr("{\"users\":[\n{\"username\": alice}]}"), "invalid JSON at line 2"},
		{"wrong type", ptr("{\"users\":[\n{\"username\":\"a\",\"models\":\"qwen\"}]}"), `line 2: field "users.models" must be []string, not string`},
		{"unknown field", ptr(`{"users":[{"username":"a","password":"pw"}]}`), `unknown field "password"`},
		{"no users key", ptr(`{"accounts":[]}`), `unknown field "accounts"`},
		{"null users", ptr(`{}`), `missing "users" array`},
		{"trailing data", ptr(`{"users":[]} {}`), "unexpected data after the JSON document"},
		{"bad hash", ptr(`{"users":[{"username":"a","password_hash":"plain"}]}`), `user #1: user "a": password_hash is not a bcrypt hash`},
		{"duplicate", ptr(`{"users":[{"username":"a","password_hash":"` + h + `"},{"username":"a","password_hash":"` + h + `"}]}`), `user #2: duplicate username "a"`},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(dir, "users"+string(rune('a'+i))+".json")
			if tt.content != nil {
				if err := os.WriteFile(path, []byte(*tt.content), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			users, err := LoadUsersFile(path)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				if _, err := NewUsers(users); err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), path) {
				t.Fatalf("err = %v, want it to name %s and contain %q", err, path, tt.wantErr)
			}
		})
	}
}

func TestLoadUsersFileFields(t *testing.T) {
	h := mustHash(t, "pw")
	path := filepath.Join(t.TempDir(), "users.json")
	doc := `{"users":[{"username":"alice","password_hash":"` + h + `","models":["qwen","gemma"],"disabled":true}]}`
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	users, err := LoadUsersFile(path)
	if err != nil {
		t.Fatal(err)
	}
	u := users[0]
	if len(users) != 1 || u.Name != "alice" || u.PasswordHash != h || !u.Disabled ||
		strings.Join(u.Models, ",") != "qwen,gemma" {
		t.Fatalf("got %+v", users)
	}
}

func TestHashPassword(t *testing.T) {
	h, err := HashPassword("correct horse")
	if err != nil {
		t.Fatal(err)
	}
	if c, _ := bcrypt.Cost([]byte(h)); c != DefaultCost || DefaultCost != 10 {
		t.Errorf("cost = %d, want 10", c)
	}
	if bcrypt.CompareHashAndPassword([]byte(h), []byte("correct horse")) != nil {
		t.Error("hash does not match its password")
	}
	tests := []struct {
		name string
		pw   string
		cost int
		ok   bool
	}{
		{"min cost", "pw", bcrypt.MinCost, true},
		{"empty password", "", bcrypt.MinCost, true},
		{"cost too low", "pw", bcrypt.MinCost - 1, false},
		{"cost too high", "pw", bcrypt.MaxCost + 1, false},
		{"over 72 bytes", strings.Repeat("p", 73), bcrypt.MinCost, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, err := HashPasswordCost(tt.pw, tt.cost)
			if (err == nil) != tt.ok {
				t.Fatalf("err = %v, want ok=%v", err, tt.ok)
			}
			if tt.ok && bcrypt.CompareHashAndPassword([]byte(h), []byte(tt.pw)) != nil {
				t.Error("hash does not match")
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }
