package revocation

import (
	"context"
	"io/fs"
	"sync"
	"testing"
	"time"

	"github.com/llmedge/llmedge/internal/redistest"
)

func TestCutoff(t *testing.T) {
	base := time.Unix(1000, 0)
	tests := []struct {
		at, want time.Time
	}{
		{base, base},
		{base.Add(time.Millisecond), base.Add(time.Second)},
		{base.Add(999 * time.Millisecond), base.Add(time.Second)},
	}
	for _, tt := range tests {
		if got := Cutoff(tt.at); !got.Equal(tt.want) {
			t.Errorf("Cutoff(%v) = %v, want %v", tt.at, got, tt.want)
		}
	}
}

func TestList(t *testing.T) {
	var l List
	iat := time.Unix(1000, 0)
	if l.Revoked("alice", "j1", iat) {
		t.Fatal("an empty list revokes")
	}
	l.Add(Entry{User: "alice", Before: time.Unix(1001, 0)})
	l.Add(Entry{JTI: "j9", Expires: time.Unix(5000, 0)})
	tests := []struct {
		name, user, jti string
		iat             int64
		want            bool
	}{
		{"issued before the cutoff", "alice", "j1", 1000, true},
		{"issued at the cutoff", "alice", "j2", 1001, false},
		{"issued after", "alice", "j3", 1500, false},
		{"another user", "bob", "j1", 1000, false},
		{"revoked token", "bob", "j9", 1000, true},
	}
	for _, tt := range tests {
		if got := l.Revoked(tt.user, tt.jti, time.Unix(tt.iat, 0)); got != tt.want {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
	// A later revocation moves the cutoff forward, an earlier one does not
	// move it back.
	l.Add(Entry{User: "alice", Before: time.Unix(2000, 0)})
	l.Add(Entry{User: "alice", Before: time.Unix(10, 0)})
	if !l.Revoked("alice", "", time.Unix(1999, 0)) {
		t.Error("cutoff did not move forward")
	}
}

func TestPrune(t *testing.T) {
	now := time.Unix(10_000, 0)
	s := State{Users: map[string]int64{"old": 1000, "recent": 9000}, Tokens: map[string]int64{"gone": 9999, "live": 10_001}}
	s.Prune(now, time.Hour)
	if _, ok := s.Users["old"]; ok {
		t.Error("a cutoff older than every token was kept")
	}
	if _, ok := s.Users["recent"]; !ok {
		t.Error("a recent cutoff was dropped")
	}
	if _, ok := s.Tokens["gone"]; ok {
		t.Error("an expired token was kept")
	}
	if _, ok := s.Tokens["live"]; !ok {
		t.Error("a live token was dropped")
	}
}

func BenchmarkRevoked(b *testing.B) {
	var l List
	for i := 0; i < 1000; i++ {
		l.Add(Entry{JTI: string(rune('a'+i%26)) + time.Unix(int64(i), 0).String(), Expires: time.Now().Add(time.Hour)})
	}
	l.Add(Entry{User: "mallory", Before: time.Now()})
	iat := time.Now()
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if l.Revoked("alice", "some-jti-value", iat) {
			b.Fatal("revoked")
		}
	}
}

// Two instances on one Redis: a revocation on one reaches the other by
// pub/sub; an instance that starts later reads it from the stored set.
func TestRedisSync(t *testing.T) {
	srv := redistest.Start(t)
	newSync := func() *Sync {
		s := NewSync(&List{}, &RedisBackend{Client: srv.Client(t), Prefix: "t:", MaxLifetime: time.Hour},
			Options{Poll: time.Hour}) // no polling: pub/sub alone
		if err := s.Load(context.Background()); err != nil {
			t.Fatal(err)
		}
		s.Start()
		t.Cleanup(s.Stop)
		return s
	}
	a, b := newSync(), newSync()
	// Both subscribed, as Redis counts the channel's subscribers.
	rc := srv.Client(t)
	waitFor(t, 5*time.Second, func() bool {
		n, err := rc.PubSubNumSub(context.Background(), "t:revocations").Result()
		return err == nil && n["t:revocations"] >= 2
	})
	cut := Cutoff(time.Now())
	if err := a.Revoke(context.Background(), Entry{User: "alice", Before: cut}); err != nil {
		t.Fatal(err)
	}
	if !a.List.Revoked("alice", "", cut.Add(-time.Second)) {
		t.Fatal("not revoked where it was revoked")
	}
	waitFor(t, 2*time.Second, func() bool { return b.List.Revoked("alice", "", cut.Add(-time.Second)) })
	if err := b.Revoke(context.Background(), Entry{JTI: "tok1", Expires: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 2*time.Second, func() bool { return a.List.Revoked("bob", "tok1", time.Now()) })

	c := newSync() // a restarted instance
	if !c.List.Revoked("alice", "", cut.Add(-time.Second)) || !c.List.Revoked("x", "tok1", time.Now()) {
		t.Errorf("a new instance does not know the stored revocations: %+v", c.List.Snapshot())
	}
}

// With Redis down, a revocation holds here and reports the failure; the
// others learn it only when it is stored.
func TestRedisDown(t *testing.T) {
	srv := redistest.Start(t)
	var errs []string
	var mu sync.Mutex
	s := NewSync(&List{}, &RedisBackend{Client: srv.Client(t), Prefix: "d:"},
		Options{Timeout: 200 * time.Millisecond, OnError: func(op string, _ error) { mu.Lock(); errs = append(errs, op); mu.Unlock() }})
	srv.Kill()
	err := s.Revoke(context.Background(), Entry{User: "alice", Before: time.Now()})
	if err == nil {
		t.Fatal("no error with Redis down")
	}
	if !s.List.Revoked("alice", "", time.Unix(0, 0)) {
		t.Error("not revoked here")
	}
	if s.Load(context.Background()) == nil {
		t.Error("load succeeded with Redis down")
	}
	if !s.List.Revoked("alice", "", time.Unix(0, 0)) {
		t.Error("a failed load forgot a revocation")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(errs) != 2 || errs[0] != "add" || errs[1] != "load" {
		t.Errorf("errors reported: %v", errs)
	}
}

// memStorage is Caddy storage in memory, with its lock.
type memStorage struct {
	mu    sync.Mutex
	data  map[string][]byte
	locks sync.Map
}

func (m *memStorage) Load(_ context.Context, k string) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.data[k]
	if !ok {
		return nil, fs.ErrNotExist
	}
	return v, nil
}

func (m *memStorage) Store(_ context.Context, k string, v []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.data == nil {
		m.data = map[string][]byte{}
	}
	m.data[k] = v
	return nil
}

func (m *memStorage) Lock(_ context.Context, k string) error {
	v, _ := m.locks.LoadOrStore(k, &sync.Mutex{})
	v.(*sync.Mutex).Lock()
	return nil
}

func (m *memStorage) Unlock(_ context.Context, k string) error {
	v, _ := m.locks.Load(k)
	v.(*sync.Mutex).Unlock()
	return nil
}

// Two instances sharing a storage: the other one learns by polling.
func TestStorageSync(t *testing.T) {
	st := &memStorage{}
	newSync := func() *Sync {
		s := NewSync(&List{}, &StorageBackend{Storage: st, MaxLifetime: time.Hour}, Options{Poll: 50 * time.Millisecond})
		s.Start()
		t.Cleanup(s.Stop)
		return s
	}
	a, b := newSync(), newSync()
	var wg sync.WaitGroup
	for i := 0; i < 10; i++ { // concurrent writers lose nothing
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			if err := a.Revoke(context.Background(), Entry{JTI: string(rune('a' + i)), Expires: time.Now().Add(time.Hour)}); err != nil {
				t.Error(err)
			}
		}(i)
	}
	wg.Wait()
	if err := a.Revoke(context.Background(), Entry{User: "alice", Before: Cutoff(time.Now())}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 2*time.Second, func() bool {
		snap := b.List.Snapshot()
		return len(snap.Tokens) == 10 && snap.Users["alice"] > 0
	})
}

func waitFor(t *testing.T, within time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %v", within)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
