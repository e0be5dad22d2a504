package llmapp

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/llmedge/llmedge/auth"
	"github.com/llmedge/llmedge/ledger"
	"github.com/llmedge/llmedge/limits"
	"github.com/llmedge/llmedge/tenancy"
)

// TeamConfig is a team (the `team` option): the models its members may
// use (nil: whatever their own credentials allow) and the limits and
// budgets of all its members together.
type TeamConfig struct {
	Models []string     `json:"models,omitempty"`
	Limits limits.Limit `json:"limits,omitempty"`
}

// parseTeam parses
//
//	team <name> [{
//		models      <model>...
//		rpm         <n>|off
//		tpm         <n>|off
//		concurrency <n>|off
//		budget      <tokens|cost> <amount> per <day|month>   # repeatable
//	}]
func (a *App) parseTeam(d *caddyfile.Dispenser) error {
	args := d.RemainingArgs()
	if len(args) != 1 {
		return d.Errf("team: want team <name> [{ models ...; rpm <n>; tpm <n>; concurrency <n>; budget ... }]")
	}
	name := args[0]
	if err := auth.ValidateTeamName(name); err != nil {
		return d.Errf("%v", err)
	}
	if a.Teams[name] != nil {
		return d.Errf("team %s: defined twice", name)
	}
	tc := &TeamConfig{}
	var budgets []limits.Budget
	var err error
	if tc.Limits, err = parseLimits(d, "team "+name, func(opt string) (bool, error) {
		switch opt {
		case "models":
			ms := d.RemainingArgs()
			if len(ms) == 0 {
				return true, d.Errf("team %s: models: want at least one model", name)
			}
			tc.Models = append(tc.Models, ms...)
			return true, nil
		case "budget":
			return true, parseBudgetOption(d, "team "+name, &budgets)
		}
		return false, nil
	}); err != nil {
		return err
	}
	tc.Limits.Budgets = budgets
	if a.Teams == nil {
		a.Teams = map[string]*TeamConfig{}
	}
	a.Teams[name] = tc
	return nil
}

// parseBudgetOption parses `budget <tokens|cost> <amount>|off per
// <day|month>` into budgets.
func parseBudgetOption(d *caddyfile.Dispenser, what string, budgets *[]limits.Budget) error {
	b, err := limits.ParseBudget(d.RemainingArgs())
	if err != nil {
		return d.Errf("%s: budget: %v", what, err)
	}
	*budgets = append(*budgets, b)
	if err := limits.ValidateBudgets(*budgets); err != nil {
		return d.Errf("%s: %v", what, err)
	}
	return nil
}

// parseLimitsWithBudgets parses a limits block that takes budget lines.
func parseLimitsWithBudgets(d *caddyfile.Dispenser, what string) (limits.Limit, error) {
	var budgets []limits.Budget
	l, err := parseLimits(d, what, func(opt string) (bool, error) {
		if opt != "budget" {
			return false, nil
		}
		return true, parseBudgetOption(d, what, &budgets)
	})
	l.Budgets = budgets
	return l, err
}

// parseBudgetWarning parses `budget_warning <fraction>|<percent>%`.
func parseBudgetWarning(d *caddyfile.Dispenser, dst *float64) error {
	var v string
	if err := oneString(d, &v); err != nil {
		return err
	}
	s, pct := v, false
	if len(s) > 1 && s[len(s)-1] == '%' {
		s, pct = s[:len(s)-1], true
	}
	f, err := strconv.ParseFloat(s, 64)
	if pct {
		f /= 100
	}
	if err != nil || !(f > 0 && f <= 1) {
		return d.Errf("budget_warning %q: want a fraction above 0 up to 1 (0.8) or a percentage (80%%)", v)
	}
	*dst = f
	return nil
}

