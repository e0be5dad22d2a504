package limits

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmedge/llmedge/internal/redistest"
)

func TestParseBudget(t *testing.T) {
	tests := []struct {
		in      []string
		want    Budget
		wantErr bool
	}{
		{in: []string{"tokens", "1000000", "per", "month"}, want: Budget{UnitTokens, 1e6, PerMonth}},
		{in: []string{"cost", "12.5", "per", "day"}, want: Budget{UnitCost, 12.5, PerDay}},
		{in: []string{"cost", "5", "day"}, want: Budget{UnitCost, 5, PerDay}},
		{in: []string{"tokens", "off", "per", "day"}, want: Budget{UnitTokens, Off, PerDay}},
		{in: []string{"tokens", "0", "per", "day"}, wantErr: true},
		{in: []string{"tokens", "-3", "per", "day"}, wantErr: true},
		{in: []string{"tokens", "NaN", "per", "day"}, wantErr: true},
		{in: []string{"tokens", "+Inf", "per", "day"}, wantErr: true},
		{in: []string{"dollars", "5", "per", "day"}, wantErr: true},
		{in: []string{"tokens", "5", "per", "week"}, wantErr: true},
		{in: []string{"tokens", "5"}, wantErr: true},
		{in: []string{"tokens", "5", "each", "day"}, wantErr: true},
	}
	for _, tt := range tests {
		got, err := ParseBudget(tt.in)
		if (err != nil) != tt.wantErr {
			t.Errorf("ParseBudget(%q) error = %v, want error %v", tt.in, err, tt.wantErr)
			continue
		}
		if err == nil && got != tt.want {
			t.Errorf("ParseBudget(%q) = %+v, want %+v", tt.in, got, tt.want)
		}
	}
}

func TestMergeBudgets(t *testing.T) {
	monthTokens := Budget{UnitTokens, 1000, PerMonth}
	dayTokens := Budget{UnitTokens, 100, PerDay}
	monthCost := Budget{UnitCost, 5, PerMonth}
	tests := []struct {
		name      string
		own, base []Budget
		want      []Budget
	}{
		{name: "no base", own: []Budget{monthTokens}, want: []Budget{monthTokens}},
		{name: "inherits", base: []Budget{monthTokens, monthCost}, want: []Budget{monthTokens, monthCost}},
		{name: "own replaces the same unit and period", own: []Budget{{UnitTokens, 50, PerMonth}}, base: []Budget{monthTokens, dayTokens},
			want: []Budget{{UnitTokens, 50, PerMonth}, dayTokens}},
		{name: "off lifts", own: []Budget{{UnitTokens, Off, PerMonth}}, base: []Budget{monthTokens, monthCost}, want: []Budget{monthCost}},
		{name: "off in base is nothing", base: []Budget{{UnitCost, Off, PerDay}}, want: []Budget{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := MergeBudgets(tt.own, tt.base)
			if len(got) != len(tt.want) {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Fatalf("got %+v, want %+v", got, tt.want)
				}
			}
		})
	}
	if err := ValidateBudgets([]Budget{monthTokens, {UnitTokens, 3, PerMonth}}); err == nil {
		t.Error("two monthly token budgets validated")
	}
}

func TestPeriods(t *testing.T) {
	at := time.Date(2026, 12, 31, 23, 59, 59, 0, time.FixedZone("x", 3600)) // 22:59:59 UTC
	tests := []struct {
		p            Period
		start, end   time.Time
		id           string
		counterShape string
	}{
		{PerDay, time.Date(2026, 12, 31, 0, 0, 0, 0, time.UTC), time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC), "d20261231", "b:td20261231:u:alice"},
		{PerMonth, time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC), "m202612", "b:tm202612:u:alice"},
	}
	for _, tt := range tests {
		if got := PeriodStart(tt.p, at); !got.Equal(tt.start) {
			t.Errorf("%s start = %v, want %v", tt.p, got, tt.start)
		}
		if got := PeriodEnd(tt.p, at); !got.Equal(tt.end) {
			t.Errorf("%s end = %v, want %v", tt.p, got, tt.end)
		}
		if got := periodID(tt.p, at); got != tt.id {
			t.Errorf("%s id = %q, want %q", tt.p, got, tt.id)
		}
		c := BudgetCharge{Scope: ScopeUser, Name: "alice", Budget: Budget{UnitTokens, 1, tt.p}}
		if got := c.counterKey(at); got != tt.counterShape {
			t.Errorf("counter key %q, want %q", got, tt.counterShape)
		}
	}
	team := BudgetCharge{Scope: ScopeTeam, Name: "alice", Budget: Budget{UnitCost, 1, PerDay}}
	if k := team.counterKey(at); k != "b:cd20261231:g:alice" {
		t.Errorf("team counter %q", k)
	}
}

