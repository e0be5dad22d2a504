package sqlschema

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"

	_ "modernc.org/sqlite"
)

func TestBind(t *testing.T) {
	for _, tc := range []struct {
		numbered bool
		in, want string
	}{
		{false, "a = ? AND b = ?", "a = ? AND b = ?"},
		{true, "a = ? AND b = ?", "a = $1 AND b = $2"},
		{true, "no placeholder", "no placeholder"},
	} {
		if got := Bind(tc.numbered, tc.in); got != tc.want {
			t.Errorf("Bind(%v, %q) = %q, want %q", tc.numbered, tc.in, got, tc.want)
		}
	}
}

// Migrate applies what is new once, each store in its own version table,
// and refuses a schema newer than it knows.
func TestMigrate(t *testing.T) {
	ctx := context.Background()
	db, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "s.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	one := []string{`CREATE TABLE a (x INTEGER)`}
	two := append(one, `CREATE TABLE b (y INTEGER); INSERT INTO b (y) VALUES (1)`)
	for _, m := range [][]string{one, two, two} {
		if err := Migrate(ctx, db, "a_schema", false, m); err != nil {
			t.Fatal(err)
		}
	}
	var v, rows int
	if err := db.QueryRow(`SELECT version FROM a_schema`).Scan(&v); err != nil || v != 2 {
		t.Fatalf("version %d, %v; want 2", v, err)
	}
	if err := db.QueryRow(`SELECT COUNT(*) FROM b`).Scan(&rows); err != nil || rows != 1 {
		t.Fatalf("b has %d rows, %v: a migration ran twice", rows, err)
	}
	if err := Migrate(ctx, db, "other_schema", false, []string{`CREATE TABLE c (z INTEGER)`}); err != nil {
		t.Fatalf("a second store's migrations: %v", err)
	}
	if err := Migrate(ctx, db, "a_schema", false, one); err == nil || !strings.Contains(err.Error(), "version 2, newer") {
		t.Fatalf("an older llmedge on a newer schema: %v", err)
	}
	if err := Migrate(ctx, db, "a_schema", false, append(two, `NOT SQL`)); err == nil || !strings.Contains(err.Error(), "migration 3") {
		t.Fatalf("a failing migration: %v", err)
	}
	if err := db.QueryRow(`SELECT version FROM a_schema`).Scan(&v); err != nil || v != 2 {
		t.Fatalf("version %d after a failed migration, want 2", v)
	}
}
