package ledger

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// ParseTime reads a filter's bound: an RFC 3339 time, a UTC date
// (2026-03-01), or a span before now ("24h", "7d").
func ParseTime(s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return t, nil
	}
	if days, ok := strings.CutSuffix(s, "d"); ok {
		if n, err := strconv.Atoi(days); err == nil && n >= 0 {
			return now.Add(-time.Duration(n) * 24 * time.Hour), nil
		}
	}
	if d, err := time.ParseDuration(s); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	return time.Time{}, fmt.Errorf("%q is not a time: want RFC 3339 (2026-03-01T12:00:00Z), a date (2026-03-01) or a span ago (24h, 7d)", s)
}

// FilterFromQuery reads a Filter from URL query values: user, model,
// key, team, since, until, by (as the admin API and the usage command take them).
func FilterFromQuery(q url.Values, now time.Time) (Filter, error) {
	f := Filter{User: q.Get("user"), Model: q.Get("model"), Key: q.Get("key"), Team: q.Get("team")}
	var err error
	if f.Since, err = ParseTime(q.Get("since"), now); err != nil {
		return f, fmt.Errorf("since: %w", err)
	}
	if f.Until, err = ParseTime(q.Get("until"), now); err != nil {
		return f, fmt.Errorf("until: %w", err)
	}
	if f.By, err = ParseGroup(q.Get("by")); err != nil {
		return f, err
	}
	if !f.Since.IsZero() && !f.Until.IsZero() && !f.Since.Before(f.Until) {
		return f, fmt.Errorf("since (%s) must be before until (%s)", f.Since.Format(time.RFC3339), f.Until.Format(time.RFC3339))
	}
	return f, nil
}

// Query is f as URL query values, the inverse of FilterFromQuery.
func (f Filter) Query() url.Values {
	q := url.Values{}
	set := func(k, v string) {
		if v != "" {
			q.Set(k, v)
		}
	}
	set("user", f.User)
	set("model", f.Model)
	set("key", f.Key)
	set("team", f.Team)
	if !f.Since.IsZero() {
		q.Set("since", f.Since.UTC().Format(time.RFC3339))
	}
	if !f.Until.IsZero() {
		q.Set("until", f.Until.UTC().Format(time.RFC3339))
	}
	set("by", string(f.By))
	return q
}
