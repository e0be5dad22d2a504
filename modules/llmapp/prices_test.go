package llmapp

import (
	"strings"
	"testing"
	"time"

	"github.com/llmedge/llmedge/ledger"
)

// TestPrices: the ledger's and the budgets' prices, by the model that
// answers: its own, or for a rollout's share without one, its rollout's.
func TestPrices(t *testing.T) {
	p := func(in float64) *ledger.Price { return &ledger.Price{Input: in} }
	a := &App{Models: []*ModelConfig{
		{Name: "qwen", Price: p(1), Rollout: []RolloutShare{{Model: "qwen-25", Weight: 9}, {Model: "qwen-3", Weight: 1}}},
		{Name: "qwen-25"},
		{Name: "qwen-3", Price: p(3)},
		{Name: "gemma", Price: p(5)},
		{Name: "free"},
	}}
	got := a.prices()
	want := map[string]float64{"qwen": 1, "qwen-25": 1, "qwen-3": 3, "gemma": 5}
	if len(got) != len(want) {
		t.Fatalf("prices %v, want %v", got, want)
	}
	for m, in := range want {
		if got[m].Input != in {
			t.Errorf("%s: %v, want input %g", m, got[m], in)
		}
	}
	cost := a.priceCost()
	if c := cost("gemma", 1e6, 0, 0); c != 5 {
		t.Errorf("gemma's cost %g, want 5", c)
	}
	if c := cost("free", 1e6, 0, 0); c != 0 {
		t.Errorf("free's cost %g, want 0", c)
	}
}

func TestCaddyfileUsageDrain(t *testing.T) {
	tests := []struct {
		block   string
		want    time.Duration
		wantErr string
	}{
		{"llmedge {\n}", 0, ""},
		{"llmedge {\n\tusage_drain 2s\n}", 2 * time.Second, ""},
		{"llmedge {\n\tusage_drain off\n}", 0, ""},
		{"llmedge {\n\tusage_drain 0s\n}", 0, "usage_drain"},
		{"llmedge {\n\tusage_drain 2m\n}", 0, "up to 1m"},
		{"llmedge {\n\tusage_drain soon\n}", 0, "usage_drain"},
	}
	for _, tt := range tests {
		a, err := parseApp(t, tt.block)
		switch {
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("%q: error %v, want one naming %q", tt.block, err, tt.wantErr)
		case tt.wantErr == "" && (err != nil || time.Duration(a.UsageDrain) != tt.want):
			t.Errorf("%q: %v, %v; want %v", tt.block, a.UsageDrain, err, tt.want)
		}
	}
}
