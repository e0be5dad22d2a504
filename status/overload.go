package status

// Overload is a model's state under overload (docs/resilience.md,
// classes of work).
type Overload struct {
	// Queued counts the requests waiting for a slot, by class of work.
	Queued QueuedByClass `json:"queued"`
	// Saturated: sheddable requests are refused at once now (a request
	// waits, or no more slots are free than the reserve, or the engines
	// report their own queue or a full KV cache).
	Saturated bool `json:"saturated"`
	// Sheds is false when sheddable requests wait (last) rather than be
	// refused (queue { shed off }).
	Sheds bool `json:"sheds"`
	// Reserve is the number of slots kept from sheddable requests.
	Reserve int `json:"reserve"`
	// QueueLimitSeconds is the longest a request waits for a slot.
	QueueLimitSeconds float64 `json:"queue_limit_seconds"`
	// BatchRunning counts the batch lines on the model's replicas now;
	// BatchShare is their share of the replicas' slots (null when the
	// replicas have no cap).
	BatchRunning int      `json:"batch_running"`
	BatchShare   *float64 `json:"batch_share"`
}

// QueuedByClass counts waiting requests by class of work.
type QueuedByClass struct {
	Critical  int `json:"critical"`
	Standard  int `json:"standard"`
	Sheddable int `json:"sheddable"`
}