func tokens(scope Scope, name string, n float64) BudgetCharge {
	return BudgetCharge{Scope: scope, Name: name, Budget: Budget{UnitTokens, n, PerMonth}}
}

func TestBudgetReservedThenSettled(t *testing.T) {
	for _, s := range stores(t) {
		t.Run(s.name, func(t *testing.T) {
			l := s.new(t)
			ctx := context.Background()
			req := &BudgetRequest{Charges: []BudgetCharge{tokens(ScopeUser, "alice", 1000)}, Tokens: 400}
			// 400 reserved, settled to 300: 300 used.
			tk, d := l.AdmitBudgets(ctx, req)
			if !d.Allowed {
				t.Fatalf("refused: %+v", d)
			}
			tk.Settle(300, 0)
			tk.Settle(999, 0) // only the first counts
			used, ok, err := l.BudgetUsed(ctx, req.Charges[0], time.Now())
			if err != nil || !ok || used != 300 {
				t.Fatalf("used %v (exists %v, %v), want 300", used, ok, err)
			}
			// Two more pass (300 → 700 → 1100 reserved): admitted while below.
			t1, d1 := l.AdmitBudgets(ctx, req)
			t2, d2 := l.AdmitBudgets(ctx, req)
			if !d1.Allowed || !d2.Allowed {
				t.Fatalf("refused below the budget: %+v %+v", d1, d2)
			}
			_, d3 := l.AdmitBudgets(ctx, req)
			if d3.Allowed {
				t.Fatal("admitted at 1100 of 1000")
			}
			if d3.Used != 1100 || d3.Refused != 0 {
				t.Errorf("refusal %+v, want used 1100 by budget 0", d3)
			}
			if want := PeriodEnd(PerMonth, time.Now()); !d3.ResetAt.Equal(want) {
				t.Errorf("resets at %v, want %v", d3.ResetAt, want)
			}
			// Refunds bring it below: admitted again.
			t1.Settle(0, 0)
			t2.Settle(100, 0)
			if _, d := l.AdmitBudgets(ctx, req); !d.Allowed {
				t.Errorf("refused at 400 of 1000: %+v", d)
			}
			states := l.BudgetStates()
			if len(states) != 1 || states[0].Name != "alice" || states[0].Used != 800 {
				t.Errorf("states %+v, want alice at 800", states)
			}
		})
	}
}

func TestBudgetAllOrNothing(t *testing.T) {
	for _, s := range stores(t) {
		t.Run(s.name, func(t *testing.T) {
			l := s.new(t)
			ctx := context.Background()
			team := tokens(ScopeTeam, "research", 100)
			if tk, d := l.AdmitBudgets(ctx, &BudgetRequest{Charges: []BudgetCharge{team}, Tokens: 100}); !d.Allowed {
				t.Fatal("refused")
			} else {
				tk.Settle(100, 0)
			}
			user := tokens(ScopeUser, "bob", 1000)
			_, d := l.AdmitBudgets(ctx, &BudgetRequest{Charges: []BudgetCharge{user, team}, Tokens: 10})
			if d.Allowed || d.Refused != 1 {
				t.Fatalf("decision %+v, want refused by the team's (1)", d)
			}
			if used, _, _ := l.BudgetUsed(ctx, user, time.Now()); used != 0 {
				t.Errorf("the user's budget was charged %v for a refused request", used)
			}
		})
	}
}

func TestBudgetCost(t *testing.T) {
	l := startLimiter(t, Options{})
	c := BudgetCharge{Scope: ScopeKey, Name: "k1", Budget: Budget{UnitCost, 0.01, PerDay}}
	tk, d := l.AdmitBudgets(context.Background(), &BudgetRequest{Charges: []BudgetCharge{c}, Tokens: 1000, Cost: 0.004})
	if !d.Allowed {
		t.Fatal("refused")
	}
	tk.Settle(900, 0.0025)
	if used, _, _ := l.BudgetUsed(context.Background(), c, time.Now()); used < 0.00249 || used > 0.00251 {
		t.Errorf("cost used %v, want 0.0025", used)
	}
}

