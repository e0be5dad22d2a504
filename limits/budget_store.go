package limits

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// A budget's counter in Redis is a float under
//
//	<prefix>b:<unit initial><period id>:<tenant's bucket key>
//
// (llmedge:b:tm202611:u:alice is alice's token use in November 2026),
// expiring a day after its period ends. A counter that does not exist is
// seeded (Options.BudgetSeed: the ledger's sum of the period so far) with
// SET NX before the request is admitted, so a Redis that lost its keys, or
// a first start, begins from what the ledger recorded rather than from 0.

// budgetKeep is how long a counter outlives its period.
const budgetKeep = 24 * time.Hour

// budgetAdmitScript refuses when any counter is missing (to be seeded) or
// at its budget, and otherwise adds the reservation to every counter.
// KEYS: the counters. ARGV: per counter its budget, reservation and TTL
// (ms). Returns {"-1", i} for a missing counter i, {"0", i, used} for a
// counter i at its budget, {"1", "0", used...} when charged (floats as
// strings: Lua numbers would be truncated to integers).
var budgetAdmitScript = redis.NewScript(`
for i = 1, #KEYS do
  if redis.call('EXISTS', KEYS[i]) == 0 then return {'-1', tostring(i)} end
end
for i = 1, #KEYS do
  local used = tonumber(redis.call('GET', KEYS[i])) or 0
  if used >= tonumber(ARGV[3*i-2]) then return {'0', tostring(i), tostring(used)} end
end
local out = {'1', '0'}
for i = 1, #KEYS do
  local v = redis.call('INCRBYFLOAT', KEYS[i], ARGV[3*i-1])
  redis.call('PEXPIRE', KEYS[i], ARGV[3*i])
  out[#out+1] = tostring(v)
end
return out
`)

// budgetSettleScript adds each delta to its counter, when the counter
// still exists (a period that ended is not brought back). ARGV: the
// deltas. Returns the counters' values ("" for a missing one).
var budgetSettleScript = redis.NewScript(`
local out = {}
for i = 1, #KEYS do
  if redis.call('EXISTS', KEYS[i]) == 1 then
    out[#out+1] = tostring(redis.call('INCRBYFLOAT', KEYS[i], ARGV[i]))
  else
    out[#out+1] = ''
  end
end
return out
`)

// BudgetSeed returns what a tenant used of a unit since a period's
// start, as recorded (the ledger), to start a counter from.
type BudgetSeed func(ctx context.Context, scope Scope, name string, unit Unit, since time.Time) (float64, error)

// MaxBudgetCharges bounds the budgets of one request: a user's, an API
// key's and a team's, each of two units and two periods.
const MaxBudgetCharges = 12

// BudgetTicket is an admitted request's reservation against its budgets,
// settled once with its real usage.
type BudgetTicket struct {
	l       *Limiter
	remote  bool
	n       int
	keys    [MaxBudgetCharges]string
	charges [MaxBudgetCharges]BudgetCharge
	res     [MaxBudgetCharges]float64
	resetAt [MaxBudgetCharges]time.Time
	settled sync.Once
}

// localBudget is a counter of the per-instance store.
type localBudget struct {
	used    float64
	expires time.Time
}

// budgets is the Limiter's budget state: the per-instance counters, the
// seeds under way, and the states last seen, for the metrics.
type budgets struct {
	mu      sync.Mutex
	local   map[string]*localBudget
	seeding map[string]*seedCall
	seen    map[string]BudgetState
}

type seedCall struct {
	done chan struct{}
	v    float64
}

// maxSeen bounds the budget states kept for the metrics.
const maxSeen = 10_000

// AdmitBudgets decides req against its budgets and, when it passes,
// reserves its estimate on every one of them (all or none). The ticket
// must be settled once with the real usage (SettleBudgets).
func (l *Limiter) AdmitBudgets(ctx context.Context, req *BudgetRequest) (*BudgetTicket, BudgetDecision) {
	if len(req.Charges) > MaxBudgetCharges {
		req.Charges = req.Charges[:MaxBudgetCharges]
	}
	now := req.Now
	if now.IsZero() {
		now = time.Now()
	}
	t := &BudgetTicket{l: l, n: len(req.Charges)}
	for i := range req.Charges {
		c := &req.Charges[i]
		t.charges[i], t.keys[i] = *c, c.counterKey(now)
		t.res[i] = req.reservation(c.Budget.Unit)
		t.resetAt[i] = PeriodEnd(c.Budget.Per, now)
	}
	if l.rs != nil && !l.down.Load() {
		d, err := l.admitBudgetsRedis(ctx, t, now)
		if err == nil {
			if !d.Allowed {
				return nil, d
			}
			t.remote = true
			return t, d
		}
		if ctx.Err() == nil {
			l.failed("admit", err)
		}
	}
	if l.rs != nil && l.o.FailClosed {
		return nil, BudgetDecision{Unavailable: true}
	}
	d := l.admitBudgetsLocal(ctx, t, now)
	if l.rs != nil {
		d.Fallback = true
		l.fallback.Add(1)
	}
	if !d.Allowed {
		return nil, d
	}
	return t, d
}

