package auth

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddyserver/certmagic"
)

func newTestRefresh(st RefreshStorage, c *clock) *RefreshTokens {
	return &RefreshTokens{Storage: st, TTL: 24 * time.Hour, Now: c.Now}
}

func TestRefreshTokenFormat(t *testing.T) {
	ctx := context.Background()
	s := newTestRefresh(newMemStorage(), newClock())
	tok, exp, err := s.Issue(ctx, RefreshGrant{User: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	if len(tok) != RefreshTokenLen || !strings.HasPrefix(tok, RefreshTokenPrefix) || !isB64Token(tok) {
		t.Fatalf("token %q", tok)
	}
	if !exp.Equal(testNow.Add(24 * time.Hour)) {
		t.Fatalf("expires %v", exp)
	}
	family, ok := parseRefreshToken(tok)
	if !ok || !strings.Contains(tok, family) {
		t.Fatalf("parse %q: %q %v", tok, family, ok)
	}
	for _, bad := range []string{
		"", tok[:len(tok)-1], tok + "a", strings.Replace(tok, "llmr_", "llme_", 1),
		tok[:5] + strings.ToUpper(tok[5:37]) + tok[37:], // family id in capitals
		tok[:37] + "-" + tok[38:],                       // separator
		tok[:len(tok)-1] + "/",                          // outside base62
		tok[:5] + "../../../../../../etc/passwd" + tok[33:],
	} {
		if _, ok := parseRefreshToken(bad); ok && bad != tok {
			t.Errorf("parsed %q", bad)
		}
	}
}

// TestRefreshRotation walks one family through its life: each use
// rotates; a replaced token used again revokes the family, so the token
// that replaced it stops working too.
func TestRefreshRotation(t *testing.T) {
	ctx := context.Background()
	c := newClock()
	st := newMemStorage()
	s := newTestRefresh(st, c)
	t0, _, err := s.Issue(ctx, RefreshGrant{User: "alice", Scopes: []string{"model:qwen"}, ClientID: "app"})
	if err != nil {
		t.Fatal(err)
	}
	t1, g, err := s.Rotate(ctx, t0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if g.User != "alice" || g.ClientID != "app" || len(g.Scopes) != 1 || t1 == t0 {
		t.Fatalf("grant %+v, token %q", g, t1)
	}
	t2, _, err := s.Rotate(ctx, t1, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Garbage with the family's id: refused, but nothing is revoked.
	forged := t2[:len(t2)-43] + randomBase62(43)
	if _, _, err := s.Rotate(ctx, forged, nil); !errors.Is(err, ErrRefreshInvalid) {
		t.Fatalf("forged secret: %v", err)
	}
	// Reuse of t0: the family goes, t2 with it.
	if _, _, err := s.Rotate(ctx, t0, nil); !errors.Is(err, ErrRefreshReused) {
		t.Fatalf("reused token: %v", err)
	}
	for name, tok := range map[string]string{"current": t2, "replaced": t1, "first": t0} {
		if _, _, err := s.Rotate(ctx, tok, nil); !errors.Is(err, ErrRefreshRevoked) {
			t.Fatalf("%s token after reuse: %v", name, err)
		}
	}
	// Another login is a separate family, untouched.
	other, _, _ := s.Issue(ctx, RefreshGrant{User: "alice"})
	if _, _, err := s.Rotate(ctx, other, nil); err != nil {
		t.Fatalf("another family: %v", err)
	}
	// The stored records hold no token.
	for k, v := range st.data {
		for _, tok := range []string{t0, t1, t2} {
			if strings.Contains(string(v), tok[len(tok)-43:]) {
				t.Fatalf("%s holds a token secret", k)
			}
		}
	}
}

func TestRefreshErrors(t *testing.T) {
	ctx := context.Background()
	c := newClock()
	s := newTestRefresh(newMemStorage(), c)
	refuse := errors.New("refused by check")
	tests := []struct {
		name  string
		setup func(tok string) string // returns the token to present
		check func(*RefreshGrant) error
		want  error
		// kept: the original token still works afterwards
		kept bool
	}{
		{"malformed", func(string) string { return "llmr_nope" }, nil, ErrRefreshInvalid, true},
		{"unknown family", func(string) string { return newRefreshToken(strings.Repeat("ab", 16)) }, nil, ErrRefreshInvalid, true},
		{"expired", func(tok string) string { c.Advance(24 * time.Hour); return tok }, nil, ErrRefreshExpired, true},
		{"refused by check", func(tok string) string { return tok }, func(*RefreshGrant) error { return refuse }, refuse, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c.Set(testNow)
			tok, _, err := s.Issue(ctx, RefreshGrant{User: "alice"})
			if err != nil {
				t.Fatal(err)
			}
			if _, _, err := s.Rotate(ctx, tt.setup(tok), tt.check); !errors.Is(err, tt.want) {
				t.Fatalf("Rotate: %v, want %v", err, tt.want)
			}
			c.Set(testNow)
			_, _, err = s.Rotate(ctx, tok, nil)
			if tt.kept != (err == nil) {
				t.Fatalf("the token afterwards: %v", err)
			}
		})
	}
}

type failingStorage struct {
	*memStorage
	failStore bool
}

func (f *failingStorage) Store(ctx context.Context, key string, value []byte) error {
	if f.failStore {
		return errors.New("disk full")
	}
	return f.memStorage.Store(ctx, key, value)
}

func TestRefreshStorageFailure(t *testing.T) {
	ctx := context.Background()
	st := &failingStorage{memStorage: newMemStorage()}
	s := newTestRefresh(st, newClock())
	tok, _, err := s.Issue(ctx, RefreshGrant{User: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	st.failStore = true
	if _, _, err := s.Rotate(ctx, tok, nil); !errors.Is(err, ErrStorage) {
		t.Fatalf("Rotate with a failing store: %v", err)
	}
	st.failStore = false
	// Nothing changed: the same token rotates now.
	if _, _, err := s.Rotate(ctx, tok, nil); err != nil {
		t.Fatalf("after the storage recovered: %v", err)
	}
	st.loadErr = errors.New("connection refused")
	if _, _, err := s.Rotate(ctx, tok, nil); !errors.Is(err, ErrStorage) {
		t.Fatalf("Rotate with a failing load: %v", err)
	}
}

func TestRefreshHistoryBound(t *testing.T) {
	ctx := context.Background()
	st := newMemStorage()
	s := newTestRefresh(st, newClock())
	s.maxHistory = 16
	first, _, _ := s.Issue(ctx, RefreshGrant{User: "alice"})
	tok := first
	for range s.maxHistory + 5 {
		var err error
		if tok, _, err = s.Rotate(ctx, tok, nil); err != nil {
			t.Fatal(err)
		}
	}
	family, _ := parseRefreshToken(tok)
	f, err := s.load(ctx, family)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Previous) != s.maxHistory || f.Rotations != s.maxHistory+5 {
		t.Fatalf("%d replaced hashes kept, %d rotations", len(f.Previous), f.Rotations)
	}
	// Too old to be recognized: refused as unknown, the family lives on.
	if _, _, err := s.Rotate(ctx, first, nil); !errors.Is(err, ErrRefreshInvalid) {
		t.Fatalf("token older than the history: %v", err)
	}
	if _, _, err := s.Rotate(ctx, tok, nil); err != nil {
		t.Fatalf("current token: %v", err)
	}
	// The record at the default bound stays small: 1,024 half hashes.
	full := &refreshFamily{Version: 1, ID: family, Current: strings.Repeat("a", 64)}
	for range maxRefreshHistory {
		full.Previous = append(full.Previous, strings.Repeat("b", 32))
	}
	if b, _ := json.Marshal(full); len(b) > 40<<10 {
		t.Fatalf("a full record is %d bytes", len(b))
	}
}

func TestRefreshHistoryRecent(t *testing.T) {
	ctx := context.Background()
	s := newTestRefresh(newMemStorage(), newClock())
	s.maxHistory = 4
	first, _, _ := s.Issue(ctx, RefreshGrant{User: "alice"})
	tok := first
	var replaced []string
	for range 6 {
		replaced = append(replaced, tok)
		tok, _, _ = s.Rotate(ctx, tok, nil)
	}
	// The oldest token still in the history is recognized: a reuse,
	// which revokes the family.
	if _, _, err := s.Rotate(ctx, replaced[len(replaced)-4], nil); !errors.Is(err, ErrRefreshReused) {
		t.Fatalf("token within the history: %v", err)
	}
	if _, _, err := s.Rotate(ctx, tok, nil); !errors.Is(err, ErrRefreshRevoked) {
		t.Fatalf("current token after the reuse: %v", err)
	}
}

func TestRefreshSweep(t *testing.T) {
	ctx := context.Background()
	c := newClock()
	st := newMemStorage()
	s := newTestRefresh(st, c)
	if n, err := s.Sweep(ctx); err != nil || n != 0 {
		t.Fatalf("sweep of nothing: %d %v", n, err)
	}
	old, _, _ := s.Issue(ctx, RefreshGrant{User: "alice"})
	c.Advance(12 * time.Hour)
	young, _, _ := s.Issue(ctx, RefreshGrant{User: "alice"})
	c.Advance(12*time.Hour + sweepGrace + time.Second) // old: expired over a day ago
	n, err := s.Sweep(ctx)
	if err != nil || n != 1 {
		t.Fatalf("sweep: %d %v", n, err)
	}
	if _, _, err := s.Rotate(ctx, old, nil); !errors.Is(err, ErrRefreshInvalid) {
		t.Fatalf("swept family: %v", err)
	}
	if _, _, err := s.Rotate(ctx, young, nil); !errors.Is(err, ErrRefreshExpired) {
		t.Fatalf("expired, not yet swept family: %v", err)
	}
}

// TestRefreshAcrossInstances: two stores on one Caddy file storage, as two
// gateways on a shared volume, race to use one token many times over.
// Exactly one use wins each race, and the loser's use revokes the family.
func TestRefreshAcrossInstances(t *testing.T) {
	if testing.Short() {
		t.Skip("file locks poll once a second")
	}
	ctx := context.Background()
	dir := t.TempDir()
	c := newClock()
	a := newTestRefresh(&certmagic.FileStorage{Path: dir}, c)
	b := newTestRefresh(&certmagic.FileStorage{Path: dir}, c)
	for round := range 3 {
		tok, _, err := a.Issue(ctx, RefreshGrant{User: "alice"})
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		errs := make([]error, 2)
		news := make([]string, 2)
		for i, s := range []*RefreshTokens{a, b} {
			wg.Go(func() { news[i], _, errs[i] = s.Rotate(ctx, tok, nil) })
		}
		wg.Wait()
		won := 0
		for i, err := range errs {
			switch {
			case err == nil:
				won++
			case !errors.Is(err, ErrRefreshReused):
				t.Fatalf("round %d, instance %d: %v", round, i, err)
			}
		}
		if won != 1 {
			t.Fatalf("round %d: %d uses of one token succeeded (%v)", round, won, errs)
		}
		winner := news[0] + news[1] // one is empty
		if _, _, err := b.Rotate(ctx, winner, nil); !errors.Is(err, ErrRefreshRevoked) {
			t.Fatalf("round %d: the winner's new token after the reuse: %v", round, err)
		}
	}
	// The record as stored: hashes only, revoked for reuse.
	keys, err := (&certmagic.FileStorage{Path: dir}).List(ctx, DefaultRefreshTokensPrefix, false)
	if err != nil || len(keys) != 3 {
		t.Fatalf("stored families %v %v", keys, err)
	}
	raw, _ := (&certmagic.FileStorage{Path: dir}).Load(ctx, keys[0])
	var f refreshFamily
	if err := json.Unmarshal(raw, &f); err != nil || f.Revoked == nil || f.Reason != "reuse" || len(f.Current) != 64 {
		t.Fatalf("stored %s", raw)
	}
}
