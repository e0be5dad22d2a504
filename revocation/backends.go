package revocation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisBackend stores revocations in Redis and announces them by pub/sub:
//
//	<prefix>revoked:users    hash: user → cutoff (unix seconds)
//	<prefix>revoked:tokens   sorted set: jti scored by its expiry
//	<prefix>revocations      channel: one JSON message per revocation
//
// An instance that restarts, or missed a message while its connection was
// down, reads the stored set (Sync polls it).
type RedisBackend struct {
	Client redis.UniversalClient
	Prefix string
	// MaxLifetime is the longest a token lives: older user cutoffs are
	// deleted when the state is loaded.
	MaxLifetime time.Duration
}

func (b *RedisBackend) usersKey() string  { return b.Prefix + "revoked:users" }
func (b *RedisBackend) tokensKey() string { return b.Prefix + "revoked:tokens" }
func (b *RedisBackend) channel() string   { return b.Prefix + "revocations" }

// announcement is a revocation on the channel.
type announcement struct {
	User    string `json:"u,omitempty"`
	Before  int64  `json:"b,omitempty"`
	JTI     string `json:"j,omitempty"`
	Expires int64  `json:"x,omitempty"`
}

// addScript keeps the later cutoff and expiry, then announces.
// KEYS: users, tokens. ARGV: user, cutoff, jti, expiry, channel, message.
var addScript = redis.NewScript(`
if ARGV[1] ~= '' then
  local cur = tonumber(redis.call('HGET', KEYS[1], ARGV[1]) or '0')
  if tonumber(ARGV[2]) > cur then redis.call('HSET', KEYS[1], ARGV[1], ARGV[2]) end
end
if ARGV[3] ~= '' then
  local cur = tonumber(redis.call('ZSCORE', KEYS[2], ARGV[3]) or '0')
  if tonumber(ARGV[4]) > cur then redis.call('ZADD', KEYS[2], ARGV[4], ARGV[3]) end
end
redis.call('PUBLISH', ARGV[5], ARGV[6])
return 1
`)

// Add implements Backend.
func (b *RedisBackend) Add(ctx context.Context, e Entry) error {
	a := announcement{User: e.User, JTI: e.JTI}
	if e.User != "" {
		a.Before = e.Before.Unix()
	}
	if e.JTI != "" {
		a.Expires = e.Expires.Unix()
	}
	msg, err := json.Marshal(a)
	if err != nil {
		return err
	}
	err = addScript.Run(ctx, b.Client, []string{b.usersKey(), b.tokensKey()},
		e.User, a.Before, e.JTI, a.Expires, b.channel(), string(msg)).Err()
	if err != nil {
		return fmt.Errorf("revocation: redis: %w", err)
	}
	return nil
}

// Load implements Backend; it also deletes the entries past use.
func (b *RedisBackend) Load(ctx context.Context) (State, error) {
	now := time.Now()
	pipe := b.Client.Pipeline()
	users := pipe.HGetAll(ctx, b.usersKey())
	pipe.ZRemRangeByScore(ctx, b.tokensKey(), "-inf", "("+strconv.FormatInt(now.Unix(), 10))
	tokens := pipe.ZRangeWithScores(ctx, b.tokensKey(), 0, -1)
	if _, err := pipe.Exec(ctx); err != nil {
		return State{}, fmt.Errorf("revocation: redis: %w", err)
	}
	st := State{Users: map[string]int64{}, Tokens: map[string]int64{}}
	var stale []string
	for u, v := range users.Val() {
		c, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			continue
		}
		if b.MaxLifetime > 0 && time.Unix(c, 0).Add(b.MaxLifetime).Before(now) {
			stale = append(stale, u)
			continue
		}
		st.Users[u] = c
	}
	for _, z := range tokens.Val() {
		if j, ok := z.Member.(string); ok {
			st.Tokens[j] = unixSeconds(z.Score)
		}
	}
	if len(stale) > 0 {
		_ = b.Client.HDel(ctx, b.usersKey(), stale...).Err() // best effort: the next load retries
	}
	return st, nil
}

