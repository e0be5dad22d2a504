package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"
	"time"
)

// Refresh tokens (RFC 6749 §6) are opaque: "llmr_", the id of their
// family (32 hex digits), "_", then 43 base62 characters (256 random
// bits). A family is everything descended from one login; it is stored as
// one record named by its id, holding the SHA-256 of the one token that is
// current and of the tokens it replaced. Each use rotates the token; a
// replaced token used again revokes the family (RFC 9700 §4.14.2), since
// either the client or an attacker holds a stolen copy and there is no
// telling which.
const (
	RefreshTokenPrefix = "llmr_"
	refreshFamilyHex   = 32
	refreshSecretChars = 43
	RefreshTokenLen    = len(RefreshTokenPrefix) + refreshFamilyHex + 1 + refreshSecretChars
	refreshFileVersion = 1
	// DefaultRefreshTokensPrefix is the storage folder of the families.
	DefaultRefreshTokensPrefix = "llmedge/refresh_tokens"
	// DefaultRefreshTTL is how long a login can be refreshed.
	DefaultRefreshTTL = 30 * 24 * time.Hour
	// maxRefreshHistory bounds a family's record: the hashes of this many
	// replaced tokens are kept for reuse detection. A client refreshing at
	// every hourly expiry uses 720 in 30 days; one replaced more than this
	// many rotations ago is refused as unknown, without revoking.
	maxRefreshHistory = 1024
	// defaultRefreshLockTimeout bounds the wait for a family's lock.
	defaultRefreshLockTimeout = 10 * time.Second
	// sweepGrace keeps expired families a while, so that a late use is
	// answered "expired" rather than "invalid".
	sweepGrace = 24 * time.Hour
)

// Errors of RefreshTokens.Rotate, to be told apart with errors.Is.
var (
	ErrRefreshInvalid = errors.New("auth: invalid refresh token")
	ErrRefreshExpired = errors.New("auth: refresh token expired")
	ErrRefreshRevoked = errors.New("auth: refresh token revoked")
	// ErrRefreshReused: a replaced token was presented; its family is now
	// revoked.
	ErrRefreshReused = errors.New("auth: refresh token reused; its family is revoked")
	// ErrStorage wraps failures of the storage itself: the request was
	// fine and may be retried.
	ErrStorage = errors.New("auth: storage unavailable")
)

// RefreshStorage is the part of certmagic.Storage the refresh tokens need:
// Storage, plus Delete and List to remove expired families.
type RefreshStorage interface {
	Storage
	Delete(ctx context.Context, key string) error
	List(ctx context.Context, path string, recursive bool) ([]string, error)
}

// RefreshGrant is what a family grants: its user, the scopes of the login
// (a refresh may narrow them for one access token, never widen them), the
// client it was issued to ("" when clients are not checked).
type RefreshGrant struct {
	FamilyID string
	User     string
	Scopes   []string
	ClientID string
	// Created is when the family's login happened: revoking a user's
	// tokens issued before some time reaches its refresh tokens too.
	Created time.Time
	Expires time.Time
	// Tier and Provider are an exchanged login's (an identity provider's
	// user): its tokens carry them, and its user is not a local one.
	Tier, Provider string
	// TTL, when positive and shorter than the store's, is the family's
	// lifetime (Issue only).
	TTL time.Duration
}

// refreshFamily is the stored record of a family:
//
//	{"version":1,"id":"<hex>","user":"alice","scopes":["model:qwen"],
//	 "created":"…","expires":"…","current":"<hex sha256>",
//	 "previous":["<first 16 bytes of a sha256, hex>",…],"rotations":3,"revoked":"…"}
type refreshFamily struct {
	Version   int        `json:"version"`
	ID        string     `json:"id"`
	User      string     `json:"user"`
	Scopes    []string   `json:"scopes"`
	ClientID  string     `json:"client_id,omitempty"`
	Tier      string     `json:"tier,omitempty"`
	Provider  string     `json:"provider,omitempty"`
	Created   time.Time  `json:"created"`
	Expires   time.Time  `json:"expires"`
	Current   string     `json:"current"`
	Previous  []string   `json:"previous,omitempty"`
	Rotations int        `json:"rotations"`
	LastUsed  *time.Time `json:"last_used,omitempty"`
	Revoked   *time.Time `json:"revoked,omitempty"`
	Reason    string     `json:"revoked_reason,omitempty"`
}

