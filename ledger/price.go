package ledger

// Price is what a model's tokens cost, per million, in the operator's
// currency: input (prompt) tokens, cached input tokens (the part of the
// prompt the replica's prefix cache served) and output (completion)
// tokens.
type Price struct {
	Input  float64 `json:"input"`
	Cached float64 `json:"cached"`
	Output float64 `json:"output"`
}

// Cost is what r's tokens cost at p. Cached tokens are counted among the
// prompt tokens by the engines (OpenAI's convention), so they are taken
// out of the input and priced at the cached rate.
func (p Price) Cost(r *Record) float64 {
	cached := min(max(r.CachedTokens, 0), max(r.PromptTokens, 0))
	input := max(r.PromptTokens, 0) - cached
	output := max(r.CompletionTokens, 0)
	return (float64(input)*p.Input + float64(cached)*p.Cached + float64(output)*p.Output) / 1e6
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
