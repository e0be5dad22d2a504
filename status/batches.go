package status

import "time"

// TopBatches bounds the batches a snapshot lists (the oldest first).
const TopBatches = 50

// Batches are the batches not yet final, from the batch store: every
// instance's, as the store last answered (the figures are cached, not
// read per snapshot).
type Batches struct {
	AsOf time.Time       `json:"as_of"`
	List []BatchProgress `json:"list"`
	// More: there are more than the list shows.
	More bool `json:"more"`
	// Error is the last read's failure, when it failed.
	Error string `json:"error,omitempty"`
}

// BatchProgress is one batch's progress. It names its owner (the user,
// and the API key's id) as the tenants' lists do, never its requests.
type BatchProgress struct {
	ID        string    `json:"id"`
	Owner     string    `json:"owner"`
	KeyID     string    `json:"key_id,omitempty"`
	Model     string    `json:"model"`
	Endpoint  string    `json:"endpoint"`
	Status    string    `json:"status"`
	Total     int       `json:"total"`
	Completed int       `json:"completed"`
	Failed    int       `json:"failed"`
	CreatedAt time.Time `json:"created_at"`
	ExpiresAt time.Time `json:"expires_at"`
}
