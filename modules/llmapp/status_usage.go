package llmapp

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/llmedge/llmedge/ledger"
	"github.com/llmedge/llmedge/status"
)

// usageTodayEvery spaces the ledger reads behind the status page's
// "today" figures: the page asks every second, the ledger is read at most
// this often, off the page's request.
const usageTodayEvery = 30 * time.Second

// usageTodayTimeout bounds one read.
const usageTodayTimeout = 10 * time.Second

// usageToday caches the ledger's top tenants of the day.
type usageToday struct {
	mu      sync.Mutex
	last    *status.UsageToday
	reading bool
	read    time.Time // when the last read started
	wg      sync.WaitGroup
}

// get returns the cached figures, and starts a read in the background when
// they are older than usageTodayEvery (the first call returns nil).
func (u *usageToday) get(store ledger.Store) *status.UsageToday {
	u.mu.Lock()
	defer u.mu.Unlock()
	now := time.Now()
	if !u.reading && now.Sub(u.read) >= usageTodayEvery {
		u.reading, u.read = true, now
		u.wg.Add(1)
		go func() {
			defer u.wg.Done()
			v := readUsageToday(store, now)
			u.mu.Lock()
			u.last, u.reading = v, false
			u.mu.Unlock()
		}()
	}
	return u.last
}

// wait waits for a read under way (the store is about to close).
func (u *usageToday) wait() { u.wg.Wait() }

// readUsageToday sums the day's records by user, team and key.
func readUsageToday(store ledger.Store, now time.Time) *status.UsageToday {
	ctx, cancel := context.WithTimeout(context.Background(), usageTodayTimeout)
	defer cancel()
	since := now.UTC().Truncate(24 * time.Hour)
	out := &status.UsageToday{Since: since, AsOf: now.UTC()}
	for _, g := range []struct {
		by  ledger.Group
		dst *[]status.UsageTop
	}{{ledger.ByUser, &out.Users}, {ledger.ByTeam, &out.Teams}, {ledger.ByKey, &out.Keys}} {
		sums, err := store.Sum(ctx, ledger.Filter{Since: since, By: g.by})
		if err != nil {
			out.Error = fmt.Sprintf("reading the ledger: %v", err)
			return out
		}
		*g.dst = topUsage(sums, status.TopUsers)
	}
	return out
}

// topUsage is the n sums with the most tokens (ties: the higher cost,
// then the name), leaving out the group of none (no team, no key).
func topUsage(sums []ledger.Sum, n int) []status.UsageTop {
	tops := make([]status.UsageTop, 0, len(sums))
	for _, s := range sums {
		if s.Key == "" {
			continue
		}
		tops = append(tops, status.UsageTop{Name: s.Key, Requests: s.Requests, Tokens: s.PromptTokens + s.CompletionTokens, Cost: s.Cost})
	}
	slices.SortFunc(tops, func(a, b status.UsageTop) int {
		switch {
		case a.Tokens != b.Tokens:
			if a.Tokens > b.Tokens {
				return -1
			}
			return 1
		case a.Cost != b.Cost:
			if a.Cost > b.Cost {
				return -1
			}
			return 1
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	return tops[:min(n, len(tops))]
}

// statusBudgets are the budgets for the status page, the most used first.
func (a *App) statusBudgets() []status.Budget {
	if a.tenants == nil {
		return nil
	}
	bs := a.tenants.Budgets()
	out := make([]status.Budget, 0, min(len(bs), status.TopBudgets))
	for _, b := range bs[:min(len(bs), status.TopBudgets)] {
		line := fmt.Sprintf("%s %s: %s of its %s budget of %s per %s used (%.0f%%); resets %s",
			b.Scope, b.Name, budgetFigure(b.Unit, b.Used), b.Unit, budgetFigure(b.Unit, b.Budget), b.Per,
			100*b.Fraction, b.ResetAt.UTC().Format(time.RFC3339))
		out = append(out, status.Budget{Scope: b.Scope, Name: b.Name, Unit: b.Unit, Per: b.Per, Budget: b.Budget,
			Used: b.Used, Fraction: b.Fraction, ResetAt: b.ResetAt, Warning: b.Warning, Line: line})
	}
	return out
}

func budgetFigure(unit string, v float64) string {
	if unit == "cost" {
		return strconv.FormatFloat(v, 'f', 4, 64)
	}
	return strconv.FormatFloat(v, 'f', 0, 64)
}