// RefreshTokens issues and rotates refresh tokens kept in a storage shared
// by every gateway instance. A rotation is a read-modify-write under the
// storage lock of its family, so two uses of one token, on one instance or
// on two, are serialized: the first rotates, the second finds its token
// replaced and revokes the family.
type RefreshTokens struct {
	Storage RefreshStorage
	// Prefix is the storage folder (DefaultRefreshTokensPrefix when empty).
	Prefix string
	// TTL is a family's lifetime from its login (DefaultRefreshTTL when
	// 0); refreshing does not extend it.
	TTL time.Duration
	// LockTimeout bounds the wait for a family's lock (10s when 0).
	LockTimeout time.Duration
	Now         func() time.Time // time.Now when nil

	maxHistory int // maxRefreshHistory when 0; tests lower it
}

func (s *RefreshTokens) prefix() string {
	if s.Prefix == "" {
		return DefaultRefreshTokensPrefix
	}
	return s.Prefix
}

func (s *RefreshTokens) ttl() time.Duration {
	if s.TTL <= 0 {
		return DefaultRefreshTTL
	}
	return s.TTL
}

func (s *RefreshTokens) key(family string) string { return path.Join(s.prefix(), family+".json") }

// Issue starts a family for a login and returns its first token and when
// the family expires. The family's id is new and random, so storing needs
// no lock.
func (s *RefreshTokens) Issue(ctx context.Context, g RefreshGrant) (string, time.Time, error) {
	var id [refreshFamilyHex / 2]byte
	_, _ = rand.Read(id[:])
	family := hex.EncodeToString(id[:])
	token := newRefreshToken(family)
	now := nowFunc(s.Now)().UTC().Truncate(time.Second)
	ttl := s.ttl()
	if g.TTL > 0 && g.TTL < ttl {
		ttl = g.TTL
	}
	f := &refreshFamily{Version: refreshFileVersion, ID: family, User: g.User, Scopes: slices.Clone(g.Scopes),
		ClientID: g.ClientID, Tier: g.Tier, Provider: g.Provider, Created: now, Expires: now.Add(ttl), Current: hashHex(token)}
	if err := s.store(ctx, f); err != nil {
		return "", time.Time{}, err
	}
	return token, f.Expires, nil
}

