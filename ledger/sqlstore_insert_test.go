package ledger

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestInsertSQL: one placeholder per column and row, in each dialect.
func TestInsertSQL(t *testing.T) {
	if got := strings.Count(columns, ",") + 1; got != nColumns {
		t.Fatalf("columns has %d names, nColumns is %d", got, nColumns)
	}
	tests := []struct {
		d    dialect
		n    int
		want []string // substrings
	}{
		{dialect{}, 1, []string{"VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"}},
		{dialect{}, 2, []string{"?), (?, "}},
		{dialect{numbered: true}, 2, []string{"VALUES ($1, $2,", "$19), ($20,", "$38)"}},
	}
	for _, tt := range tests {
		q := tt.d.insertSQL(tt.n)
		for _, w := range tt.want {
			if !strings.Contains(q, w) {
				t.Errorf("insertSQL(%d) numbered=%t = %q, lacks %q", tt.n, tt.d.numbered, q, w)
			}
		}
		marks := strings.Count(q, "?") + strings.Count(q, "$")
		if marks != tt.n*nColumns {
			t.Errorf("insertSQL(%d) has %d placeholders, want %d", tt.n, marks, tt.n*nColumns)
		}
	}
}

// TestSQLiteWriteChunks: batches below, at and across the rows of one
// INSERT are written whole and exact, every field in its column.
func TestSQLiteWriteChunks(t *testing.T) {
	ctx := context.Background()
	for _, n := range []int{1, 9, 10, 11, 99, 100, 101, 237, 500} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			s := openTestSQLite(t, filepath.Join(t.TempDir(), "ledger.db"))
			recs := make([]Record, n)
			var prompt, completion int64
			for i := range recs {
				recs[i] = Record{Time: time.UnixMilli(1_700_000_000_000 + int64(i)), RequestID: fmt.Sprint("r", i),
					User: fmt.Sprint("u", i%3), KeyID: "k", Team: "t", Model: "m", ServedModel: "f", ClientRequestID: fmt.Sprint("c", i),
					Replica: "http://r", Door: "native",
					Status: 200, PromptTokens: i, CachedTokens: 1, CompletionTokens: 2 * i,
					TTFT: time.Millisecond, Duration: time.Duration(i) * time.Microsecond, Cost: 0.5}
				prompt += int64(i)
				completion += int64(2 * i)
			}
			if err := s.Write(ctx, recs); err != nil {
				t.Fatal(err)
			}
			sums, err := s.Sum(ctx, Filter{})
			if err != nil || len(sums) != 1 {
				t.Fatalf("Sum = %+v, %v", sums, err)
			}
			got := sums[0]
			if got.Requests != int64(n) || got.PromptTokens != prompt || got.CompletionTokens != completion ||
				got.CachedTokens != int64(n) || got.Cost != 0.5*float64(n) {
				t.Errorf("Sum = %+v; want %d requests, %d prompt, %d completion tokens", got, n, prompt, completion)
			}
			// The last record, field by field.
			last := recs[n-1]
			var (
				ms, ttft, dur             int64
				id, user, key, team, door string
				served, client            string
				status, pt, ct, cached    int
			)
			err = s.db.QueryRowContext(ctx, `SELECT time_ms, request_id, user_name, key_id, team, door, status, prompt_tokens, completion_tokens, cached_tokens, ttft_us, duration_us,
				served_model, client_request_id FROM usage_records WHERE request_id = ?`, last.RequestID).Scan(&ms, &id, &user, &key, &team, &door, &status, &pt, &ct, &cached, &ttft, &dur, &served, &client)
			if err != nil {
				t.Fatal(err)
			}
			if ms != last.Time.UnixMilli() || user != last.User || key != "k" || team != "t" || door != "native" || status != 200 ||
				pt != last.PromptTokens || ct != last.CompletionTokens || cached != 1 || ttft != 1000 || dur != last.Duration.Microseconds() ||
				served != "f" || client != last.ClientRequestID {
				t.Errorf("last record read back as %d %s %s %s %s %s %d %d %d %d %d %d %s %s", ms, id, user, key, team, door, status, pt, ct, cached, ttft, dur, served, client)
			}
		})
	}
}
