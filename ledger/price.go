package ledger

// Price is what a model's tokens cost, per million, in the operator's
// currency: input (prompt) tokens, cached input tokens (the part of the
// prompt the replica's prefix cache served) and output (completion)
// tokens.
type Price struct {
	Input  float64 `json:"input"`
	Cached float64 `json:"cached"`
	Output float64 `json:"output"`
	// Batch, when positive, is the factor (0..1] of the price that the
	// lines of a batch pay (0.5: half price), work the gateway runs on
	// the capacity online requests leave idle; 0 charges them in full.
	Batch float64 `json:"batch,omitempty"`
}

// Cost is what r's tokens cost at p. Cached tokens are counted among the
// prompt tokens by the engines (OpenAI's convention), so they are taken
// out of the input and priced at the cached rate. A batch's line (r.Batch
// set) costs that times p.Batch, when there is one.
func (p Price) Cost(r *Record) float64 {
	cached := min(max(r.CachedTokens, 0), max(r.PromptTokens, 0))
	input := max(r.PromptTokens, 0) - cached
	output := max(r.CompletionTokens, 0)
	c := (float64(input)*p.Input + float64(cached)*p.Cached + float64(output)*p.Output) / 1e6
	if r.Batch != "" && p.Batch > 0 {
		c *= p.Batch
	}
	return c
}

// PricedModel is the model whose price r is charged at: the one that
// answered. A fallback answering for a cheaper model is charged at its
// own price; a record that does not say which answered (ServedModel "")
// at the model asked for.
func (r *Record) PricedModel() string {
	if r.ServedModel != "" {
		return r.ServedModel
	}
	return r.Model
}
