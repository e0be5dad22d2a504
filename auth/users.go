package auth

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"unicode"

	"golang.org/x/crypto/bcrypt"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/limits"
)

// DefaultCost is the bcrypt cost HashPassword uses.
const DefaultCost = bcrypt.DefaultCost

// maxPasswordBytes is bcrypt's input limit; longer passwords never
// authenticate (bcrypt would silently ignore the bytes after the 72nd).
const maxPasswordBytes = 72

// ErrInvalidCredentials is returned by Users.Authenticate for an unknown
// user, a wrong password and a disabled user alike.
var ErrInvalidCredentials = errors.New("auth: invalid username or password")

// User is one account of the user store, as written in the users file.
type User struct {
	Name         string   `json:"username"`
	PasswordHash string   `json:"password_hash"`
	Models       []string `json:"models"`
	Disabled     bool     `json:"disabled"`
	// Limits, when set, override the configured default limits for this
	// user, field by field.
	Limits *limits.Limit `json:"limits,omitempty"`
	// Priority is the class of work of the user's requests under
	// overload: critical, standard (the default, "") or sheddable.
	Priority string `json:"priority,omitempty"`
	// Team is the team the user belongs to, if any: the team's models
	// cap the user's, and its limits and budgets apply on top of the
	// user's own.
	Team string `json:"team,omitempty"`
}

// clone returns a deep copy of u, so callers cannot change the store.
func (u *User) clone() *User {
	c := *u
	c.Models = slices.Clone(u.Models)
	if u.Limits != nil {
		l := *u.Limits
		c.Limits = &l
	}
	return &c
}

// Users is a concurrency-safe user store. Authenticate may run while
// Replace swaps in a new set of users.
type Users struct {
	set atomic.Pointer[userSet]
	// reserved are the outside sources' namespaces, which no local
	// user's name may enter (Reserve).
	reserved atomic.Pointer[[]Namespace]
}

// userSet is one immutable generation of the store.
type userSet struct {
	byName map[string]*User
	// dummy is a bcrypt hash, of the cost most users have, that unknown
	// names are compared against so they take as long as known ones.
	dummy     []byte
	dummyCost int
}

// NewUsers returns a store holding users. It rejects empty or duplicate
// names, password hashes that are not bcrypt, and malformed model names.
func NewUsers(users []User) (*Users, error) {
	set, err := newUserSet(users, nil)
	if err != nil {
		return nil, err
	}
	u := &Users{}
	u.set.Store(set)
	return u, nil
}

// Replace atomically swaps the store's users for users (a reload). On
// error the store keeps its current users.
func (u *Users) Replace(users []User) error {
	set, err := newUserSet(users, u.set.Load())
	if err != nil {
		return err
	}
	if ns := u.reserved.Load(); ns != nil {
		if err := checkReserved(set, *ns); err != nil {
			return err
		}
	}
	u.set.Store(set)
	return nil
}

// Len returns the number of users in the store.
func (u *Users) Len() int {
	return len(u.set.Load().byName)
}

// Authenticate checks name and password. It returns a copy of the user on
// success and ErrInvalidCredentials otherwise. A bcrypt comparison runs in
// every case, at the cost of the users' hashes, so the answer's timing does
// not reveal whether the name exists or the account is disabled.
func (u *Users) Authenticate(name, password string) (*User, error) {
	set := u.set.Load()
	user, found := set.byName[name]
	hash := set.dummy
	if found {
		hash = []byte(user.PasswordHash)
	}
	err := bcrypt.CompareHashAndPassword(hash, []byte(password))
	if !found || err != nil || user.Disabled || len(password) > maxPasswordBytes {
		return nil, ErrInvalidCredentials
	}
	return user.clone(), nil
}

// Team returns the team of the user called name ("" for none, or for no
// such user). It allocates nothing: it runs on every request.
func (u *Users) Team(name string) string {
	if user, ok := u.set.Load().byName[name]; ok {
		return user.Team
	}
	return ""
}

// Active returns a copy of the user called name when it exists and is
// enabled. It checks no password: it serves credentials already issued
// (refresh tokens), which must stop working when their user is disabled.
func (u *Users) Active(name string) (*User, bool) {
	user, ok := u.set.Load().byName[name]
	if !ok || user.Disabled {
		return nil, false
	}
	return user.clone(), true
}

// newUserSet validates users and builds a generation of the store. prev,
// when not nil, lends its dummy hash if the cost has not changed.
func newUserSet(users []User, prev *userSet) (*userSet, error) {
	set := &userSet{byName: make(map[string]*User, len(users))}
	costs := map[int]int{}
	for i := range users {
		user := users[i].clone()
		if err := validateUser(user); err != nil {
			return nil, fmt.Errorf("user #%d: %w", i+1, err)
		}
		if _, dup := set.byName[user.Name]; dup {
			return nil, fmt.Errorf("user #%d: duplicate username %q", i+1, user.Name)
		}
		cost, _ := bcrypt.Cost([]byte(user.PasswordHash)) // validated above
		costs[cost]++
		set.byName[user.Name] = user
	}
	set.dummyCost = commonCost(costs)
	if prev != nil && prev.dummyCost == set.dummyCost {
		set.dummy = prev.dummy
		return set, nil
	}
	dummy, err := bcrypt.GenerateFromPassword([]byte("llmedge dummy password"), set.dummyCost)
	if err != nil {
		return nil, fmt.Errorf("dummy hash: %w", err)
	}
	set.dummy = dummy
	return set, nil
}

// commonCost returns the most frequent cost (the higher one on ties), or
// DefaultCost when there are no users.
func commonCost(costs map[int]int) int {
	best, bestN := DefaultCost, 0
	for c, n := range costs {
		if n > bestN || (n == bestN && c > best) {
			best, bestN = c, n
		}
	}
	return best
}

