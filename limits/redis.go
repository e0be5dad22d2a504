package limits

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// The Redis keys of a bucket, under the configured prefix:
//
//	<prefix>r:<bucket>   requests' TAT (a string, µs since the epoch)
//	<prefix>t:<bucket>   tokens' TAT
//	<prefix>c:<bucket>   concurrency: a sorted set of ticket ids, scored by
//	                     the µs at which each slot expires unless refreshed
//
// Every key carries a TTL just past the time its bucket is full (or its
// last slot expires), so idle tenants cost Redis nothing.
//
// Why our own scripts rather than a GCRA library: one admission checks up
// to four buckets for three limits each, all or nothing, in one round trip
// — a library call per bucket and limit would take up to twelve, and could
// charge one bucket for a request another refuses.

// admitScript checks every bucket, then charges all of them or none.
// KEYS: per bucket its r, t and c keys. ARGV: buckets, tokens, ticket id,
// lease (µs), then per bucket rpm, tpm, concurrency (0: unlimited).
// Returns {allowed, refused bucket (1-based), refused kind, retry µs,
// then per bucket: requests remaining, requests reset µs, tokens
// remaining, tokens reset µs}.
var admitScript = redis.NewScript(`
local W = 60000000
local EPS = 1
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local n = tonumber(ARGV[1])
local cost = tonumber(ARGV[2])
local member = ARGV[3]
local lease = tonumber(ARGV[4])

local function tat(key)
  local v = tonumber(redis.call('GET', key) or '0') or 0
  if v < now then v = now end
  return v
end
local function quota(v, limit)
  local reset = v - now
  if reset < 0 then reset = 0 end
  local rem = math.floor((W - reset + EPS) * limit / W)
  if rem < 0 then rem = 0 end
  if rem > limit then rem = limit end
  return rem, math.ceil(reset)
end

local nextR, nextT, curR, curT = {}, {}, {}, {}
local allowed, rb, rk, retry = 1, 0, 0, 0
for i = 1, n do
  local rpm = tonumber(ARGV[2 + 3*i])
  local tpm = tonumber(ARGV[3 + 3*i])
  local conc = tonumber(ARGV[4 + 3*i])
  if rpm > 0 then
    curR[i] = tat(KEYS[3*i-2])
    nextR[i] = curR[i] + W / rpm
    if allowed == 1 and nextR[i] - now > W + EPS then
      allowed, rb, rk, retry = 0, i, 1, nextR[i] - W - now
    end
  end
  if tpm > 0 then
    local c = cost
    if c > tpm then c = tpm end
    curT[i] = tat(KEYS[3*i-1])
    nextT[i] = curT[i] + c * W / tpm
    if allowed == 1 and nextT[i] - now > W + EPS then
      allowed, rb, rk, retry = 0, i, 2, nextT[i] - W - now
    end
  end
  if conc > 0 and allowed == 1 then
    redis.call('ZREMRANGEBYSCORE', KEYS[3*i], '-inf', now)
    if redis.call('ZCARD', KEYS[3*i]) >= conc then
      allowed, rb, rk, retry = 0, i, 3, 1000000
    end
  end
end

local out = {allowed, rb, rk, math.ceil(retry)}
for i = 1, n do
  local rpm = tonumber(ARGV[2 + 3*i])
  local tpm = tonumber(ARGV[3 + 3*i])
  local conc = tonumber(ARGV[4 + 3*i])
  local r, tk = curR[i], curT[i]
  if allowed == 1 then
    if rpm > 0 then
      r = nextR[i]
      redis.call('SET', KEYS[3*i-2], string.format('%.0f', r), 'PX', math.ceil((r - now) / 1000) + 1000)
    end
    if tpm > 0 then
      tk = nextT[i]
      redis.call('SET', KEYS[3*i-1], string.format('%.0f', tk), 'PX', math.ceil((tk - now) / 1000) + 1000)
    end
    if conc > 0 then
      redis.call('ZADD', KEYS[3*i], now + lease, member)
      redis.call('PEXPIRE', KEYS[3*i], math.ceil(lease / 1000) + 1000)
    end
  end
  local rr, rs, tr, ts = 0, 0, 0, 0
  if rpm > 0 then rr, rs = quota(r, rpm) end
  if tpm > 0 then tr, ts = quota(tk, tpm) end
  out[#out+1] = rr
  out[#out+1] = rs
  out[#out+1] = tr
  out[#out+1] = ts
end
return out
`)

// settleScript moves each bucket's tokens TAT by its delta and frees the
// ticket's concurrency slots. KEYS: per bucket its t and c keys. ARGV:
// buckets, ticket id, then per bucket tpm and delta (tokens; negative
// refunds).
var settleScript = redis.NewScript(`
local W = 60000000
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local n = tonumber(ARGV[1])
local member = ARGV[2]
for i = 1, n do
  local tpm = tonumber(ARGV[1 + 2*i])
  local delta = tonumber(ARGV[2 + 2*i])
  if tpm > 0 and delta ~= 0 then
    local v = tonumber(redis.call('GET', KEYS[2*i-1]) or '0') or 0
    if delta > 0 and v < now then v = now end
    v = v + delta * W / tpm
    if v > now then
      redis.call('SET', KEYS[2*i-1], string.format('%.0f', v), 'PX', math.ceil((v - now) / 1000) + 1000)
    else
      redis.call('DEL', KEYS[2*i-1])
    end
  end
  redis.call('ZREM', KEYS[2*i], member)
end
return 1
`)