// Watch implements Backend: it applies the channel's announcements, and
// asks for a full load after each (re)subscription, which may have missed
// some.
func (b *RedisBackend) Watch(ctx context.Context, apply func(Entry), changed func()) {
	ps := b.Client.Subscribe(ctx, b.channel())
	defer ps.Close()
	ch := ps.ChannelWithSubscriptions(redis.WithChannelHealthCheckInterval(5 * time.Second))
	for {
		select {
		case <-ctx.Done():
			return
		case m, ok := <-ch:
			if !ok {
				return
			}
			switch v := m.(type) {
			case *redis.Subscription:
				if v.Kind == "subscribe" {
					changed()
				}
			case *redis.Message:
				var a announcement
				if json.Unmarshal([]byte(v.Payload), &a) != nil {
					continue
				}
				e := Entry{User: a.User, JTI: a.JTI}
				if a.User != "" {
					e.Before = time.Unix(a.Before, 0)
				}
				if a.JTI != "" {
					e.Expires = time.Unix(a.Expires, 0)
				}
				apply(e)
			}
		}
	}
}

// Storage is the part of Caddy's storage (certmagic.Storage) the storage
// backend needs. Load returns an error satisfying errors.Is(err,
// fs.ErrNotExist) for a missing key.
type Storage interface {
	Load(ctx context.Context, key string) ([]byte, error)
	Store(ctx context.Context, key string, value []byte) error
	Lock(ctx context.Context, name string) error
	Unlock(ctx context.Context, name string) error
}

// StorageBackend keeps revocations in one JSON document of Caddy's
// storage, which instances sharing the storage poll (as they do the
// signing keys). Writers take the storage's lock.
type StorageBackend struct {
	Storage     Storage
	Key         string
	MaxLifetime time.Duration
}

// DefaultStorageKey is where StorageBackend keeps its document.
const DefaultStorageKey = "llmedge/revocations.json"

func (b *StorageBackend) key() string {
	if b.Key == "" {
		return DefaultStorageKey
	}
	return b.Key
}

// Add implements Backend.
func (b *StorageBackend) Add(ctx context.Context, e Entry) error {
	if err := b.Storage.Lock(ctx, b.key()); err != nil {
		return fmt.Errorf("revocation: storage lock: %w", err)
	}
	defer func() { _ = b.Storage.Unlock(context.WithoutCancel(ctx), b.key()) }()
	st, err := b.Load(ctx)
	if err != nil {
		return err
	}
	st.add(e)
	if b.MaxLifetime > 0 {
		st.Prune(time.Now(), b.MaxLifetime)
	}
	doc, err := json.Marshal(st)
	if err != nil {
		return err
	}
	if err := b.Storage.Store(ctx, b.key(), doc); err != nil {
		return fmt.Errorf("revocation: storage: %w", err)
	}
	return nil
}

// Load implements Backend.
func (b *StorageBackend) Load(ctx context.Context) (State, error) {
	doc, err := b.Storage.Load(ctx, b.key())
	st := State{Users: map[string]int64{}, Tokens: map[string]int64{}}
	if errors.Is(err, fs.ErrNotExist) {
		return st, nil
	}
	if err != nil {
		return st, fmt.Errorf("revocation: storage: %w", err)
	}
	if err := json.Unmarshal(doc, &st); err != nil {
		return st, fmt.Errorf("revocation: storage %s: %w", b.key(), err)
	}
	if st.Users == nil {
		st.Users = map[string]int64{}
	}
	if st.Tokens == nil {
		st.Tokens = map[string]int64{}
	}
	return st, nil
}

// Watch implements Backend: storage announces nothing; Sync polls.
func (b *StorageBackend) Watch(context.Context, func(Entry), func()) {}