// validateUser reports the first problem with u, naming the field.
func validateUser(u *User) error {
	switch {
	case u.Name == "":
		return errors.New("username is empty")
	case strings.IndexFunc(u.Name, unicode.IsControl) >= 0:
		return fmt.Errorf("username %q contains control characters", u.Name)
	case u.PasswordHash == "":
		return fmt.Errorf("user %q: password_hash is empty", u.Name)
	}
	if _, err := bcrypt.Cost([]byte(u.PasswordHash)); err != nil {
		// The hash itself is not repeated: it is a secret too.
		return fmt.Errorf("user %q: password_hash is not a bcrypt hash (want a $2a$, $2b$ or $2y$ hash)", u.Name)
	}
	for _, m := range u.Models {
		if m == "" || strings.IndexFunc(m, func(r rune) bool { return r <= ' ' || r == 0x7f }) >= 0 {
			return fmt.Errorf("user %q: model %q is empty or contains spaces or control characters", u.Name, m)
		}
	}
	if _, err := api.ParsePriority(u.Priority); err != nil {
		return fmt.Errorf("user %q: %w", u.Name, err)
	}
	if err := ValidateTeamName(u.Team); err != nil {
		return fmt.Errorf("user %q: %w", u.Name, err)
	}
	if u.Limits != nil {
		if err := u.Limits.Validate(); err != nil {
			return fmt.Errorf("user %q: limits: %w", u.Name, err)
		}
	}
	return nil
}

// ValidateTeamName keeps team names easy to write in a Caddyfile, on a
// command line and in metrics: letters, digits, '.', '_' and '-', at most
// 64 bytes ("" is no team).
func ValidateTeamName(name string) error {
	if len(name) > 64 {
		return fmt.Errorf("team %q: longer than 64 bytes", name)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("team %q: may only hold letters, digits, '.', '_' and '-'", name)
		}
	}
	return nil
}

// usersFile is the JSON document LoadUsersFile reads.
type usersFile struct {
	Users []User `json:"users"`
}

// LoadUsersFile reads a users file:
//
//	{"users":[{"username":"alice","password_hash":"$2a$10$...","models":["qwen"],"disabled":false}]}
//
// Unknown fields are errors, so a misspelt key is not silently ignored.
// The users are validated as NewUsers would; errors name the file.
func LoadUsersFile(path string) ([]User, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("users file: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var f usersFile
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("users file %s: %s", path, describeJSONError(b, err))
	}
	if dec.More() {
		return nil, fmt.Errorf("users file %s: unexpected data after the JSON document", path)
	}
	if f.Users == nil {
		return nil, fmt.Errorf("users file %s: missing \"users\" array", path)
	}
	seen := make(map[string]bool, len(f.Users))
	for i := range f.Users {
		u := &f.Users[i]
		if err := validateUser(u); err != nil {
			return nil, fmt.Errorf("users file %s: user #%d: %w", path, i+1, err)
		}
		if seen[u.Name] {
			return nil, fmt.Errorf("users file %s: user #%d: duplicate username %q", path, i+1, u.Name)
		}
		seen[u.Name] = true
	}
	return f.Users, nil
}

// describeJSONError turns a decoding error into a message with a line
// number where one is known.
func describeJSONError(b []byte, err error) string {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return fmt.Sprintf("invalid JSON at line %d: %v", lineOf(b, syn.Offset), err)
	case errors.As(err, &typ):
		return fmt.Sprintf("line %d: field %q must be %s, not %s", lineOf(b, typ.Offset), typ.Field, typ.Type, typ.Value)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "file is empty or truncated"
	}
	return err.Error()
}

// lineOf returns the 1-based line number of byte offset off in b.
func lineOf(b []byte, off int64) int {
	if off > int64(len(b)) {
		off = int64(len(b))
	}
	return 1 + bytes.Count(b[:off], []byte("\n"))
}

// HashPassword returns the bcrypt hash of password at DefaultCost, for
// the users file. Passwords over 72 bytes are refused (bcrypt's limit).
func HashPassword(password string) (string, error) {
	return HashPasswordCost(password, DefaultCost)
}

// HashPasswordCost is HashPassword with an explicit bcrypt cost
// (bcrypt.MinCost..bcrypt.MaxCost).
func HashPasswordCost(password string, cost int) (string, error) {
	if cost < bcrypt.MinCost || cost > bcrypt.MaxCost {
		return "", fmt.Errorf("auth: bcrypt cost %d out of range %d..%d", cost, bcrypt.MinCost, bcrypt.MaxCost)
	}
	h, err := bcrypt.GenerateFromPassword([]byte(password), cost)
	if err != nil {
		return "", fmt.Errorf("auth: %w", err)
	}
	return string(h), nil
}

// Usable reports whether name is a user of the store and not disabled.
// It takes no lock and allocates nothing: it is asked on every request,
// so that a disabled or removed user's tokens stop working.
func (u *Users) Usable(name string) bool {
	user, ok := u.set.Load().byName[name]
	return ok && !user.Disabled
}

// Limits returns name's own limits, nil when it has none. The Limit is
// the store's: read it, do not change it.
func (u *Users) Limits(name string) *limits.Limit {
	if user, ok := u.set.Load().byName[name]; ok {
		return user.Limits
	}
	return nil
}

// All returns a copy of every user, in no particular order.
func (u *Users) All() []User {
	set := u.set.Load()
	out := make([]User, 0, len(set.byName))
	for _, user := range set.byName {
		out = append(out, *user.clone())
	}
	return out
}
