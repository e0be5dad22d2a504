package ledger

import (
	"net/url"
	"strings"
	"testing"
	"time"
)

func TestFilterFromQuery(t *testing.T) {
	now := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		query string
		want  Filter
		err   string
	}{
		{"", Filter{}, ""},
		{"user=alice&model=qwen&by=day", Filter{User: "alice", Model: "qwen", By: ByDay}, ""},
		{"since=2026-03-01&until=2026-03-02T06:00:00Z", Filter{Since: time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC),
			Until: time.Date(2026, 3, 2, 6, 0, 0, 0, time.UTC)}, ""},
		{"since=7d", Filter{Since: now.Add(-7 * 24 * time.Hour)}, ""},
		{"since=90m", Filter{Since: now.Add(-90 * time.Minute)}, ""},
		{"by=week", Filter{}, "want day, model, user, team or key"},
		{"team=research&key=k1&by=team", Filter{Team: "research", Key: "k1", By: ByTeam}, ""},
		{"since=yesterday", Filter{}, "since:"},
		{"until=-5h", Filter{}, "until:"},
		{"since=2026-03-02&until=2026-03-01", Filter{}, "must be before"},
	} {
		t.Run(tc.query, func(t *testing.T) {
			q, _ := url.ParseQuery(tc.query)
			got, err := FilterFromQuery(q, now)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("= %+v, %v; want %+v", got, err, tc.want)
			}
			// And back: the query the CLI sends reads as the same filter.
			again, err := FilterFromQuery(got.Query(), now)
			if err != nil || !again.Since.Equal(got.Since) || !again.Until.Equal(got.Until) || again.User != got.User || again.By != got.By ||
				again.Team != got.Team || again.Key != got.Key {
				t.Fatalf("round trip = %+v, %v; want %+v", again, err, got)
			}
		})
	}
}
