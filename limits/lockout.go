package limits

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrNotShared: the lockout cannot be shared now (no Redis, or Redis is
// unreachable); the caller decides with its own instance's view.
var ErrNotShared = errors.New("limits: no shared store for lockouts")

// Failed logins, under the configured prefix:
//
//	<prefix>lf:<key>   a hash: n failures counted since start (ms); after
//	                   strikes lockouts, blocked until (ms)
//
// The same rules as auth.FailureLimiter's per-instance map: max failures
// within a window of the first lock the key for the window, each further
// lockout doubles the block (up to maxBlock) until the key has been quiet
// for a window after its last block. The key's TTL ends when it would be
// forgotten, so idle keys cost Redis nothing.

// lockoutFailScript counts a failure (or an attempt) unless the key is
// blocked. KEYS: the key. ARGV: max, window (ms), maxBlock (ms). Returns
// the ms the key was blocked (0: the failure was counted).
var lockoutFailScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local max, window, maxblock = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local v = redis.call('HMGET', KEYS[1], 'n', 'start', 'strikes', 'until')
local n, start, strikes, untl = tonumber(v[1]) or 0, tonumber(v[2]), tonumber(v[3]) or 0, tonumber(v[4]) or 0
if start == nil or (now >= start + window and now >= untl + window) then
  n, start, strikes, untl = 0, now, 0, 0
end
if now < untl then
  return untl - now
end
if now >= start + window then
  start, n = now, 0
end
n = n + 1
if n >= max then
  local s = strikes
  if s > 20 then s = 20 end
  local block = math.floor(window * (2 ^ s))
  if block > maxblock then block = maxblock end
  strikes, untl, start, n = strikes + 1, now + block, now, 0
end
redis.call('HSET', KEYS[1], 'n', n, 'start', start, 'strikes', strikes, 'until', untl)
local forget = start + window
if untl + window > forget then forget = untl + window end
redis.call('PEXPIRE', KEYS[1], math.floor(math.max(1, forget - now)))
return 0
`)

// lockoutBlockedScript answers the ms a key stays blocked. KEYS: the key.
var lockoutBlockedScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local untl = tonumber(redis.call('HGET', KEYS[1], 'until') or '0') or 0
if untl > now then return untl - now end
return 0
`)

// LoginFailed counts a failed login (or an attempt) of key across every
// instance unless key is blocked, and answers how long it was blocked (0:
// the failure was counted). ErrNotShared, or
// Redis' error (Redis is then taken for down until a ping answers, as for
// the limits), says the caller must decide alone.
func (l *Limiter) LoginFailed(ctx context.Context, key string, max int, window, maxBlock time.Duration) (time.Duration, error) {
	return l.lockout(ctx, key, func(ctx context.Context, rkey string) (int64, error) {
		return lockoutFailScript.Run(ctx, l.rs.client, []string{rkey}, max, window.Milliseconds(), maxBlock.Milliseconds()).Int64()
	})
}

// LoginBlocked answers how long key is blocked across every instance.
func (l *Limiter) LoginBlocked(ctx context.Context, key string) (time.Duration, error) {
	return l.lockout(ctx, key, func(ctx context.Context, rkey string) (int64, error) {
		return lockoutBlockedScript.Run(ctx, l.rs.client, []string{rkey}).Int64()
	})
}

// LoginReset forgets key's failures on every instance (a login that
// succeeded).
func (l *Limiter) LoginReset(ctx context.Context, key string) error {
	_, err := l.lockout(ctx, key, func(ctx context.Context, rkey string) (int64, error) {
		return 0, l.rs.client.Del(ctx, rkey).Err()
	})
	return err
}

// lockout runs call with key's Redis key within the limits' timeout, and
// takes its answer for milliseconds: ErrNotShared without a reachable
// Redis, and a failed call recorded (lockoutFailed).
func (l *Limiter) lockout(ctx context.Context, key string, call func(ctx context.Context, rkey string) (int64, error)) (time.Duration, error) {
	if l.rs == nil || l.down.Load() {
		return 0, ErrNotShared
	}
	ctx, cancel := context.WithTimeout(ctx, l.o.Timeout)
	defer cancel()
	ms, err := call(ctx, l.rs.prefix+"lf:"+key)
	if err != nil {
		l.lockoutFailed(ctx, err)
		return 0, err
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// lockoutFailed records a failed lockout call, unless the caller left.
func (l *Limiter) lockoutFailed(ctx context.Context, err error) {
	if !errors.Is(ctx.Err(), context.Canceled) {
		l.failed("lockout", err)
	}
}
