package tenancy

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/llmedge/llmedge/auth"
	"github.com/llmedge/llmedge/limits"
)

// TestReservationCountsEveryGeneration: a request reserves its prompts'
// estimate plus a reply cap for each generation of each prompt, and tells
// the gateway the cap it reserved (Reply); n × a huge cap saturates
// instead of wrapping to a small number.
func TestReservationCountsEveryGeneration(t *testing.T) {
	prompt := limits.EstimateTokens(300, 2)
	tests := []struct {
		name                             string
		prompts, generations, max, extra int
		wantTokens, wantReply            int
	}{
		{"one generation, model's cap", 0, 0, 20, 0, prompt + 20, 20},
		{"n=128", 1, 128, 20, 0, prompt + 128*20, 20},
		{"3 prompts × n=2, default reply", 3, 2, 0, 0, prompt + 6*100, 100},
		{"images counted directly", 1, 1, 5, 4096, prompt + 4096 + 5, 5},
		{"no reply", 4, 9, NoReply, 0, prompt, 0},
		{"saturates", 1 << 20, 1 << 20, 1 << 30, 0, maxReservation, 1 << 30},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lim := limits.New(limits.Options{})
			ad := testAdmitter(t, lim, []auth.User{{Name: "alice"}})
			// A budget's counter holds the reservation as it is (a tpm
			// bucket caps it at its limit and leaks).
			budget := limits.Budget{Unit: limits.UnitTokens, Amount: 1 << 62, Per: limits.PerDay}
			ad.l.Default = limits.Limit{Budgets: []limits.Budget{budget}}
			a := admission("alice", "", "qwen")
			a.Prompts, a.Generations, a.MaxTokens, a.ExtraTokens = tt.prompts, tt.generations, tt.max, tt.extra
			if _, err := ad.Admit(context.Background(), a, http.Header{}); err != nil {
				t.Fatal(err)
			}
			tokens, _, err := lim.BudgetUsed(context.Background(),
				limits.BudgetCharge{Scope: limits.ScopeUser, Name: "alice", Budget: budget}, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			if int(tokens) != tt.wantTokens || a.Reply != tt.wantReply {
				t.Errorf("reserved %.0f tokens (reply %d), want %d (reply %d)", tokens, a.Reply, tt.wantTokens, tt.wantReply)
			}
		})
	}
}

// TestReservationRefusedOverTPM: after one request of 128 generations of
// 20 tokens, a 2,700 tpm limit that fits many single generations has no
// room left for another, nor for a single one.
func TestReservationRefusedOverTPM(t *testing.T) {
	lim := limits.New(limits.Options{})
	ad := testAdmitter(t, lim, []auth.User{{Name: "alice"}})
	ad.l.Default = limits.Limit{TPM: 2700}
	a := admission("alice", "", "qwen")
	a.MaxTokens, a.Generations = 20, 128
	if _, err := ad.Admit(context.Background(), a, http.Header{}); err != nil {
		t.Fatalf("the first n=128: %v", err)
	}
	a.Generations = 1
	if _, err := ad.Admit(context.Background(), a, http.Header{}); err == nil || err.Status != 429 {
		t.Fatalf("n=1 after n=128 under 2700 tpm: %v", err)
	}
}