// Rotate exchanges token for a new one of the same family. check, called
// under the family's lock before anything changes, may refuse the
// exchange (user disabled, wrong client, scope not granted); its error is
// returned as it is and the token stays valid. Errors: ErrRefreshInvalid,
// ErrRefreshExpired, ErrRefreshRevoked, ErrRefreshReused (the family is
// revoked from now on; the grant says whose it was), check's, or one
// wrapping ErrStorage.
func (s *RefreshTokens) Rotate(ctx context.Context, token string, check func(*RefreshGrant) error) (string, *RefreshGrant, error) {
	family, ok := parseRefreshToken(token)
	if !ok {
		return "", nil, ErrRefreshInvalid
	}
	h := hashBytes(token)
	// A first read without the lock turns garbage away (unknown family,
	// or a secret that was never issued) at the cost of one read; only
	// real tokens of the family contend for its lock.
	f, err := s.load(ctx, family)
	if err != nil {
		return "", nil, err
	}
	if f.match(h) == matchNone {
		return "", nil, ErrRefreshInvalid
	}

	timeout := s.LockTimeout
	if timeout <= 0 {
		timeout = defaultRefreshLockTimeout
	}
	lockCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	name := s.key(family)
	if err := s.Storage.Lock(lockCtx, name); err != nil {
		return "", nil, fmt.Errorf("%w: refresh tokens %s: lock: %w", ErrStorage, name, err)
	}
	defer func() { _ = s.Storage.Unlock(context.WithoutCancel(ctx), name) }()
	// Read again under the lock: another instance may have rotated or
	// revoked the family since the first read.
	if f, err = s.load(ctx, family); err != nil {
		return "", nil, err
	}
	now := nowFunc(s.Now)().UTC()
	switch {
	case f.Revoked != nil:
		return "", nil, ErrRefreshRevoked
	case !now.Before(f.Expires):
		return "", nil, ErrRefreshExpired
	}
	switch f.match(h) {
	case matchCurrent:
	case matchPrevious:
		t := now.Truncate(time.Second)
		f.Revoked, f.Reason = &t, "reuse"
		if err := s.store(ctx, f); err != nil {
			return "", nil, err
		}
		return "", f.grant(), ErrRefreshReused
	default:
		return "", nil, ErrRefreshInvalid
	}
	g := f.grant()
	if check != nil {
		if err := check(g); err != nil {
			return "", nil, err
		}
	}
	next := newRefreshToken(family)
	// Replaced tokens keep half their hash: 128 bits still make a forged
	// match as hard as guessing, and the record stays half the size.
	f.Previous = append(f.Previous, f.Current[:sha256.Size])
	limit := s.maxHistory
	if limit <= 0 {
		limit = maxRefreshHistory
	}
	if n := len(f.Previous) - limit; n > 0 {
		f.Previous = slices.Delete(f.Previous, 0, n)
	}
	t := now.Truncate(time.Second)
	f.Current, f.LastUsed = hashHex(next), &t
	f.Rotations++
	// Until this store succeeds nothing has changed: on failure the
	// client may retry with the same token.
	if err := s.store(ctx, f); err != nil {
		return "", nil, err
	}
	return next, g, nil
}

// Revoke revokes the family of token, as RFC 7009 asks of a refresh
// token: neither it nor any token of its family (a replaced one, one
// issued from it) works again. An unknown or already revoked token is no
// error; a storage failure is.
func (s *RefreshTokens) Revoke(ctx context.Context, token string) error {
	family, ok := parseRefreshToken(token)
	if !ok {
		return nil
	}
	f, err := s.load(ctx, family)
	if err != nil || f.match(hashBytes(token)) == matchNone {
		if errors.Is(err, ErrStorage) {
			return err
		}
		return nil
	}
	timeout := s.LockTimeout
	if timeout <= 0 {
		timeout = defaultRefreshLockTimeout
	}
	lockCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	name := s.key(family)
	if err := s.Storage.Lock(lockCtx, name); err != nil {
		return fmt.Errorf("%w: refresh tokens %s: lock: %w", ErrStorage, name, err)
	}
	defer func() { _ = s.Storage.Unlock(context.WithoutCancel(ctx), name) }()
	if f, err = s.load(ctx, family); err != nil || f.Revoked != nil {
		if errors.Is(err, ErrStorage) {
			return err
		}
		return nil
	}
	t := nowFunc(s.Now)().UTC().Truncate(time.Second)
	f.Revoked, f.Reason = &t, "revoked"
	return s.store(ctx, f)
}

// Sweep deletes families that expired more than a day ago, and reports
// how many. Run it now and then; any instance may.
func (s *RefreshTokens) Sweep(ctx context.Context) (int, error) {
	keys, err := s.Storage.List(ctx, s.prefix(), false)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("%w: refresh tokens %s: list: %w", ErrStorage, s.prefix(), err)
	}
	now := nowFunc(s.Now)()
	n := 0
	for _, k := range keys {
		family, ok := strings.CutSuffix(path.Base(k), ".json")
		if !ok || !isHex(family, refreshFamilyHex) {
			continue
		}
		f, err := s.load(ctx, family)
		if err != nil || now.Before(f.Expires.Add(sweepGrace)) {
			continue
		}
		if err := s.Storage.Delete(ctx, s.key(family)); err != nil {
			return n, fmt.Errorf("%w: refresh tokens: delete: %w", ErrStorage, err)
		}
		n++
	}
	return n, nil
}

