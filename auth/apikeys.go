package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/llmedge/llmedge/api"
)

// API keys are long-lived credentials for programs: "llme_" followed by
// 43 base62 characters (43 × log2(62) ≈ 256.03 random bits). Only their
// SHA-256 is stored. A fast hash is right here, unlike for passwords: the
// key has 256 bits of entropy, so no guessing attack can use the speed of
// the hash, and verifying must stay cheap on every request.
const (
	APIKeyPrefix       = "llme_"
	apiKeySecretChars  = 43
	APIKeyLen          = len(APIKeyPrefix) + apiKeySecretChars
	apiKeyFileVersion  = 1
	maxAPIKeyNameBytes = 64
	// DefaultAPIKeysStorageKey is where the keys live in the storage.
	DefaultAPIKeysStorageKey = "llmedge/api_keys.json"
	// DefaultAPIKeyTTL is the lifetime of a key created without one.
	DefaultAPIKeyTTL = 90 * 24 * time.Hour
	// defaultUnknownKeyReloadEvery bounds the storage reads that unknown
	// keys can cause: anyone can send one.
	defaultUnknownKeyReloadEvery = time.Second
	// unknownKeyReloadTimeout bounds the request that waits on such a read.
	unknownKeyReloadTimeout = 2 * time.Second
)

const base62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// Errors of the API key store, to be told apart with errors.Is.
var (
	// ErrAPIKeyInvalid: no such key (never issued, revoked, or its user is
	// gone or disabled). One error for all, so a caller learns nothing
	// about which.
	ErrAPIKeyInvalid = errors.New("auth: invalid or revoked API key")
	ErrAPIKeyExpired = errors.New("auth: API key expired")
	// ErrAPIKeyNotFound: Revoke found no key of that id or name.
	ErrAPIKeyNotFound = errors.New("auth: no such API key")
	// ErrAPIKeyConflict: Create was given a name another key has.
	ErrAPIKeyConflict = errors.New("auth: an API key of that name exists")
	// ErrAPIKeyRequest: Create's request is invalid; the message says why.
	ErrAPIKeyRequest = errors.New("auth: invalid API key request")
)

// APIKey is one stored key. It never holds the key itself.
type APIKey struct {
	ID   string `json:"id"`
	Name string `json:"name,omitempty"`
	User string `json:"user"`
	// Models the key may use, always within its user's models at the time
	// of each request; empty means all of the user's models.
	Models []string `json:"models,omitempty"`
	// Team, when set, is the key's team, whose models, limits and
	// budgets cap it; otherwise the key is in its user's team.
	Team   string `json:"team,omitempty"`
	SHA256 string `json:"sha256"` // hex SHA-256 of the key
	// Priority is the class of work of the key's requests (critical,
	// standard, sheddable); "" takes its user's.
	Priority string     `json:"priority,omitempty"`
	Created  time.Time  `json:"created"`
	Expires  time.Time  `json:"expires"`
	LastUsed *time.Time `json:"last_used,omitempty"`
}

// APIKeyInfo is what listing a key shows: everything but its hash.
type APIKeyInfo struct {
	ID       string     `json:"id"`
	Name     string     `json:"name,omitempty"`
	User     string     `json:"user"`
	Models   []string   `json:"models"`
	Team     string     `json:"team,omitempty"`
	Created  time.Time  `json:"created"`
	Expires  time.Time  `json:"expires"`
	LastUsed *time.Time `json:"last_used,omitempty"`
	Expired  bool       `json:"expired"`
	// Priority is the key's own class of work; "" takes its user's.
	Priority string `json:"priority,omitempty"`
}

// NewAPIKey is a request to create a key.
type NewAPIKey struct {
	User   string
	Models []string
	Name   string
	TTL    time.Duration // DefaultTTL of the store when 0
	// Priority is the key's class of work; "" takes its user's.
	Priority string
	// Team is the key's team; "" puts the key in its user's team. The
	// caller checks that the team is configured.
	Team string
}

// apiKeyFile is the stored form of every key of a gateway cluster:
//
//	{"version":1,"keys":[{"id":"…","name":"ci","user":"alice","models":["qwen"],
//	  "sha256":"<hex>","created":"…","expires":"…","last_used":"…"}]}
type apiKeyFile struct {
	Version int      `json:"version"`
	Keys    []APIKey `json:"keys"`
}