// validateTeams checks the teams' models and limits, and that every
// inline user's team is one of them.
func (a *App) validateTeams(seen map[string]bool) error {
	for name, t := range a.Teams {
		for _, m := range t.Models {
			if !seen[m] {
				return fmt.Errorf("team %s: model %q is not a configured model", name, m)
			}
		}
		if err := t.Limits.Validate(); err != nil {
			return fmt.Errorf("team %s: %w", name, err)
		}
	}
	for _, u := range a.Users {
		if u.Team != "" && a.Teams[u.Team] == nil {
			return fmt.Errorf("user %q: team %q is not configured (a team line)", u.Name, u.Team)
		}
	}
	return nil
}

// tenancyTeams are the teams for tenancy.Config.
func (a *App) tenancyTeams() map[string]tenancy.Team {
	if len(a.Teams) == 0 {
		return nil
	}
	out := make(map[string]tenancy.Team, len(a.Teams))
	for name, t := range a.Teams {
		out[name] = tenancy.Team{Models: t.Models, Limit: t.Limits}
	}
	return out
}

// teamsInUse reports whether a principal may have a team: teams are
// configured, or users (inline or from the users file) may name one.
func (a *App) teamsInUse() bool {
	if len(a.Teams) > 0 || a.UsersFile != "" {
		return true
	}
	for _, u := range a.Users {
		if u.Team != "" {
			return true
		}
	}
	return false
}

// budgetsConfigured reports whether any budget is configured in the
// Caddyfile (the users file may add some: it counts as limits anyway).
func (a *App) budgetsConfigured() bool {
	if rl := a.RateLimits; rl != nil {
		if len(rl.Budgets) > 0 || (rl.APIKey != nil && len(rl.APIKey.Budgets) > 0) {
			return true
		}
	}
	for _, u := range a.Users {
		if u.Limits != nil && len(u.Limits.Budgets) > 0 {
			return true
		}
	}
	for _, t := range a.Tiers {
		if len(t.Limit.Budgets) > 0 {
			return true
		}
	}
	for _, t := range a.Teams {
		if t.Limits.Enforced() || len(t.Limits.Budgets) > 0 {
			return true
		}
	}
	return false
}

// seedBudget is the ledger's record of a tenant's use since a period's
// start, which a budget's counter starts from (0 without a ledger).
// Records still in the writer's buffer are not counted.
func (a *App) seedBudget(ctx context.Context, scope limits.Scope, name string, unit limits.Unit, since time.Time) (float64, error) {
	l := a.ledger
	if l == nil {
		return 0, nil
	}
	f := ledger.Filter{Since: since}
	switch scope {
	case limits.ScopeKey:
		f.Key = name
	case limits.ScopeTeam:
		f.Team = name
	default:
		f.User = name
	}
	ctx, cancel := context.WithTimeout(ctx, seedTimeout)
	defer cancel()
	sums, err := l.store.Sum(ctx, f)
	if err != nil {
		return 0, fmt.Errorf("budget of %s %q: %w", scope, name, err)
	}
	var v float64
	for _, s := range sums {
		if unit == limits.UnitCost {
			v += s.Cost
		} else {
			v += float64(s.PromptTokens + s.CompletionTokens)
		}
	}
	return v, nil
}

// seedTimeout bounds the ledger query that starts a budget's counter: it
// runs on the request path, once per tenant and period.
const seedTimeout = 2 * time.Second

// priceCost prices tokens at the models' prices, for cost budgets.
func (a *App) priceCost() func(model string, prompt, cached, completion int) float64 {
	prices := a.prices() // the ledger's: a budget charges what the ledger records
	if len(prices) == 0 {
		return nil
	}
	return func(model string, prompt, cached, completion int) float64 {
		p, ok := prices[model]
		if !ok {
			return 0
		}
		return p.Cost(&ledger.Record{PromptTokens: prompt, CachedTokens: cached, CompletionTokens: completion})
	}
}

// TeamConfigured reports whether name is a configured team (for the
// admin API, which puts API keys in teams).
func (a *App) TeamConfigured(name string) bool { return a.Teams[name] != nil }

// TeamNames are the configured teams, sorted.
func (a *App) TeamNames() []string {
	names := make([]string, 0, len(a.Teams))
	for n := range a.Teams {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}
