package ledger

import "time"

// Record is one answered request. It never holds a credential's secret
// or any message content: KeyID is the API key's id, not the key.
type Record struct {
	// Time is when the request arrived.
	Time time.Time
	// RequestID is the gateway's own id of the request, unique;
	// ClientRequestID the X-Request-ID the client sent, sanitised ("" when
	// it sent none, or one that was not short printable ASCII).
	RequestID       string
	ClientRequestID string
	// User is the credential's subject; KeyID the API key's id when the
	// request came with one ("" for an access token).
	User  string
	KeyID string
	// Team is the team the request counted against ("" for none).
	Team string
	// Model is the model type asked for (an alias resolved); Alias the
	// name the client asked for when it differed. ServedModel is the model
	// whose replicas answered: a fallback, a rollout's share, or Model.
	// The cost is at ServedModel's price.
	Model       string
	Alias       string
	ServedModel string
	Replica     string
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
	// Batch is the id of the batch the request was a line of ("" for an
	// online request); its cost is at the model's batch price.
	Batch string
	// Cost is computed by the Writer from ServedModel's Price (Model's
	// when ServedModel is empty) when the record is written; 0 for a
	// model without one.
	Cost float64
}