// APIKeys is the set of API keys shared through a Storage. Verify answers
// from memory (a map by hash) and never touches the storage, except for a
// rate-limited reload when it meets a key it does not know (created a
// moment ago on another instance). Reload follows creations and
// revocations made elsewhere; call it periodically. Last-used times are
// kept in memory and written back by FlushUsage, in one storage write for
// every key used since the last flush.
type APIKeys struct {
	Storage    Storage
	StorageKey string // DefaultAPIKeysStorageKey when empty
	// Users are the accounts keys belong to: a key works only while its
	// user exists and is enabled, and only for models the user may use.
	Users *Users
	// DefaultTTL is the lifetime of keys created without one
	// (DefaultAPIKeyTTL when 0).
	DefaultTTL time.Duration
	// UnknownReloadEvery spaces the reloads caused by unknown keys (1s
	// when 0; negative disables them).
	UnknownReloadEvery time.Duration
	Now                func() time.Time // time.Now when nil

	set atomic.Pointer[apiKeySet]

	// syncMu is held from reading the storage to installing what was read,
	// so a slow reload cannot install keys older than those an update
	// (a revocation) installed meanwhile.
	syncMu sync.Mutex

	mu    sync.Mutex           // guards usage
	usage map[string]*keyUsage // by key id, shared by every generation

	gateMu     sync.Mutex
	lastReload time.Time
}

// apiKeySet is one immutable generation of the keys.
type apiKeySet struct {
	byHash map[[sha256.Size]byte]*keyEntry
	byID   map[string]*keyEntry // for Standing: a key known by its id only
	keys   []APIKey             // as stored, in order
}

// keyEntry is a key ready for verification.
type keyEntry struct {
	rec     APIKey
	expires time.Time
	usage   *keyUsage
	// cached is the principal for one generation of the user store, so a
	// request costs no allocation until users are reloaded.
	cached atomic.Pointer[keyPrincipal]
}

type keyPrincipal struct {
	users *userSet
	p     *Principal // nil: the user is gone or disabled
}

// keyUsage is a key's last use in Unix seconds: last as seen here (or
// stored by anyone), flushed as known to be in the storage.
type keyUsage struct {
	last, flushed atomic.Int64
}

func (k *APIKeys) storageKey() string {
	if k.StorageKey == "" {
		return DefaultAPIKeysStorageKey
	}
	return k.StorageKey
}

func (k *APIKeys) now() time.Time { return nowFunc(k.Now)() }

// IsAPIKey reports whether a Bearer credential has the form of an API key
// (not whether it is a valid one).
func IsAPIKey(token string) bool { return strings.HasPrefix(token, APIKeyPrefix) }

// GenerateAPIKey returns a new random key.
func GenerateAPIKey() string { return APIKeyPrefix + randomBase62(apiKeySecretChars) }

// randomBase62 returns n characters drawn uniformly from base62. Bytes of
// 248 and over are dropped so that b%62 has no bias (248 = 4 × 62).
func randomBase62(n int) string {
	out := make([]byte, 0, n)
	var buf [64]byte
	for len(out) < n {
		_, _ = rand.Read(buf[:]) // crypto/rand.Read never fails (Go 1.24+)
		for _, b := range buf {
			if b < 248 && len(out) < n {
				out = append(out, base62[b%62])
			}
		}
	}
	return string(out)
}

// hashAPIKey is the SHA-256 of a key of APIKeyLen bytes. The fixed-size
// copy lets the compiler keep the bytes on the stack: no allocation.
func hashAPIKey(key string) [sha256.Size]byte {
	var buf [APIKeyLen]byte
	copy(buf[:], key)
	return sha256.Sum256(buf[:])
}