// redisStore is the shared state.
type redisStore struct {
	client redis.UniversalClient
	prefix string
}

func (s *redisStore) key(kind byte, bucket string) string {
	return s.prefix + string(kind) + ":" + bucket
}

// admit runs admitScript for req; t gets the reservations when allowed.
func (s *redisStore) admit(ctx context.Context, req *Request, t *Ticket, lease time.Duration) (Decision, error) {
	n := len(req.Buckets)
	keys := make([]string, 0, 3*n)
	args := make([]any, 0, 4+3*n)
	args = append(args, n, req.Tokens, t.id, lease.Microseconds())
	for _, b := range req.Buckets {
		keys = append(keys, s.key('r', b.Key), s.key('t', b.Key), s.key('c', b.Key))
		args = append(args, max(0, b.Limit.RPM), max(0, b.Limit.TPM), max(0, b.Limit.Concurrency))
	}
	res, err := admitScript.Run(ctx, s.client, keys, args...).Int64Slice()
	if err != nil {
		return Decision{}, fmt.Errorf("limits: redis admit: %w", err)
	}
	if len(res) != 4+4*n {
		return Decision{}, fmt.Errorf("limits: redis admit: %d results for %d buckets", len(res), n)
	}
	d := Decision{Allowed: res[0] == 1}
	if !d.Allowed {
		d = refused(Kind(res[2]), int(res[1])-1, float64(res[3]))
	}
	for i, b := range req.Buckets {
		f := res[4+4*i:]
		if b.Limit.RPM > 0 {
			d.Requests.tighten(b.Limit.RPM, int(f[0]), float64(f[1]))
		}
		if b.Limit.TPM > 0 {
			d.Tokens.tighten(b.Limit.TPM, int(f[2]), float64(f[3]))
		}
		if d.Allowed {
			t.add(b, req.Tokens)
		}
	}
	return d, nil
}

// settleArgs are the keys and arguments of settleScript for t.
func (s *redisStore) settleArgs(t *Ticket, used int) ([]string, []any) {
	keys := make([]string, 0, 2*t.n)
	args := make([]any, 0, 2+2*t.n)
	args = append(args, t.n, t.id)
	for i := 0; i < t.n; i++ {
		tb := &t.b[i]
		keys = append(keys, s.key('t', tb.key), s.key('c', tb.key))
		args = append(args, tb.tpm, tb.delta(used))
	}
	return keys, args
}

func (s *redisStore) settle(ctx context.Context, keys []string, args []any) error {
	if err := settleScript.Run(ctx, s.client, keys, args...).Err(); err != nil {
		return fmt.Errorf("limits: redis settle: %w", err)
	}
	return nil
}

// refresh extends the concurrency slots of tickets by lease. A slot that
// expired meanwhile (a long Redis outage) is added back: its request still
// runs.
func (s *redisStore) refresh(ctx context.Context, tickets []*Ticket, lease time.Duration) error {
	if len(tickets) == 0 {
		return nil
	}
	t, err := s.client.Time(ctx).Result()
	if err != nil {
		return fmt.Errorf("limits: redis time: %w", err)
	}
	score := float64(t.Add(lease).UnixMicro())
	ttl := lease + time.Second
	pipe := s.client.Pipeline()
	for _, tk := range tickets {
		for i := 0; i < tk.n; i++ {
			if tk.b[i].conc {
				k := s.key('c', tk.b[i].key)
				pipe.ZAdd(ctx, k, redis.Z{Score: score, Member: tk.id})
				pipe.PExpire(ctx, k, ttl)
			}
		}
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("limits: redis refresh: %w", err)
	}
	return nil
}

// load is the state of one bucket, for tests and tools: in-flight slots
// (expired ones not counted) and the tokens charged and not yet refilled.
func (s *redisStore) load(ctx context.Context, b Bucket) (inFlight int, tokens float64, err error) {
	now, err := s.client.Time(ctx).Result()
	if err != nil {
		return 0, 0, err
	}
	n, err := s.client.ZCount(ctx, s.key('c', b.Key), "("+strconv.FormatInt(now.UnixMicro(), 10), "+inf").Result()
	if err != nil {
		return 0, 0, err
	}
	v, err := s.client.Get(ctx, s.key('t', b.Key)).Float64()
	if err == redis.Nil {
		return int(n), 0, nil
	}
	if err != nil {
		return 0, 0, err
	}
	if b.Limit.TPM > 0 {
		tokens = math.Max(0, (v-float64(now.UnixMicro()))*float64(b.Limit.TPM)/windowUS)
	}
	return int(n), tokens, nil
}