// admitBudgetsRedis runs the script, seeding the counters it finds
// missing (one a round; each exists once seeded, so this ends).
func (l *Limiter) admitBudgetsRedis(ctx context.Context, t *BudgetTicket, now time.Time) (BudgetDecision, error) {
	keys := make([]string, t.n)
	args := make([]any, 0, 3*t.n)
	for i := 0; i < t.n; i++ {
		keys[i] = l.rs.prefix + t.keys[i]
		args = append(args, t.charges[i].Budget.Amount, t.res[i], counterTTL(t.resetAt[i], now).Milliseconds())
	}
	for round := 0; round <= t.n; round++ {
		cctx, cancel := context.WithTimeout(ctx, l.o.Timeout)
		res, err := budgetAdmitScript.Run(cctx, l.rs.client, keys, args...).StringSlice()
		cancel()
		if err != nil {
			return BudgetDecision{}, fmt.Errorf("limits: redis budgets: %w", err)
		}
		if len(res) < 2 {
			return BudgetDecision{}, fmt.Errorf("limits: redis budgets: %d results", len(res))
		}
		i, _ := strconv.Atoi(res[1])
		switch res[0] {
		case "-1":
			if i < 1 || i > t.n {
				return BudgetDecision{}, fmt.Errorf("limits: redis budgets: missing counter %d of %d", i, t.n)
			}
			v := l.seed(ctx, &t.charges[i-1], t.keys[i-1], now)
			cctx, cancel := context.WithTimeout(ctx, l.o.Timeout)
			err := l.rs.client.SetNX(cctx, keys[i-1], strconv.FormatFloat(v, 'f', -1, 64), counterTTL(t.resetAt[i-1], now)).Err()
			cancel()
			if err != nil {
				return BudgetDecision{}, fmt.Errorf("limits: redis budgets: seeding: %w", err)
			}
		case "0":
			if i < 1 || i > t.n || len(res) < 3 {
				return BudgetDecision{}, fmt.Errorf("limits: redis budgets: refusal %v", res)
			}
			used, _ := strconv.ParseFloat(res[2], 64)
			l.see(t, i-1, used)
			return BudgetDecision{Refused: i - 1, Used: used, ResetAt: t.resetAt[i-1]}, nil
		default:
			if len(res) != 2+t.n {
				return BudgetDecision{}, fmt.Errorf("limits: redis budgets: %d results for %d budgets", len(res), t.n)
			}
			for j := 0; j < t.n; j++ {
				used, _ := strconv.ParseFloat(res[2+j], 64)
				l.see(t, j, used)
			}
			return BudgetDecision{Allowed: true}, nil
		}
	}
	return BudgetDecision{}, fmt.Errorf("limits: redis budgets: counters still missing after seeding")
}

// counterTTL keeps a counter a day past its period's end.
func counterTTL(resetAt, now time.Time) time.Duration {
	return resetAt.Sub(now) + budgetKeep
}