// HashAPIKey returns the hex SHA-256 of key, as stored.
func HashAPIKey(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

// Verify returns the principal of an API key: its user as subject, the
// key's models (within the user's current models) as scopes. It reads only
// memory, unless the key is unknown and no reload has run within
// UnknownReloadEvery. A key that is unknown, revoked, or whose user is
// gone or disabled gives ErrAPIKeyInvalid; one past its expiry
// ErrAPIKeyExpired. The Principal is shared: do not modify it.
//
// The map lookup by hash need not be constant-time: timing could at most
// reveal something about the hash of the key sent, which does not help to
// find a key whose hash is stored.
func (k *APIKeys) Verify(token string) (*Principal, error) {
	if len(token) != APIKeyLen || !IsAPIKey(token) {
		return nil, ErrAPIKeyInvalid
	}
	h := hashAPIKey(token)
	e := k.lookup(h)
	if e == nil && k.reloadUnknown() {
		e = k.lookup(h)
	}
	if e == nil {
		return nil, ErrAPIKeyInvalid
	}
	now := k.now()
	if !now.Before(e.expires) {
		return nil, ErrAPIKeyExpired
	}
	p := e.principal(k.Users)
	if p == nil {
		return nil, ErrAPIKeyInvalid
	}
	// Write only when the second changes: keys in heavy use would
	// otherwise bounce the cache line between cores on every request.
	if sec := now.Unix(); e.usage.last.Load() < sec {
		e.usage.last.Store(sec)
	}
	return p, nil
}

func (k *APIKeys) lookup(h [sha256.Size]byte) *keyEntry {
	s := k.set.Load()
	if s == nil {
		return nil
	}
	return s.byHash[h]
}

// reloadUnknown reloads the keys for an unknown key, at most once per
// UnknownReloadEvery, and reports whether it did.
func (k *APIKeys) reloadUnknown() bool {
	every := k.UnknownReloadEvery
	if every == 0 {
		every = defaultUnknownKeyReloadEvery
	}
	if every < 0 || k.Storage == nil {
		return false
	}
	k.gateMu.Lock()
	now := time.Now()
	if now.Sub(k.lastReload) < every {
		k.gateMu.Unlock()
		return false
	}
	k.lastReload = now
	k.gateMu.Unlock()
	// A reload or update under way has the newest keys, or soon will: do
	// not queue requests behind it.
	if !k.syncMu.TryLock() {
		return false
	}
	defer k.syncMu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), unknownKeyReloadTimeout)
	defer cancel()
	return k.reload(ctx) == nil
}

// principal is the key's principal under the current users, computed once
// per generation of the user store.
func (e *keyEntry) principal(users *Users) *Principal {
	if users == nil {
		return nil
	}
	set := users.set.Load()
	if c := e.cached.Load(); c != nil && c.users == set {
		return c.p
	}
	var p *Principal
	if u, ok := set.byName[e.rec.User]; ok && !u.Disabled {
		team := e.rec.Team
		if team == "" {
			team = u.Team
		}
		p = &Principal{Subject: u.Name, Scopes: keyScopes(e.rec.Models, u.Models),
			ExpiresAt: e.expires, KeyID: e.rec.ID, Team: team, Priority: keyPriority(e.rec.Priority, u.Priority)}
	}
	e.cached.Store(&keyPrincipal{users: set, p: p})
	return p
}

// keyScopes clamps a key's models to its user's: the scopes of the models
// in both, or of all the user's models when the key names none.
func keyScopes(keyModels, userModels []string) []string {
	scopes := make([]string, 0, len(userModels))
	for _, m := range userModels {
		if len(keyModels) == 0 || slices.Contains(keyModels, m) {
			scopes = append(scopes, ModelScope(m))
		}
	}
	slices.Sort(scopes)
	return slices.Compact(scopes)
}

// Reload reads the keys from the storage and swaps them in. A missing file
// is an empty set; a file that does not parse is an error and the current
// keys stay.
func (k *APIKeys) Reload(ctx context.Context) error {
	k.syncMu.Lock()
	defer k.syncMu.Unlock()
	return k.reload(ctx)
}

func (k *APIKeys) reload(ctx context.Context) error {
	f, err := k.load(ctx)
	if err != nil {
		return err
	}
	return k.install(f)
}

// Create makes a key for req.User and stores it. It returns the key, to
// be shown once, and its description. The user must exist and be
// enabled, and req.Models must be among the user's models.
func (k *APIKeys) Create(ctx context.Context, req NewAPIKey) (string, APIKeyInfo, error) {
	rec, err := k.newRecord(req)
	if err != nil {
		return "", APIKeyInfo{}, err
	}
	key := GenerateAPIKey()
	rec.SHA256 = HashAPIKey(key)
	err = k.update(ctx, func(f *apiKeyFile) error {
		for _, o := range f.Keys {
			if rec.Name != "" && (o.Name == rec.Name || o.ID == rec.Name) {
				return fmt.Errorf("%w: %q", ErrAPIKeyConflict, rec.Name)
			}
			if o.ID == rec.ID || o.Name == rec.ID { // 64 random bits: never, but cheap to rule out
				return fmt.Errorf("api keys: id collision, try again")
			}
		}
		f.Keys = append(f.Keys, *rec)
		return nil
	})
	if err != nil {
		return "", APIKeyInfo{}, err
	}
	return key, rec.info(k.now(), nil), nil
}

