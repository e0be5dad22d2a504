package tenancy

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/llmedge/llmedge/auth"
	"github.com/llmedge/llmedge/limits"
)

// TestCostBudgetSettlesAtTheAnsweringModel: a request admitted for a
// cheap model and answered by a dear fallback is charged to the cost
// budget at the fallback's price, as the ledger prices it.
func TestCostBudgetSettlesAtTheAnsweringModel(t *testing.T) {
	prices := map[string]float64{"cheap": 1, "dear": 100}
	tests := []struct {
		name, served string
		want         float64
	}{
		{"the model admitted", "", 40},
		{"itself named", "cheap", 40},
		{"a dear fallback", "dear", 4000},
		{"a fallback without a price", "free", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lim := limits.New(limits.Options{})
			ad := testAdmitter(t, lim, []auth.User{{Name: "alice"}})
			budget := limits.Budget{Unit: limits.UnitCost, Amount: 1e9, Per: limits.PerDay}
			ad.l.Default = limits.Limit{Budgets: []limits.Budget{budget}}
			ad.l.Cost = func(model string, prompt, cached, completion int) float64 {
				return prices[model] * float64(prompt+completion)
			}
			ctx := context.Background()
			tk, err := ad.Admit(ctx, admission("alice", "", "cheap"), http.Header{})
			if err != nil {
				t.Fatal(err)
			}
			tk.Settle(Settlement{Status: 200, Served: true, UsageKnown: true, Usage: apiUsage(30, 10), Model: tt.served})
			got, _, _ := lim.BudgetUsed(ctx, limits.BudgetCharge{Scope: limits.ScopeUser, Name: "alice", Budget: budget}, time.Now())
			if got != tt.want {
				t.Errorf("the cost budget holds %v, want %v", got, tt.want)
			}
		})
	}
}
