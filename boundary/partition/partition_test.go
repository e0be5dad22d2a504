package partition

import (
	"context"
	"errors"
	"io/fs"
	"sync"
	"testing"
)

var secret = []byte("0123456789abcdef0123456789abcdef")

func TestOf(t *testing.T) {
	tests := []struct {
		name     string
		sharing  Sharing
		provider string
		subject  string
		team     string
		want     Partition
	}{
		{"principal", Principal, "", "alice", "eng", Partition{kind: Principal, subject: "alice", model: "m"}},
		{"provider's principal", Principal, "https://idp", "alice", "", Partition{kind: Principal, provider: "https://idp", subject: "alice", model: "m"}},
		{"team", Team, "", "alice", "eng", Partition{kind: Team, team: "eng", model: "m"}},
		{"team, the principal of none", Team, "", "alice", "", Partition{kind: Principal, subject: "alice", model: "m"}},
		{"model", Model, "", "alice", "eng", Partition{kind: Model, model: "m"}},
		{"nobody authenticated", Principal, "", "", "", Partition{kind: Model, model: "m"}},
	}
	for _, tt := range tests {
		if got := Of(tt.sharing, "m", tt.provider, tt.subject, tt.team); got != tt.want {
			t.Errorf("%s: %+v, want %+v", tt.name, got, tt.want)
		}
	}
}

// Partitions that differ get different index keys and salts; the same
// partition the same, from another Keys of the same secret (another
// instance); the model-wide partition keeps the index's own seeding.
func TestKeysAndSalts(t *testing.T) {
	a, err := NewKeys(secret)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := NewKeys(secret)
	other, _ := NewKeys([]byte("another secret of 32 bytes......"))
	parts := []Partition{
		Of(Principal, "m", "", "alice", ""),
		Of(Principal, "m", "", "bob", ""),
		Of(Principal, "m", "https://idp", "alice", ""), // the same name from elsewhere
		Of(Principal, "n", "", "alice", ""),
		Of(Team, "m", "", "alice", "alice"), // a team named as a user
		Of(Principal, "m", "", "ali", "ce"),
	}
	keys, salts := map[uint64]bool{}, map[string]bool{}
	for _, p := range parts {
		k, s := a.Index(p), a.Salt(p)
		if k == 0 || keys[k] || salts[s] {
			t.Errorf("%+v: key %x salt %s not its own", p, k, s)
		}
		keys[k], salts[s] = true, true
		if len(s) != 43 {
			t.Errorf("salt %q: %d characters, want 43 (256 bits)", s, len(s))
		}
		if b.Index(p) != k || b.Salt(p) != s {
			t.Errorf("%+v: another instance derives other keys", p)
		}
		if other.Index(p) == k || other.Salt(p) == s {
			t.Errorf("%+v: another secret derives the same", p)
		}
	}
	if k := a.Index(Of(Model, "m", "", "alice", "")); k != 0 {
		t.Errorf("model-wide key %x, want 0", k)
	}
	if _, err := NewKeys([]byte("short")); err == nil {
		t.Error("a short secret accepted")
	}
}

func TestIndexKeyAllocatesNothing(t *testing.T) {
	k, _ := NewKeys(secret)
	p := Of(Principal, "m", "", "alice", "")
	if n := testing.AllocsPerRun(100, func() { k.Index(p) }); n != 0 {
		t.Errorf("%v allocations", n)
	}
	k.Salt(p)
	if n := testing.AllocsPerRun(100, func() { k.Salt(p) }); n != 0 {
		t.Errorf("a known salt: %v allocations", n)
	}
}

func TestParseSharing(t *testing.T) {
	for _, s := range []string{"principal", "team", "model"} {
		if v, err := ParseSharing(s); err != nil || v.String() != s {
			t.Errorf("%s: %v %v", s, v, err)
		}
	}
	if _, err := ParseSharing("tenant"); err == nil {
		t.Error("tenant accepted")
	}
}

// memStorage is a storage in memory.
type memStorage struct {
	mu sync.Mutex
	m  map[string][]byte
}

func (s *memStorage) Load(_ context.Context, key string) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.m[key]
	if !ok {
		return nil, fs.ErrNotExist
	}
	return b, nil
}

func (s *memStorage) Store(_ context.Context, key string, v []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[key] = v
	return nil
}
func (s *memStorage) Lock(context.Context, string) error   { return nil }
func (s *memStorage) Unlock(context.Context, string) error { return nil }

func TestLoadOrCreateSecret(t *testing.T) {
	st := &memStorage{m: map[string][]byte{}}
	ctx := context.Background()
	a, err := LoadOrCreateSecret(ctx, st, "")
	if err != nil || len(a) != 32 {
		t.Fatalf("%x %v", a, err)
	}
	b, err := LoadOrCreateSecret(ctx, st, "")
	if err != nil || string(a) != string(b) {
		t.Fatalf("a second instance got another secret: %v", err)
	}
	st.m[DefaultSecretKey] = []byte("not base64 !")
	if _, err := LoadOrCreateSecret(ctx, st, ""); err == nil || errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a damaged secret: %v", err)
	}
	if string(st.m[DefaultSecretKey]) != "not base64 !" {
		t.Error("a damaged secret was overwritten")
	}
}
