package ledger

import "testing"

func TestPriceCost(t *testing.T) {
	p := Price{Input: 3, Cached: 1, Output: 15}
	for _, tc := range []struct {
		name                     string
		prompt, cached, complete int
		want                     float64
	}{
		{"nothing", 0, 0, 0, 0},
		{"prompt only", 1_000_000, 0, 0, 3},
		{"output only", 0, 0, 1_000_000, 15},
		{"cached part of the prompt", 1_000_000, 250_000, 0, 0.75*3 + 0.25*1},
		{"cached beyond the prompt is capped", 100, 500, 0, 100 * 1 / 1e6},
		{"negative counts are zero", -5, -1, -7, 0},
		{"all three", 2000, 1000, 500, (1000*3 + 1000*1 + 500*15) / 1e6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := Record{PromptTokens: tc.prompt, CachedTokens: tc.cached, CompletionTokens: tc.complete}
			if got := p.Cost(&r); got != tc.want {
				t.Fatalf("Cost = %g, want %g", got, tc.want)
			}
		})
	}
}

// TestPriceBatch: a batch's line pays the price times the model's batch
// factor; an online request, and a line of a model without a factor, the
// whole price.
func TestPriceBatch(t *testing.T) {
	full := Record{PromptTokens: 1_000_000, CompletionTokens: 1_000_000}
	line := full
	line.Batch = "batch_1"
	for _, tc := range []struct {
		name string
		p    Price
		r    Record
		want float64
	}{
		{"online at a discounted model", Price{Input: 2, Output: 6, Batch: 0.5}, full, 8},
		{"line at a discounted model", Price{Input: 2, Output: 6, Batch: 0.5}, line, 4},
		{"line without a discount", Price{Input: 2, Output: 6}, line, 8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.p.Cost(&tc.r); got != tc.want {
				t.Fatalf("Cost = %g, want %g", got, tc.want)
			}
		})
	}
}
