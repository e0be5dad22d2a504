package ledger

import "time"

// Record is one answered request. It never holds a credential's secret
// or any message content: KeyID is the API key's id, not the key.
type Record struct {
	// Time is when the request arrived.
	Time      time.Time
	RequestID string
	// User is the credential's subject; KeyID the API key's id when the
	// request came with one ("" for an access token).
	User  string
	KeyID string
	// Team is the team the request counted against ("" for none).
	Team string
	// Model is the model type served; Alias the name the client asked
	// for when it differed (model aliases are not there yet: always "").
	Model   string
	Alias   string
	Replica string
	// Door is the public API the request came through ("native",
	// "openai", "anthropic").
	Door string
	// Status is the HTTP status the client got (499: it left first).
	Status int
	// Tokens: the prompt, the part of it the replica found cached, and
	// the completion.
	PromptTokens     int
	CachedTokens     int
	CompletionTokens int
	// TTFT is the time to the first token (0 when none came); Duration
	// the whole request's.
	TTFT     time.Duration
	Duration time.Duration
	// Cost is computed by the Writer from the model's Price when the
	// record is written; 0 for a model without one.
	Cost float64
}
