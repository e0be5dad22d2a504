package limits

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Budgets cap what a tenant uses over a calendar period (a UTC day or
// month), in tokens or in cost, unlike the per-minute limits, which only
// pace it. A budget's counter holds what the period used so far plus the
// reservations of the requests still running: a request is admitted while
// the counter is below the budget, reserves its estimate (as tpm does),
// and settles to its real usage when it ends. So a budget of N admits
// answers summing to at most N plus one request's reservation.

// Unit is what a budget counts.
type Unit string

// The units.
const (
	// UnitTokens counts prompt and completion tokens.
	UnitTokens Unit = "tokens"
	// UnitCost counts cost, at the models' prices (the ledger's).
	UnitCost Unit = "cost"
)

// Period is a budget's calendar period, in UTC.
type Period string

// The periods.
const (
	PerDay   Period = "day"
	PerMonth Period = "month"
)

// Budget is an allowance per period. An Amount of Off lifts a budget of
// the same unit and period that would otherwise be inherited.
type Budget struct {
	Unit   Unit    `json:"unit"`
	Amount float64 `json:"amount"`
	Per    Period  `json:"per"`
}

// ParseBudget reads `<tokens|cost> <amount>|off per <day|month>` (the word
// per may be left out).
func ParseBudget(args []string) (Budget, error) {
	if len(args) == 4 && args[2] == "per" {
		args = []string{args[0], args[1], args[3]}
	}
	if len(args) != 3 {
		return Budget{}, fmt.Errorf("want <tokens|cost> <amount>|off per <day|month>, got %q", strings.Join(args, " "))
	}
	b := Budget{Unit: Unit(args[0]), Per: Period(args[2])}
	if args[1] == "off" {
		b.Amount = Off
	} else {
		v, err := strconv.ParseFloat(args[1], 64)
		if err != nil || !(v > 0) || math.IsInf(v, 0) {
			return Budget{}, fmt.Errorf("amount %q: want a number above 0, or off", args[1])
		}
		b.Amount = v
	}
	return b, b.Validate()
}

// Validate reports a unit, period or amount that is not one of the known.
func (b Budget) Validate() error {
	switch b.Unit {
	case UnitTokens, UnitCost:
	default:
		return fmt.Errorf("budget unit %q: want tokens or cost", b.Unit)
	}
	switch b.Per {
	case PerDay, PerMonth:
	default:
		return fmt.Errorf("budget period %q: want day or month", b.Per)
	}
	if !(b.Amount > 0 || b.Amount == Off) || math.IsInf(b.Amount, 0) {
		return fmt.Errorf("budget amount %v: want a number above 0, or off", b.Amount)
	}
	return nil
}

// String is the budget as configured: "tokens 1000000 per month".
func (b Budget) String() string {
	amount := "off"
	if b.Amount != Off {
		amount = strconv.FormatFloat(b.Amount, 'f', -1, 64)
	}
	return string(b.Unit) + " " + amount + " per " + string(b.Per)
}

// Describe names the budget in a sentence: "monthly token budget".
func (b Budget) Describe() string {
	period := "daily"
	if b.Per == PerMonth {
		period = "monthly"
	}
	unit := "token"
	if b.Unit == UnitCost {
		unit = "cost"
	}
	return period + " " + unit + " budget"
}

// ValidateBudgets checks every budget and that no unit and period is given
// twice.
func ValidateBudgets(bs []Budget) error {
	seen := map[[2]string]bool{}
	for _, b := range bs {
		if err := b.Validate(); err != nil {
			return err
		}
		k := [2]string{string(b.Unit), string(b.Per)}
		if seen[k] {
			return fmt.Errorf("budget %s per %s given twice", b.Unit, b.Per)
		}
		seen[k] = true
	}
	return nil
}

// MergeBudgets returns own with the budgets of base whose unit and period
// own does not set; budgets set to Off are left out.
func MergeBudgets(own, base []Budget) []Budget {
	if len(base) == 0 && !hasOff(own) {
		return own
	}
	out := make([]Budget, 0, len(own)+len(base))
	for _, b := range own {
		if b.Amount != Off {
			out = append(out, b)
		}
	}
	for _, b := range base {
		if b.Amount == Off || setsBudget(own, b) {
			continue
		}
		out = append(out, b)
	}
	return out
}

func hasOff(bs []Budget) bool {
	for _, b := range bs {
		if b.Amount == Off {
			return true
		}
	}
	return false
}

func setsBudget(bs []Budget, o Budget) bool {
	for _, b := range bs {
		if b.Unit == o.Unit && b.Per == o.Per {
			return true
		}
	}
	return false
}

// PeriodStart is the start of the period (UTC) that t is in.
func PeriodStart(p Period, t time.Time) time.Time {
	t = t.UTC()
	if p == PerMonth {
		return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
	}
	return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
}

// PeriodEnd is the end of the period that t is in: when its budgets reset.
func PeriodEnd(p Period, t time.Time) time.Time {
	s := PeriodStart(p, t)
	if p == PerMonth {
		return s.AddDate(0, 1, 0)
	}
	return s.AddDate(0, 0, 1)
}

// periodID names the period t is in, in counter keys: d20261125, m202611.
func periodID(p Period, t time.Time) string {
	t = t.UTC()
	if p == PerMonth {
		return "m" + t.Format("200601")
	}
	return "d" + t.Format("20060102")
}

// BudgetCharge is one budget a request is charged against: whose (its
// scope and name: a user, an API key's id, a team) and which.
type BudgetCharge struct {
	Scope  Scope
	Name   string
	Budget Budget
}

// counterKey names the charge's counter in the period t is in. The unit
// and period come before the tenant's key, whose name may hold anything.
func (c *BudgetCharge) counterKey(t time.Time) string {
	return "b:" + string(c.Budget.Unit[0]) + periodID(c.Budget.Per, t) + ":" + scopeKey(c.Scope, c.Name)
}

// scopeKey is the bucket key of a scope's tenant.
func scopeKey(s Scope, name string) string {
	switch s {
	case ScopeKey:
		return KeyKey(name)
	case ScopeTeam:
		return TeamKey(name)
	}
	return UserKey(name)
}

// BudgetRequest is what one admission asks of the budgets.
type BudgetRequest struct {
	Charges []BudgetCharge
	// Tokens and Cost are the reservation, in each unit: the prompt's
	// estimate plus the reply cap, and what they would cost.
	Tokens int
	Cost   float64
	// Now is the request's time, which picks the period; time.Now when 0.
	Now time.Time
}

// reservation is what req reserves against a budget of unit u.
func (req *BudgetRequest) reservation(u Unit) float64 {
	if u == UnitCost {
		return req.Cost
	}
	return float64(req.Tokens)
}

// BudgetDecision is the outcome of a budgets' admission.
type BudgetDecision struct {
	Allowed bool
	// Refused is the index of the budget that refused, Used what its
	// counter held, ResetAt when its period ends.
	Refused int
	Used    float64
	ResetAt time.Time
	// Unavailable: the shared store is unreachable and the limiter fails
	// closed.
	Unavailable bool
	// Fallback: decided by the per-instance counters while the shared
	// store was unreachable.
	Fallback bool
}

// BudgetState is one budget's counter as this instance last saw it, for
// the metrics and the status page.
type BudgetState struct {
	Scope  Scope
	Name   string
	Budget Budget
	// Used is the period's use, reservations of running requests included.
	Used    float64
	ResetAt time.Time
}

// Fraction is the part of the budget used (1 and above: spent).
func (s BudgetState) Fraction() float64 {
	if s.Budget.Amount <= 0 {
		return 0
	}
	return s.Used / s.Budget.Amount
}
