package ledger

import (
	"context"
	"fmt"
	"time"
)

// Store keeps records. Its methods are safe for concurrent use.
type Store interface {
	// Write stores a batch of records, all or none.
	Write(ctx context.Context, recs []Record) error
	// Sum adds up the records that f selects, grouped by f.By.
	Sum(ctx context.Context, f Filter) ([]Sum, error)
	// Prune rolls up, then deletes, the records of the whole UTC days
	// before before's day, and reports how many it deleted. Sum counts
	// the roll-ups as it counts the records.
	Prune(ctx context.Context, before time.Time) (int64, error)
	Close() error
}

// Group is how Sum groups the records.
type Group string

// The groups.
const (
	ByNone  Group = ""
	ByDay   Group = "day"
	ByModel Group = "model"
	ByUser  Group = "user"
	ByTeam  Group = "team"
	ByKey   Group = "key"
)

// ParseGroup reads a group's name ("" is none).
func ParseGroup(s string) (Group, error) {
	switch g := Group(s); g {
	case ByNone, ByDay, ByModel, ByUser, ByTeam, ByKey:
		return g, nil
	}
	return "", fmt.Errorf("group by %q: want day, model, user, team or key", s)
}

// Filter selects records: each set field must match; Since is inclusive,
// Until exclusive.
type Filter struct {
	User  string
	Model string
	// Key is an API key's id, Team a team: they count the records within
	// the retention only (the daily roll-ups keep neither).
	Key   string
	Team  string
	Since time.Time
	Until time.Time
	By    Group
}

// Sum is the total of a group of records. Key is the group's value: the
// day (YYYY-MM-DD, UTC), the model, the user, the team or the API key's
// id; "" with no grouping.
type Sum struct {
	Key              string  `json:"key"`
	Requests         int64   `json:"requests"`
	PromptTokens     int64   `json:"prompt_tokens"`
	CachedTokens     int64   `json:"cached_tokens"`
	CompletionTokens int64   `json:"completion_tokens"`
	Cost             float64 `json:"cost"`
}
