package ledger

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/llmedge/llmedge/internal/pgtest"
)

// TestPostgres runs the store's tests on a real PostgreSQL (skipped, with
// the reason, where its binaries are missing).
func TestPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL")
	}
	pg := pgtest.Start(t)
	ctx := context.Background()
	open := func() *Postgres {
		s, err := OpenPostgres(ctx, pg.DSN)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	s := open()
	if v, err := s.Version(ctx); err != nil || v != len(postgresMigrations) {
		t.Fatalf("Version = %d, %v; want %d", v, err, len(postgresMigrations))
	}
	_ = s.Close()
	s = open() // again: nothing made twice
	defer s.Close()

	t.Run("sums", func(t *testing.T) { testStoreSums(t, &s.sqlStore) })

	t.Run("writer", func(t *testing.T) {
		for _, table := range []string{"usage_records", "usage_daily"} {
			if _, err := s.db.ExecContext(ctx, `DELETE FROM `+table); err != nil {
				t.Fatal(err)
			}
		}
		w := NewWriter(s, WriterOptions{Batch: 7, Interval: 5 * time.Millisecond, Prices: map[string]Price{"qwen": {Input: 1e6, Output: 2e6}}})
		for i := range 50 {
			w.Add(rec(i))
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		sums, err := s.Sum(ctx, Filter{By: ByModel})
		if err != nil || len(sums) != 1 {
			t.Fatal(sums, err)
		}
		if got := sums[0]; got.Key != "qwen" || got.Requests != 50 || got.PromptTokens != 500 || got.Cost != 1000 {
			t.Fatalf("Sum = %+v", got)
		}
	})

	t.Run("migrates version 3", func(t *testing.T) {
		for _, table := range []string{"usage_records", "usage_daily", "schema_version"} {
			if _, err := s.db.ExecContext(ctx, `DROP TABLE `+table); err != nil {
				t.Fatal(err)
			}
		}
		testMigratesVersion3(t, dialect{name: "postgres", numbered: true, migrations: postgresMigrations}, s.db, func() *sqlStore {
			n := open()
			t.Cleanup(func() { _ = n.Close() })
			return &n.sqlStore
		})
	})

	t.Run("migrates version 4", func(t *testing.T) {
		for _, table := range []string{"usage_records", "usage_daily", "schema_version"} {
			if _, err := s.db.ExecContext(ctx, `DROP TABLE `+table); err != nil {
				t.Fatal(err)
			}
		}
		testMigratesVersion4(t, dialect{name: "postgres", numbered: true, migrations: postgresMigrations}, s.db, func() *sqlStore {
			n := open()
			t.Cleanup(func() { _ = n.Close() })
			return &n.sqlStore
		})
	})

	t.Run("migrates version 5", func(t *testing.T) {
		for _, table := range []string{"usage_records", "usage_daily", "schema_version"} {
			if _, err := s.db.ExecContext(ctx, `DROP TABLE `+table); err != nil {
				t.Fatal(err)
			}
		}
		testMigratesVersion5(t, dialect{name: "postgres", numbered: true, migrations: postgresMigrations}, s.db, func() *sqlStore {
			n := open()
			t.Cleanup(func() { _ = n.Close() })
			return &n.sqlStore
		})
	})

	t.Run("newer schema refused", func(t *testing.T) {
		if _, err := s.db.ExecContext(ctx, `UPDATE schema_version SET version = 99`); err != nil {
			t.Fatal(err)
		}
		if _, err := OpenPostgres(ctx, pg.DSN); err == nil || !strings.Contains(err.Error(), "version 99") {
			t.Fatalf("OpenPostgres on a newer schema = %v", err)
		}
	})
}
