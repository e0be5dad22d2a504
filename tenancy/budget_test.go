package tenancy

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/auth"
	"github.com/llmedge/llmedge/limits"
)

// TestTeamsAndBudgets: a team's limits and budgets apply on top of its
// members' own; a budget refusal costs the limits nothing, a limit's
// refusal gives the budgets their reservation back; settlements bring
// the budgets to the real usage, in tokens and in cost.
func TestTeamsAndBudgets(t *testing.T) {
	lim := limits.New(limits.Options{})
	ad := testAdmitter(t, lim, []auth.User{{Name: "alice", Team: "research"}, {Name: "bob", Team: "research"}})
	ad.l.Default = limits.Limit{Budgets: []limits.Budget{{Unit: limits.UnitTokens, Amount: 1e6, Per: limits.PerDay}}}
	ad.l.Cost = func(model string, prompt, cached, completion int) float64 { return float64(prompt + 2*completion) }
	ad.svc.cfg.Teams = map[string]Team{"research": {Limit: limits.Limit{RPM: 2,
		Budgets: []limits.Budget{{Unit: limits.UnitCost, Amount: 1000, Per: limits.PerMonth}}}}}
	ctx := context.Background()
	team := limits.BudgetCharge{Scope: limits.ScopeTeam, Name: "research", Budget: ad.svc.cfg.Teams["research"].Limit.Budgets[0]}
	user := limits.BudgetCharge{Scope: limits.ScopeUser, Name: "alice", Budget: ad.l.Default.Budgets[0]}
	used := func(c limits.BudgetCharge) float64 {
		v, _, _ := lim.BudgetUsed(ctx, c, time.Now())
		return v
	}
	adm := func(user string) *Admission {
		a := admission(user, "", "qwen")
		a.Team = "research"
		return a
	}

	// alice: reserved (300 bytes, 2 messages: 111 tokens, and 100 of reply),
	// then settled to 30 + 10 tokens.
	tk, err := ad.Admit(ctx, adm("alice"), http.Header{})
	if err != nil {
		t.Fatal(err)
	}
	if got := used(user); got != 211 {
		t.Errorf("alice's budget holds %v while running, want the reservation 211", got)
	}
	if got := used(team); got != 111+200 {
		t.Errorf("the team's cost budget holds %v while running, want 311", got)
	}
	tk.Settle(Settlement{Status: 200, Served: true, UsageKnown: true, Usage: apiUsage(30, 10)})
	if got, gotTeam := used(user), used(team); got != 40 || gotTeam != 50 {
		t.Errorf("after settling: alice %v (want 40), team %v (want 50)", got, gotTeam)
	}
	// bob shares the team's 2 rpm: the third request of the team is
	// refused by its bucket, naming the team, and bob's budget gets its
	// reservation back.
	if _, err := ad.Admit(ctx, adm("bob"), http.Header{}); err != nil {
		t.Fatal(err)
	}
	_, err = ad.Admit(ctx, adm("bob"), http.Header{})
	if err == nil || err.Status != 429 || !strings.Contains(err.Error(), "team 'research': 2 requests per minute") {
		t.Fatalf("the team's third request: %v", err)
	}
	bobs := limits.BudgetCharge{Scope: limits.ScopeUser, Name: "bob", Budget: ad.l.Default.Budgets[0]}
	if got := used(bobs); got != 211 {
		t.Errorf("bob's budget holds %v: the refused request's reservation was not given back", got)
	}
}

func TestBudgetRefusal(t *testing.T) {
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	c := limits.BudgetCharge{Scope: limits.ScopeKey, Name: "k1", Budget: limits.Budget{Unit: limits.UnitCost, Amount: 2.5, Per: limits.PerMonth}}
	e := budgetRefusal(c, limits.BudgetDecision{Refused: 0, Used: 2.6, ResetAt: limits.PeriodEnd(limits.PerMonth, now)}, now)
	want := "budget_exceeded: the monthly cost budget of API key 'k1' (2.5) is spent (2.6 used); it resets at 2026-12-01T00:00:00Z"
	if e.Status != 429 || e.Detail != want || e.Code != BudgetExceeded || e.Extra["reset_at"] != "2026-12-01T00:00:00Z" ||
		e.Headers["Retry-After"] != "475200" {
		t.Errorf("refusal %d %q code %q extra %v headers %v", e.Status, e.Detail, e.Code, e.Extra, e.Headers)
	}
}

func apiUsage(prompt, completion int) api.Usage {
	return api.Usage{PromptTokens: prompt, CompletionTokens: completion, TotalTokens: prompt + completion}
}

// TestBudgetCostFactor: a request that pays a part of the price (a
// batch's line) reserves and settles that part of the cost against the
// cost budgets; its tokens count in full.
func TestBudgetCostFactor(t *testing.T) {
	for _, tt := range []struct {
		name   string
		factor float64
		want   float64
	}{
		{"whole price", 0, 30 + 2*10},
		{"half price", 0.5, (30 + 2*10) * 0.5},
	} {
		t.Run(tt.name, func(t *testing.T) {
			lim := limits.New(limits.Options{})
			ad := testAdmitter(t, lim, []auth.User{{Name: "alice"}})
			ad.l.Default = limits.Limit{Budgets: []limits.Budget{
				{Unit: limits.UnitCost, Amount: 1e6, Per: limits.PerDay},
				{Unit: limits.UnitTokens, Amount: 1e6, Per: limits.PerDay}}}
			ad.l.Cost = func(model string, prompt, cached, completion int) float64 { return float64(prompt + 2*completion) }
			ctx := context.Background()
			a := admission("alice", "", "qwen")
			a.CostFactor = tt.factor
			tk, err := ad.Admit(ctx, a, http.Header{})
			if err != nil {
				t.Fatal(err)
			}
			cost := limits.BudgetCharge{Scope: limits.ScopeUser, Name: "alice", Budget: ad.l.Default.Budgets[0]}
			tokens := limits.BudgetCharge{Scope: limits.ScopeUser, Name: "alice", Budget: ad.l.Default.Budgets[1]}
			tk.Settle(Settlement{Status: 200, Served: true, UsageKnown: true, Usage: apiUsage(30, 10)})
			if v, _, _ := lim.BudgetUsed(ctx, cost, time.Now()); v != tt.want {
				t.Errorf("cost budget used %v, want %v", v, tt.want)
			}
			if v, _, _ := lim.BudgetUsed(ctx, tokens, time.Now()); v != 40 {
				t.Errorf("tokens budget used %v, want 40", v)
			}
		})
	}
}
