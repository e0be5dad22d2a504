package ledger

import (
	"context"
	"database/sql"
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
		{Time: day1, RequestID: "a", User: "alice", KeyID: "k1", Model: "qwen", Door: "openai", Status: 200,
			PromptTokens: 10, CachedTokens: 4, CompletionTokens: 20, TTFT: 30 * time.Millisecond, Duration: time.Second, Cost: 0.5},
		{Time: day1.Add(time.Hour), RequestID: "b", User: "bob", Model: "gemma", Door: "native", Status: 200,
			PromptTokens: 5, CompletionTokens: 7, Cost: 0.25},
		{Time: day2, RequestID: "c", User: "alice", Model: "gemma", Door: "native", Status: 400},
		{Time: day2.Add(time.Hour), RequestID: "d", User: "alice", Model: "qwen", Door: "anthropic", Status: 200,
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

	n, err := s.Prune(ctx, day2)
	if err != nil || n != 2 {
		t.Fatalf("Prune = %d, %v; want the 2 records of day 1", n, err)
	}
	if got, _ := s.Sum(ctx, Filter{}); len(got) != 1 || got[0].Requests != 2 {
		t.Fatalf("after Prune: %+v, want 2 requests left", got)
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
