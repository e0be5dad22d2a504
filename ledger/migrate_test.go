package ledger

import (
	"context"
	"database/sql"
	"testing"
)

// testMigratesVersion3 brings a store made at schema version 3 (before
// served_model and client_request_id) with a record in it to the current
// version: the old record is kept, with both new columns empty, and a new
// record's are written and read back. raw is the store's database, its
// schema at version 0.
func testMigratesVersion3(t *testing.T, d dialect, raw *sql.DB, open func() *sqlStore) {
	t.Helper()
	ctx := context.Background()
	old := &sqlStore{db: raw, d: dialect{name: d.name, numbered: d.numbered, migrations: d.migrations[:3]}}
	if err := old.migrate(ctx); err != nil {
		t.Fatal(err)
	}
	r := rec(1)
	if _, err := raw.ExecContext(ctx, d.bind(`INSERT INTO usage_records (time_ms, request_id, user_name, key_id, model, alias, replica, door, status,
		prompt_tokens, cached_tokens, completion_tokens, ttft_us, duration_us, cost, team) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`),
		r.Time.UnixMilli(), "old", r.User, r.KeyID, r.Model, r.Alias, r.Replica, r.Door, r.Status,
		r.PromptTokens, r.CachedTokens, r.CompletionTokens, 0, 0, r.Cost, ""); err != nil {
		t.Fatal(err)
	}

	s := open()
	if v, err := s.Version(ctx); err != nil || v != len(d.migrations) || v < 4 {
		t.Fatalf("Version = %d, %v; want %d", v, err, len(d.migrations))
	}
	n := rec(2)
	n.RequestID, n.ServedModel, n.ClientRequestID = "new", "gemma", "client-7"
	if err := s.Write(ctx, []Record{n}); err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string][2]string{"old": {"", ""}, "new": {"gemma", "client-7"}} {
		var served, client string
		if err := s.db.QueryRowContext(ctx, d.bind(`SELECT served_model, client_request_id FROM usage_records WHERE request_id = ?`), id).
			Scan(&served, &client); err != nil || served != want[0] || client != want[1] {
			t.Fatalf("record %s: served_model %q, client_request_id %q, %v; want %q", id, served, client, err, want)
		}
	}
}

func TestSQLiteMigratesVersion3(t *testing.T) {
	path := t.TempDir() + "/ledger.db"
	raw, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	testMigratesVersion3(t, dialect{name: "sqlite", migrations: sqliteMigrations}, raw, func() *sqlStore {
		return &openTestSQLite(t, path).sqlStore
	})
}

// testMigratesVersion4 brings a store made at schema version 4 (before
// batch_id) with a record in it to the current version: the old record is
// kept with batch_id empty, a batch line's record is written with its
// batch id, and the usage sums count both.
func testMigratesVersion4(t *testing.T, d dialect, raw *sql.DB, open func() *sqlStore) {
	t.Helper()
	ctx := context.Background()
	old := &sqlStore{db: raw, d: dialect{name: d.name, numbered: d.numbered, migrations: d.migrations[:4]}}
	if err := old.migrate(ctx); err != nil {
		t.Fatal(err)
	}
	r := rec(1)
	if _, err := raw.ExecContext(ctx, d.bind(`INSERT INTO usage_records (time_ms, request_id, user_name, key_id, model, alias, replica, door, status,
		prompt_tokens, cached_tokens, completion_tokens, ttft_us, duration_us, cost, team, served_model, client_request_id)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`),
		r.Time.UnixMilli(), "old", r.User, r.KeyID, r.Model, r.Alias, r.Replica, r.Door, r.Status,
		r.PromptTokens, r.CachedTokens, r.CompletionTokens, 0, 0, r.Cost, "", "", ""); err != nil {
		t.Fatal(err)
	}

	s := open()
	if v, err := s.Version(ctx); err != nil || v != len(d.migrations) || v < 5 {
		t.Fatalf("Version = %d, %v; want %d", v, err, len(d.migrations))
	}
	n := rec(2)
	n.RequestID, n.Batch = "new", "batch_abc"
	if err := s.Write(ctx, []Record{n}); err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]string{"old": "", "new": "batch_abc"} {
		var batch string
		if err := s.db.QueryRowContext(ctx, d.bind(`SELECT batch_id FROM usage_records WHERE request_id = ?`), id).
			Scan(&batch); err != nil || batch != want {
			t.Fatalf("record %s: batch_id %q, %v; want %q", id, batch, err, want)
		}
	}
	sums, err := s.Sum(ctx, Filter{By: ByModel})
	if err != nil || len(sums) != 1 || sums[0].Requests != 2 {
		t.Fatalf("Sum = %+v, %v; want both records", sums, err)
	}
}

func TestSQLiteMigratesVersion4(t *testing.T) {
	path := t.TempDir() + "/ledger.db"
	raw, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	testMigratesVersion4(t, dialect{name: "sqlite", migrations: sqliteMigrations}, raw, func() *sqlStore {
		return &openTestSQLite(t, path).sqlStore
	})
}

// testMigratesVersion5 brings a store at schema version 5 holding a
// record twice (a write retried after its commit's acknowledgement was
// lost) to the current version: one copy is left, and from then on a
// record written again, by the writer or in another transaction
// (InsertTx), is not written twice. raw is the store's database, its
// schema at version 0.
func testMigratesVersion5(t *testing.T, d dialect, raw *sql.DB, open func() *sqlStore) {
	t.Helper()
	ctx := context.Background()
	old := &sqlStore{db: raw, d: dialect{name: d.name, numbered: d.numbered, migrations: d.migrations[:5]}}
	if err := old.migrate(ctx); err != nil {
		t.Fatal(err)
	}
	plain := d.insertSQL(1)
	plain = plain[:len(plain)-len(" ON CONFLICT DO NOTHING")] // as version 5 wrote
	for _, id := range []string{"twice", "twice", "once", "", ""} {
		r := rec(1)
		r.RequestID = id
		if _, err := raw.ExecContext(ctx, plain, appendArgs(nil, []Record{r})...); err != nil {
			t.Fatal(err)
		}
	}
	s := open()
	count := func() (n int) {
		t.Helper()
		if err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM usage_records`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := count(); n != 4 { // twice, once, and both records without an id
		t.Fatalf("%d records after the migration, want 4", n)
	}
	again := []Record{rec(7), rec(8)}
	again[0].RequestID, again[1].RequestID = "twice", "new"
	if err := s.Write(ctx, again); err != nil {
		t.Fatal(err)
	}
	if err := s.Write(ctx, again); err != nil {
		t.Fatal(err)
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := InsertTx(ctx, tx, d.name, again...); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if n := count(); n != 5 {
		t.Fatalf("%d records, want 5: a record written again is not written twice", n)
	}
}

func TestSQLiteMigratesVersion5(t *testing.T) {
	path := t.TempDir() + "/ledger.db"
	raw, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	testMigratesVersion5(t, dialect{name: "sqlite", migrations: sqliteMigrations}, raw, func() *sqlStore {
		return &openTestSQLite(t, path).sqlStore
	})
}