// TestBudgetSeeded: a counter that does not exist starts from the seed
// (the ledger's sum), once, whatever the concurrency.
func TestBudgetSeeded(t *testing.T) {
	for _, s := range []string{"local", "redis"} {
		t.Run(s, func(t *testing.T) {
			var calls atomic.Int32
			var since time.Time
			o := Options{BudgetSeed: func(_ context.Context, scope Scope, name string, unit Unit, from time.Time) (float64, error) {
				calls.Add(1)
				since = from
				if scope != ScopeUser || name != "alice" || unit != UnitTokens {
					return 0, errors.New("unexpected seed")
				}
				return 950, nil
			}}
			if s == "redis" {
				o.Redis, o.Prefix = redistest.Start(t).Client(t), "test:"
			}
			l := startLimiter(t, o)
			c := tokens(ScopeUser, "alice", 1000)
			var wg sync.WaitGroup
			var admitted atomic.Int32
			for i := 0; i < 8; i++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if _, d := l.AdmitBudgets(context.Background(), &BudgetRequest{Charges: []BudgetCharge{c}, Tokens: 100}); d.Allowed {
						admitted.Add(1)
					}
				}()
			}
			wg.Wait()
			if admitted.Load() != 1 {
				t.Errorf("%d admitted from 950 of 1000 by 100 each, want 1", admitted.Load())
			}
			if n := calls.Load(); n < 1 || (s == "local" && n != 1) {
				t.Errorf("%d seeds", n)
			}
			if want := PeriodStart(PerMonth, time.Now()); !since.Equal(want) {
				t.Errorf("seeded since %v, want %v", since, want)
			}
		})
	}
}

// TestBudgetExactAcrossInstances: two limiters sharing Redis, many
// concurrent requests: what is admitted stays within the budget plus one
// reservation.
func TestBudgetExactAcrossInstances(t *testing.T) {
	srv := redistest.Start(t)
	a := startLimiter(t, Options{Redis: srv.Client(t), Prefix: "x:"})
	b := startLimiter(t, Options{Redis: srv.Client(t), Prefix: "x:"})
	const budget, reserve, use = 5000, 120, 100
	c := tokens(ScopeTeam, "t", budget)
	const workers = 8
	var used atomic.Int64
	var wg sync.WaitGroup
	for i := 0; i < workers; i++ {
		wg.Add(1)
		l := a
		if i%2 == 1 {
			l = b
		}
		go func() {
			defer wg.Done()
			for { // until refused: every worker sees the budget spent
				tk, d := l.AdmitBudgets(context.Background(), &BudgetRequest{Charges: []BudgetCharge{c}, Tokens: reserve})
				if !d.Allowed {
					return
				}
				used.Add(use)
				tk.Settle(use, 0)
			}
		}()
	}
	wg.Wait()
	// At the last refusal the counter held at least the budget, of which
	// at most one reservation per worker was later refunded in part.
	if got := used.Load(); got > budget+reserve || got < budget-workers*(reserve-use) {
		t.Errorf("used %d of a %d budget, want within [%d, %d]", got, budget, budget-workers*(reserve-use), budget+reserve)
	}
	if v, _, _ := a.BudgetUsed(context.Background(), c, time.Now()); int64(v) != used.Load() {
		t.Errorf("counter %v, want the settled %d", v, used.Load())
	}
}

func TestBudgetRedisFailure(t *testing.T) {
	srv := redistest.Start(t)
	l := startLimiter(t, Options{Redis: srv.Client(t), Prefix: "f:", Timeout: 100 * time.Millisecond})
	c := tokens(ScopeUser, "u", 1000)
	tk, d := l.AdmitBudgets(context.Background(), &BudgetRequest{Charges: []BudgetCharge{c}, Tokens: 500})
	if !d.Allowed {
		t.Fatal("refused")
	}
	srv.Kill()
	// Open: the per-instance counters decide meanwhile; the settlement
	// waits for Redis.
	_, d = l.AdmitBudgets(context.Background(), &BudgetRequest{Charges: []BudgetCharge{c}, Tokens: 500})
	if !d.Allowed || !d.Fallback {
		t.Errorf("during the outage: %+v, want allowed by the fallback", d)
	}
	tk.Settle(100, 0)
	if l.Pending() != 1 {
		t.Errorf("%d settlements pending, want 1", l.Pending())
	}
	closed := startLimiter(t, Options{Redis: srv.Client(t), Prefix: "f:", Timeout: 100 * time.Millisecond, FailClosed: true})
	if _, d := closed.AdmitBudgets(context.Background(), &BudgetRequest{Charges: []BudgetCharge{c}, Tokens: 1}); d.Allowed || !d.Unavailable {
		t.Errorf("fail closed during the outage: %+v", d)
	}
}
