package ledger

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func openTestSQLite(t *testing.T, path string) *SQLite {
	t.Helper()
	s, err := OpenSQLite(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestSQLiteMigrations(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "sub", "ledger.db") // the folder is made
	s := openTestSQLite(t, path)
	if v, err := s.Version(ctx); err != nil || v != len(sqliteMigrations) {
		t.Fatalf("Version = %d, %v; want %d", v, err, len(sqliteMigrations))
	}
	if err := s.Write(ctx, []Record{rec(1)}); err != nil {
		t.Fatal(err)
	}
	_ = s.Close()

	// Opened again: the schema is not made twice, the record is kept.
	s = openTestSQLite(t, path)
	sums, err := s.Sum(ctx, Filter{})
	if err != nil || len(sums) != 1 || sums[0].Requests != 1 {
		t.Fatalf("Sum after reopening = %+v, %v; want 1 request", sums, err)
	}
	_ = s.Close()

	// A schema newer than this code knows is refused, not written to.
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`UPDATE schema_version SET version = 99`); err != nil {
		t.Fatal(err)
	}
	_ = db.Close()
	if _, err := OpenSQLite(ctx, path); err == nil || !strings.Contains(err.Error(), "version 99") {
		t.Fatalf("OpenSQLite on a newer schema = %v, want a refusal naming version 99", err)
	}
}

func TestSQLiteSums(t *testing.T) {
	s := openTestSQLite(t, filepath.Join(t.TempDir(), "ledger.db"))
	testStoreSums(t, &s.sqlStore)
}

// testStoreSums writes records to s and checks Sum's groups and filters,
// the stored fields, and Prune: the same for every database.
func testStoreSums(t *testing.T, s *sqlStore) {
	ctx := context.Background()
	day1 := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	day2 := day1.Add(24 * time.Hour)
	recs := []Record{
		{Time: day1, RequestID: "a", User: "alice", KeyID: "k1", Team: "research", Model: "qwen", Door: "openai", Status: 200,
			PromptTokens: 10, CachedTokens: 4, CompletionTokens: 20, TTFT: 30 * time.Millisecond, Duration: time.Second, Cost: 0.5},
		{Time: day1.Add(time.Hour), RequestID: "b", User: "bob", Model: "gemma", Door: "native", Status: 200,
			PromptTokens: 5, CompletionTokens: 7, Cost: 0.25},
		{Time: day2, RequestID: "c", User: "alice", Model: "gemma", Door: "native", Status: 400},
		{Time: day2.Add(time.Hour), RequestID: "d", User: "alice", Team: "research", Model: "qwen", Door: "anthropic", Status: 200,
			PromptTokens: 100, CompletionTokens: 1, Cost: 1},
	}
	if err := s.Write(ctx, recs); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		f    Filter
		want []Sum
	}{
		{"total", Filter{}, []Sum{{"", 4, 115, 4, 28, 1.75}}},
		{"by day", Filter{By: ByDay}, []Sum{{"2026-03-01", 2, 15, 4, 27, 0.75}, {"2026-03-02", 2, 100, 0, 1, 1}}},
		{"by model", Filter{By: ByModel}, []Sum{{"gemma", 2, 5, 0, 7, 0.25}, {"qwen", 2, 110, 4, 21, 1.5}}},
		{"by user", Filter{By: ByUser}, []Sum{{"alice", 3, 110, 4, 21, 1.5}, {"bob", 1, 5, 0, 7, 0.25}}},
		{"one user", Filter{User: "alice"}, []Sum{{"", 3, 110, 4, 21, 1.5}}},
		{"one model by user", Filter{Model: "gemma", By: ByUser}, []Sum{{"alice", 1, 0, 0, 0, 0}, {"bob", 1, 5, 0, 7, 0.25}}},
		{"since is inclusive", Filter{Since: day2}, []Sum{{"", 2, 100, 0, 1, 1}}},
		{"until is exclusive", Filter{Until: day2}, []Sum{{"", 2, 15, 4, 27, 0.75}}},
		{"nothing matches", Filter{User: "carol"}, nil},
		{"nothing matches, grouped", Filter{User: "carol", By: ByDay}, nil},
		{"by team", Filter{By: ByTeam}, []Sum{{"", 2, 5, 0, 7, 0.25}, {"research", 2, 110, 4, 21, 1.5}}},
		{"one team since", Filter{Team: "research", Since: day2}, []Sum{{"", 1, 100, 0, 1, 1}}},
		{"by key", Filter{By: ByKey}, []Sum{{"", 3, 105, 0, 8, 1.25}, {"k1", 1, 10, 4, 20, 0.5}}},
		{"one key", Filter{Key: "k1"}, []Sum{{"", 1, 10, 4, 20, 0.5}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.Sum(ctx, tc.f)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("Sum = %+v, want %+v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("Sum[%d] = %+v, want %+v", i, got[i], tc.want[i])
				}
			}
		})
	}

	// Every field is stored as given.
	var user, key, door, reqID string
	var status, ttft, dur int64
	err := s.db.QueryRowContext(ctx, `SELECT request_id, user_name, key_id, door, status, ttft_us, duration_us FROM usage_records WHERE request_id = 'a'`).
		Scan(&reqID, &user, &key, &door, &status, &ttft, &dur)
	if err != nil || user != "alice" || key != "k1" || door != "openai" || status != 200 || ttft != 30000 || dur != 1_000_000 {
		t.Fatalf("stored record a: %s %s %s %d %d %d, %v", user, key, door, status, ttft, dur, err)
	}

	// Pruning before day 2 (a time within it: whole days only) rolls day
	// 1 up and deletes its records; every sum stays what it was.
	before := map[Group][]Sum{}
	for _, by := range []Group{ByNone, ByDay, ByModel, ByUser} {
		before[by], _ = s.Sum(ctx, Filter{By: by})
	}
	for try := range 2 { // a second prune finds nothing more to do
		n, err := s.Prune(ctx, day2.Add(5*time.Hour))
		if want := int64(2 * (1 - try)); err != nil || n != want {
			t.Fatalf("Prune #%d = %d, %v; want %d records deleted", try+1, n, err, want)
		}
		var left, rolled int
		if err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM usage_records`).Scan(&left); err != nil || left != 2 {
			t.Fatalf("after Prune: %d records left, %v; want day 2's 2", left, err)
		}
		if err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM usage_daily`).Scan(&rolled); err != nil || rolled != 2 {
			t.Fatalf("after Prune: %d roll-ups, %v; want day 1's alice/qwen and bob/gemma", rolled, err)
		}
		for by, want := range before {
			got, err := s.Sum(ctx, Filter{By: by})
			if err != nil || fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("Sum by %q after Prune = %v, %v; want %v", by, got, err, want)
			}
		}
	}
	// A roll-up's day counts when its start is within the filter.
	if got, _ := s.Sum(ctx, Filter{Since: time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)}); len(got) != 1 || got[0].Requests != 4 {
		t.Fatalf("since day 1's start, after Prune: %+v, want the 4 requests", got)
	}
	if got, _ := s.Sum(ctx, Filter{Since: day1}); len(got) != 1 || got[0].Requests != 2 {
		t.Fatalf("since day 1, 10:00, after Prune: %+v, want day 2's 2 requests (day 1 is a roll-up now)", got)
	}
	if got, _ := s.Sum(ctx, Filter{User: "bob", By: ByModel}); len(got) != 1 || got[0] != (Sum{"gemma", 1, 5, 0, 7, 0.25}) {
		t.Fatalf("bob by model, after Prune: %+v", got)
	}
}