// admitBudgetsLocal decides with the per-instance counters.
func (l *Limiter) admitBudgetsLocal(ctx context.Context, t *BudgetTicket, now time.Time) BudgetDecision {
	b := &l.budgets
	// Seed the missing counters first, outside the lock: the seed may
	// query a database.
	for i := 0; i < t.n; i++ {
		b.mu.Lock()
		_, ok := b.local[t.keys[i]]
		b.mu.Unlock()
		if !ok {
			v := l.seed(ctx, &t.charges[i], t.keys[i], now)
			b.mu.Lock()
			if _, ok := b.local[t.keys[i]]; !ok {
				b.local[t.keys[i]] = &localBudget{used: v, expires: t.resetAt[i]}
			}
			b.mu.Unlock()
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for i := 0; i < t.n; i++ {
		lb := b.local[t.keys[i]]
		if lb == nil { // swept meanwhile: its period ended
			lb = &localBudget{expires: t.resetAt[i]}
			b.local[t.keys[i]] = lb
		}
		if lb.used >= t.charges[i].Budget.Amount {
			b.seeLocked(t, i, lb.used)
			return BudgetDecision{Refused: i, Used: lb.used, ResetAt: t.resetAt[i]}
		}
	}
	for i := 0; i < t.n; i++ {
		lb := b.local[t.keys[i]]
		lb.used += t.res[i]
		b.seeLocked(t, i, lb.used)
	}
	return BudgetDecision{Allowed: true}
}

// seed is the counter's starting value: Options.BudgetSeed's, or 0 without
// one or when it fails (the failure is reported; admitting is the safe
// side for availability, and the ledger's figure comes back at the next
// period). Concurrent seeds of one counter share one call.
func (l *Limiter) seed(ctx context.Context, c *BudgetCharge, key string, now time.Time) float64 {
	if l.o.BudgetSeed == nil {
		return 0
	}
	b := &l.budgets
	b.mu.Lock()
	if call, ok := b.seeding[key]; ok {
		b.mu.Unlock()
		select {
		case <-call.done:
			return call.v
		case <-ctx.Done():
			return 0
		}
	}
	call := &seedCall{done: make(chan struct{})}
	b.seeding[key] = call
	b.mu.Unlock()
	v, err := l.o.BudgetSeed(ctx, c.Scope, c.Name, c.Budget.Unit, PeriodStart(c.Budget.Per, now))
	if err != nil {
		v = 0
		if l.o.OnSeedError != nil {
			l.o.OnSeedError(err)
		}
	}
	call.v = v
	close(call.done)
	b.mu.Lock()
	delete(b.seeding, key)
	b.mu.Unlock()
	return v
}

// see records a counter's value for the metrics.
func (l *Limiter) see(t *BudgetTicket, i int, used float64) {
	l.budgets.mu.Lock()
	l.budgets.seeLocked(t, i, used)
	l.budgets.mu.Unlock()
}

func (b *budgets) seeLocked(t *BudgetTicket, i int, used float64) {
	k := t.keys[i]
	if _, ok := b.seen[k]; !ok && len(b.seen) >= maxSeen {
		return
	}
	c := &t.charges[i]
	b.seen[k] = BudgetState{Scope: c.Scope, Name: c.Name, Budget: c.Budget, Used: used, ResetAt: t.resetAt[i]}
}

// Settle turns the reservation into the request's real usage, in tokens
// and in cost (a refund or an extra charge). Only the first call counts.
// A settlement Redis cannot take now is applied when it answers again.
func (t *BudgetTicket) Settle(tokens int, cost float64) {
	if t == nil {
		return
	}
	t.settled.Do(func() { t.settle(tokens, cost) })
}

func (t *BudgetTicket) settle(tokens int, cost float64) {
	l := t.l
	deltas := make([]float64, t.n)
	for i := 0; i < t.n; i++ {
		used := float64(tokens)
		if t.charges[i].Budget.Unit == UnitCost {
			used = cost
		}
		deltas[i] = used - t.res[i]
	}
	if !t.remote {
		b := &l.budgets
		b.mu.Lock()
		for i := 0; i < t.n; i++ {
			if lb := b.local[t.keys[i]]; lb != nil {
				lb.used += deltas[i]
				b.seeLocked(t, i, lb.used)
			}
		}
		b.mu.Unlock()
		return
	}
	keys := make([]string, t.n)
	args := make([]any, t.n)
	for i := 0; i < t.n; i++ {
		keys[i], args[i] = l.rs.prefix+t.keys[i], deltas[i]
	}
	if !l.down.Load() {
		ctx, cancel := context.WithTimeout(context.Background(), l.o.Timeout)
		res, err := budgetSettleScript.Run(ctx, l.rs.client, keys, args...).StringSlice()
		cancel()
		if err == nil {
			for i := 0; i < len(res) && i < t.n; i++ {
				if used, perr := strconv.ParseFloat(res[i], 64); perr == nil {
					l.see(t, i, used)
				}
			}
			return
		}
		l.failed("settle", err)
	}
	l.mu.Lock()
	if len(l.pending) >= maxPending {
		l.pending = l.pending[1:]
	}
	l.pending = append(l.pending, pendingSettle{keys: keys, args: args, script: budgetSettleScript})
	l.mu.Unlock()
}

// BudgetStates returns the budget counters this instance saw in their
// current periods (those of ended periods are forgotten).
func (l *Limiter) BudgetStates() []BudgetState {
	b := &l.budgets
	now := time.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]BudgetState, 0, len(b.seen))
	for k, s := range b.seen {
		if !now.Before(s.ResetAt) {
			delete(b.seen, k)
			continue
		}
		out = append(out, s)
	}
	return out
}

// sweepBudgets forgets the per-instance counters of ended periods.
func (b *budgets) sweep(now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for k, lb := range b.local {
		if !now.Before(lb.expires) {
			delete(b.local, k)
		}
	}
}

// BudgetUsed reports, for tests and tools, a budget counter's value in the
// period now is in, from Redis (or the per-instance state without it);
// ok is false when the counter does not exist.
func (l *Limiter) BudgetUsed(ctx context.Context, c BudgetCharge, now time.Time) (used float64, ok bool, err error) {
	k := c.counterKey(now)
	if l.rs != nil {
		v, err := l.rs.client.Get(ctx, l.rs.prefix+k).Float64()
		if err == redis.Nil {
			return 0, false, nil
		}
		return v, err == nil, err
	}
	l.budgets.mu.Lock()
	defer l.budgets.mu.Unlock()
	if lb := l.budgets.local[k]; lb != nil {
		return lb.used, true, nil
	}
	return 0, false, nil
}
