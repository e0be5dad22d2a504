package tenancy

import (
	"math"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/limits"
	"github.com/llmedge/llmedge/metrics"
)

// BudgetExceeded is the machine-readable code of a refusal by a budget:
// OpenAI's error code, the native door's "error" member, and the start of
// every door's message.
const BudgetExceeded = "budget_exceeded"

// budgetRefusal is the 429 of a request refused by the budget of c: it
// names the budget and when it resets, in the detail and in Retry-After
// (seconds until the period ends).
func budgetRefusal(c limits.BudgetCharge, d limits.BudgetDecision, now time.Time) *api.Error {
	var who string
	switch c.Scope {
	case limits.ScopeKey:
		who = "API key '" + c.Name + "'"
	case limits.ScopeTeam:
		who = "team '" + c.Name + "'"
	default:
		who = "user '" + c.Name + "'"
	}
	reset := d.ResetAt.UTC().Format(time.RFC3339)
	secs := int64(math.Ceil(max(d.ResetAt.Sub(now), time.Second).Seconds()))
	e := api.NewError(http.StatusTooManyRequests,
		BudgetExceeded+": the "+c.Budget.Describe()+" of "+who+" ("+amount(c.Budget.Unit, c.Budget.Amount)+
			") is spent ("+amount(c.Budget.Unit, d.Used)+" used); it resets at "+reset).
		WithHeader("Retry-After", strconv.FormatInt(secs, 10))
	e.Code = BudgetExceeded
	e.Extra = map[string]string{"error": BudgetExceeded, "reset_at": reset}
	return e
}

// amount writes a budget's figure: whole tokens, or a cost.
func amount(u limits.Unit, v float64) string {
	if u == limits.UnitCost {
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	return strconv.FormatFloat(math.Round(v), 'f', 0, 64) + " tokens"
}

// BudgetStatus is one budget's use in its current period, as this
// instance last saw its counter.
type BudgetStatus struct {
	// Scope is user, api_key or team; Name the tenant.
	Scope    string  `json:"scope"`
	Name     string  `json:"name"`
	Unit     string  `json:"unit"`
	Per      string  `json:"per"`
	Budget   float64 `json:"budget"`
	Used     float64 `json:"used"`
	Fraction float64 `json:"fraction"`
	// ResetAt is when the period ends.
	ResetAt time.Time `json:"reset_at"`
	// Warning: Fraction is at or past the warning threshold.
	Warning bool `json:"warning"`
}

// Budgets reports the budgets this instance saw in their current periods,
// the most used first.
func (s *Service) Budgets() []BudgetStatus {
	if s.state == nil {
		return nil
	}
	warn := s.BudgetWarning()
	states := s.state.limiter.BudgetStates()
	out := make([]BudgetStatus, 0, len(states))
	for _, st := range states {
		f := st.Fraction()
		out = append(out, BudgetStatus{Scope: st.Scope.String(), Name: st.Name, Unit: string(st.Budget.Unit),
			Per: string(st.Budget.Per), Budget: st.Budget.Amount, Used: st.Used, Fraction: f,
			ResetAt: st.ResetAt, Warning: f >= warn})
	}
	sortBudgets(out)
	return out
}

// BudgetWarning is the warning threshold, a fraction of a budget.
func (s *Service) BudgetWarning() float64 {
	if s.cfg.BudgetWarning > 0 {
		return s.cfg.BudgetWarning
	}
	return DefaultBudgetWarning
}

func sortBudgets(bs []BudgetStatus) {
	slices.SortFunc(bs, func(a, b BudgetStatus) int {
		switch {
		case a.Fraction > b.Fraction:
			return -1
		case a.Fraction < b.Fraction:
			return 1
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
}

// BudgetUsage implements metrics.BudgetSource.
func (s *Service) BudgetUsage() []metrics.BudgetUse {
	if s.state == nil {
		return nil
	}
	states := s.state.limiter.BudgetStates()
	out := make([]metrics.BudgetUse, len(states))
	for i, st := range states {
		out[i] = metrics.BudgetUse{Scope: st.Scope.String(), Name: st.Name, Unit: string(st.Budget.Unit),
			Per: string(st.Budget.Per), Used: st.Used, Budget: st.Budget.Amount}
	}
	return out
}

var _ metrics.BudgetSource = (*Service)(nil)