func (k *APIKeys) newRecord(req NewAPIKey) (*APIKey, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrAPIKeyRequest, fmt.Sprintf(format, args...))
	}
	if req.User == "" {
		return nil, bad("user is required")
	}
	if k.Users == nil {
		return nil, bad("there are no users")
	}
	u, ok := k.Users.set.Load().byName[req.User]
	switch {
	case !ok:
		return nil, bad("no user %q", req.User)
	case u.Disabled:
		return nil, bad("user %q is disabled", req.User)
	}
	models := slices.Clone(req.Models)
	slices.Sort(models)
	models = slices.Compact(models)
	for _, m := range models {
		if !slices.Contains(u.Models, m) {
			return nil, bad("user %q may not use model %q (the user's models: %s)", req.User, m, strings.Join(u.Models, ", "))
		}
	}
	if err := validateKeyName(req.Name); err != nil {
		return nil, bad("%v", err)
	}
	if _, err := api.ParsePriority(req.Priority); err != nil {
		return nil, bad("%v", err)
	}
	if err := ValidateTeamName(req.Team); err != nil {
		return nil, bad("%v", err)
	}
	ttl := req.TTL
	if ttl == 0 {
		ttl = k.DefaultTTL
	}
	if ttl == 0 {
		ttl = DefaultAPIKeyTTL
	}
	if ttl < 0 {
		return nil, bad("expires must be a positive duration")
	}
	now := k.now().UTC().Truncate(time.Second)
	var id [8]byte
	_, _ = rand.Read(id[:])
	return &APIKey{ID: hex.EncodeToString(id[:]), Name: req.Name, User: req.User, Models: models,
		Team: req.Team, Created: now, Expires: now.Add(ttl), Priority: req.Priority}, nil
}

// validateKeyName keeps names easy to pass on a command line and in a
// URL path: letters, digits, '.', '_' and '-'.
func validateKeyName(name string) error {
	if len(name) > maxAPIKeyNameBytes {
		return fmt.Errorf("name is longer than %d bytes", maxAPIKeyNameBytes)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("name %q may only hold letters, digits, '.', '_' and '-'", name)
		}
	}
	return nil
}

// Revoke deletes the key whose id, or else name, is ref, everywhere: this
// instance at once, the others at their next Reload.
func (k *APIKeys) Revoke(ctx context.Context, ref string) (APIKeyInfo, error) {
	var gone *APIKey
	err := k.update(ctx, func(f *apiKeyFile) error {
		i := slices.IndexFunc(f.Keys, func(o APIKey) bool { return o.ID == ref })
		if i < 0 && ref != "" {
			i = slices.IndexFunc(f.Keys, func(o APIKey) bool { return o.Name == ref })
		}
		if i < 0 {
			return fmt.Errorf("%w: no key has the id or name %q", ErrAPIKeyNotFound, ref)
		}
		rec := f.Keys[i]
		gone = &rec
		f.Keys = slices.Delete(f.Keys, i, i+1)
		return nil
	})
	if err != nil {
		return APIKeyInfo{}, err
	}
	return gone.info(k.now(), nil), nil
}

// List returns every stored key (expired ones too, marked so), with last
// use as the storage and this instance know it. It reloads the keys.
func (k *APIKeys) List(ctx context.Context) ([]APIKeyInfo, error) {
	if err := k.Reload(ctx); err != nil {
		return nil, err
	}
	s := k.set.Load()
	now := k.now()
	k.mu.Lock()
	defer k.mu.Unlock()
	infos := make([]APIKeyInfo, 0, len(s.keys))
	for _, rec := range s.keys {
		infos = append(infos, rec.info(now, k.usage[rec.ID]))
	}
	return infos, nil
}

func (rec *APIKey) info(now time.Time, u *keyUsage) APIKeyInfo {
	i := APIKeyInfo{ID: rec.ID, Name: rec.Name, User: rec.User, Models: slices.Clone(rec.Models), Team: rec.Team,
		Created: rec.Created, Expires: rec.Expires, LastUsed: rec.LastUsed, Expired: !now.Before(rec.Expires),
		Priority: rec.Priority}
	if i.Models == nil {
		i.Models = []string{} // "all of the user's models", shown as []
	}
	if u != nil {
		if sec := u.last.Load(); sec > 0 && (i.LastUsed == nil || sec > i.LastUsed.Unix()) {
			t := time.Unix(sec, 0).UTC()
			i.LastUsed = &t
		}
	}
	return i
}

// FlushUsage writes the last-use times seen here since the previous flush,
// in one locked read-modify-write that keeps the later of the stored and
// the local time, so instances never move a key's last use backwards.
// Without new uses it does not touch the storage.
func (k *APIKeys) FlushUsage(ctx context.Context) error {
	pending := map[string]int64{}
	k.mu.Lock()
	for id, u := range k.usage {
		if last := u.last.Load(); last > u.flushed.Load() {
			pending[id] = last
		}
	}
	k.mu.Unlock()
	if len(pending) == 0 {
		return nil
	}
	return k.update(ctx, func(f *apiKeyFile) error {
		for i := range f.Keys {
			rec := &f.Keys[i]
			sec, ok := pending[rec.ID]
			if !ok || (rec.LastUsed != nil && rec.LastUsed.Unix() >= sec) {
				continue
			}
			t := time.Unix(sec, 0).UTC()
			rec.LastUsed = &t
		}
		return nil
	})
}