type refreshMatch int

const (
	matchNone refreshMatch = iota
	matchCurrent
	matchPrevious
)

// match says whether h is the family's current token, a replaced one, or
// neither. The comparisons are constant-time: the stored hashes are
// secret-derived, and timing must not help to forge one.
func (f *refreshFamily) match(h []byte) refreshMatch {
	if eqHex(f.Current, h) {
		return matchCurrent
	}
	found := false
	for _, p := range f.Previous {
		found = eqHex(p, h) || found // no early exit: time does not say which
	}
	if found {
		return matchPrevious
	}
	return matchNone
}

func (f *refreshFamily) grant() *RefreshGrant {
	return &RefreshGrant{FamilyID: f.ID, User: f.User, Scopes: slices.Clone(f.Scopes), ClientID: f.ClientID,
		Created: f.Created, Expires: f.Expires, Tier: f.Tier, Provider: f.Provider}
}

// eqHex compares a stored hex hash, whole or its first half, with a hash
// in constant time.
func eqHex(stored string, h []byte) bool {
	if len(stored) != 2*sha256.Size && len(stored) != sha256.Size {
		return false // also keeps hex.Decode within b
	}
	var b [sha256.Size]byte
	n, err := hex.Decode(b[:], []byte(stored))
	if err != nil || (n != sha256.Size && n != sha256.Size/2) || len(h) < n {
		return false
	}
	return subtle.ConstantTimeCompare(b[:n], h[:n]) == 1
}

func (s *RefreshTokens) load(ctx context.Context, family string) (*refreshFamily, error) {
	name := s.key(family)
	b, err := s.Storage.Load(ctx, name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, ErrRefreshInvalid
	}
	if err != nil {
		return nil, fmt.Errorf("%w: refresh tokens %s: load: %w", ErrStorage, name, err)
	}
	var f refreshFamily
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("%w: refresh tokens %s: invalid JSON: %w", ErrStorage, name, err)
	}
	if f.Version > refreshFileVersion {
		return nil, fmt.Errorf("%w: refresh tokens %s: format version %d is newer than this program understands (%d)",
			ErrStorage, name, f.Version, refreshFileVersion)
	}
	if f.ID != family {
		return nil, fmt.Errorf("%w: refresh tokens %s: record of family %q", ErrStorage, name, f.ID)
	}
	return &f, nil
}

func (s *RefreshTokens) store(ctx context.Context, f *refreshFamily) error {
	b, err := json.Marshal(f)
	if err != nil {
		return fmt.Errorf("refresh tokens: %w", err)
	}
	if err := s.Storage.Store(ctx, s.key(f.ID), b); err != nil {
		return fmt.Errorf("%w: refresh tokens %s: store: %w", ErrStorage, s.key(f.ID), err)
	}
	return nil
}

func newRefreshToken(family string) string {
	return RefreshTokenPrefix + family + "_" + randomBase62(refreshSecretChars)
}

// parseRefreshToken checks the form of a refresh token and returns its
// family id. Only the exact form passes, so one token has one spelling
// and nothing odd reaches a storage key.
func parseRefreshToken(token string) (string, bool) {
	if len(token) != RefreshTokenLen || !strings.HasPrefix(token, RefreshTokenPrefix) {
		return "", false
	}
	rest := token[len(RefreshTokenPrefix):]
	family, secret := rest[:refreshFamilyHex], rest[refreshFamilyHex:]
	if !isHex(family, refreshFamilyHex) || secret[0] != '_' {
		return "", false
	}
	for i := 1; i < len(secret); i++ {
		if strings.IndexByte(base62, secret[i]) < 0 {
			return "", false
		}
	}
	return family, true
}

// isHex reports whether s is n lowercase hex digits.
func isHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

func hashBytes(s string) []byte {
	sum := sha256.Sum256([]byte(s))
	return sum[:]
}

func hashHex(s string) string { return hex.EncodeToString(hashBytes(s)) }