// TestSQLiteMigratesVersion1 opens a ledger made at schema version 1 (no
// roll-ups): it is brought to the current version, its records kept.
func TestSQLiteMigratesVersion1(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "ledger.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	old := &sqlStore{db: db, d: dialect{name: "sqlite", migrations: sqliteMigrations[:1]}}
	if err := old.migrate(ctx); err != nil {
		t.Fatal(err)
	}
	// Written as version 1's columns were (no team).
	for i := range 2 {
		r := rec(i + 1)
		if _, err := db.ExecContext(ctx, `INSERT INTO usage_records (time_ms, request_id, user_name, key_id, model, alias, replica, door, status,
			prompt_tokens, cached_tokens, completion_tokens, ttft_us, duration_us, cost) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			r.Time.UnixMilli(), r.RequestID, r.User, r.KeyID, r.Model, r.Alias, r.Replica, r.Door, r.Status,
			r.PromptTokens, r.CachedTokens, r.CompletionTokens, 0, 0, r.Cost); err != nil {
			t.Fatal(err)
		}
	}
	_ = db.Close()

	s := openTestSQLite(t, path)
	if v, err := s.Version(ctx); err != nil || v != len(sqliteMigrations) || v < 2 {
		t.Fatalf("Version = %d, %v; want %d", v, err, len(sqliteMigrations))
	}
	if n, err := s.Prune(ctx, time.Now()); err != nil || n != 2 {
		t.Fatalf("Prune after the migration = %d, %v", n, err)
	}
	if got, err := s.Sum(ctx, Filter{}); err != nil || len(got) != 1 || got[0].Requests != 2 {
		t.Fatalf("Sum = %+v, %v; want the 2 records, rolled up", got, err)
	}
}

// TestWriterSQLite runs the writer on the real store: what goes in is
// what Sum finds, priced.
func TestWriterSQLite(t *testing.T) {
	s := openTestSQLite(t, filepath.Join(t.TempDir(), "ledger.db"))
	w := NewWriter(s, WriterOptions{Batch: 7, Interval: 5 * time.Millisecond, Prices: map[string]Price{"qwen": {Input: 1e6, Output: 2e6}}})
	for i := range 50 {
		w.Add(rec(i))
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	sums, err := s.Sum(context.Background(), Filter{})
	if err != nil || len(sums) != 1 {
		t.Fatal(sums, err)
	}
	if got := sums[0]; got.Requests != 50 || got.PromptTokens != 500 || got.CompletionTokens != 250 || got.Cost != 50*(10+10) {
		t.Fatalf("Sum = %+v, want 50 requests, 500 prompt, 250 completion tokens, cost 1000", got)
	}
}