// update runs fn on the stored keys under the storage lock, stores the
// result and installs it here.
func (k *APIKeys) update(ctx context.Context, fn func(*apiKeyFile) error) error {
	if k.Storage == nil {
		return errors.New("api keys: no storage")
	}
	k.syncMu.Lock()
	defer k.syncMu.Unlock()
	name := k.storageKey()
	if err := k.Storage.Lock(ctx, name); err != nil {
		return fmt.Errorf("%w: api keys %s: lock: %w", ErrStorage, name, err)
	}
	// Unlock even if ctx ends meanwhile; storage locks expire on their own
	// should this fail.
	defer func() { _ = k.Storage.Unlock(context.WithoutCancel(ctx), name) }()
	f, err := k.load(ctx)
	if err != nil {
		return err
	}
	if err := fn(f); err != nil {
		return err
	}
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return fmt.Errorf("api keys: %w", err)
	}
	if err := k.Storage.Store(ctx, name, b); err != nil {
		return fmt.Errorf("%w: api keys %s: store: %w", ErrStorage, name, err)
	}
	return k.install(f)
}

// load reads the stored keys; a missing file is an empty set.
func (k *APIKeys) load(ctx context.Context) (*apiKeyFile, error) {
	if k.Storage == nil {
		return &apiKeyFile{Version: apiKeyFileVersion}, nil
	}
	name := k.storageKey()
	b, err := k.Storage.Load(ctx, name)
	if errors.Is(err, fs.ErrNotExist) {
		return &apiKeyFile{Version: apiKeyFileVersion}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%w: api keys %s: load: %w", ErrStorage, name, err)
	}
	var f apiKeyFile
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("api keys %s: invalid JSON: %w", name, err)
	}
	if f.Version > apiKeyFileVersion {
		return nil, fmt.Errorf("api keys %s: format version %d is newer than this program understands (%d)", name, f.Version, apiKeyFileVersion)
	}
	f.Version = apiKeyFileVersion
	return &f, nil
}

// install checks f and makes it the current set. Usage counters carry
// over by key id, so uses not yet flushed survive a reload.
func (k *APIKeys) install(f *apiKeyFile) error {
	set := &apiKeySet{byHash: make(map[[sha256.Size]byte]*keyEntry, len(f.Keys)),
		byID: make(map[string]*keyEntry, len(f.Keys)), keys: f.Keys}
	k.mu.Lock()
	defer k.mu.Unlock()
	usage := make(map[string]*keyUsage, len(f.Keys))
	for i := range f.Keys {
		rec := f.Keys[i]
		var h [sha256.Size]byte
		if len(rec.SHA256) != 2*sha256.Size || !isHexBytes(rec.SHA256, h[:]) {
			return fmt.Errorf("api keys: key #%d (id %q): sha256 is not a hex SHA-256", i+1, rec.ID)
		}
		if _, dup := usage[rec.ID]; dup || rec.ID == "" {
			return fmt.Errorf("api keys: key #%d: empty or duplicate id %q", i+1, rec.ID)
		}
		u := k.usage[rec.ID]
		if u == nil {
			u = new(keyUsage)
		}
		if rec.LastUsed != nil {
			stored := rec.LastUsed.Unix()
			raiseTo(&u.last, stored)
			raiseTo(&u.flushed, stored)
		}
		usage[rec.ID] = u
		e := &keyEntry{rec: rec, expires: rec.Expires, usage: u}
		set.byHash[h], set.byID[rec.ID] = e, e
	}
	k.usage = usage
	k.set.Store(set)
	return nil
}

// isHexBytes decodes the hex string s into dst, which must be len(s)/2
// bytes, and reports whether it was hex.
func isHexBytes(s string, dst []byte) bool {
	n, err := hex.Decode(dst, []byte(s))
	return err == nil && n == len(dst)
}

// raiseTo sets v to x if x is larger.
func raiseTo(v *atomic.Int64, x int64) {
	for {
		cur := v.Load()
		if cur >= x || v.CompareAndSwap(cur, x) {
			return
		}
	}
}

// Len returns the number of keys loaded.
func (k *APIKeys) Len() int {
	if s := k.set.Load(); s != nil {
		return len(s.keys)
	}
	return 0
}
