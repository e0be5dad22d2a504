// Package sqlschema holds what the gateway's SQL stores (the usage ledger,
// the batches) share on database/sql: placeholders in SQLite's or
// PostgreSQL's form, and versioned migrations, each store with its own
// version table in the one database.
package sqlschema

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"
)

// Bind rewrites q's ? placeholders as $1, $2, ... when numbered
// (PostgreSQL); SQLite takes them as written.
func Bind(numbered bool, q string) string {
	if !numbered {
		return q
	}
	var b strings.Builder
	n := 0
	for _, c := range q {
		if c == '?' {
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			continue
		}
		b.WriteRune(c)
	}
	return b.String()
}

// Migrate brings a schema to the newest version, recorded in the one-row
// table named table: migration i brings it to version i+1, each in a
// transaction of its own. A schema newer than migrations knows is an
// error. Errors name the step, for the caller to prefix with its store.
func Migrate(ctx context.Context, db *sql.DB, table string, numbered bool, migrations []string) error {
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS `+table+` (version INTEGER NOT NULL)`); err != nil {
		return fmt.Errorf("creating %s: %w", table, err)
	}
	var version int
	err := db.QueryRowContext(ctx, `SELECT version FROM `+table).Scan(&version)
	switch {
	case err == sql.ErrNoRows:
		if _, err := db.ExecContext(ctx, `INSERT INTO `+table+` (version) VALUES (0)`); err != nil {
			return fmt.Errorf("initialising %s: %w", table, err)
		}
	case err != nil:
		return fmt.Errorf("reading %s: %w", table, err)
	}
	if version > len(migrations) {
		return fmt.Errorf("the schema is at version %d, newer than this llmedge knows (%d)", version, len(migrations))
	}
	for i := version; i < len(migrations); i++ {
		if err := apply(ctx, db, table, numbered, migrations[i], i+1); err != nil {
			return fmt.Errorf("migration %d: %w", i+1, err)
		}
	}
	return nil
}

// apply runs one migration and records its version, in one transaction.
func apply(ctx context.Context, db *sql.DB, table string, numbered bool, migration string, version int) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }() // a no-op after Commit
	for _, st := range Statements(migration) {
		if _, err := tx.ExecContext(ctx, st); err != nil {
			return err
		}
	}
	if _, err := tx.ExecContext(ctx, Bind(numbered, `UPDATE `+table+` SET version = ?`), version); err != nil {
		return err
	}
	return tx.Commit()
}

// Statements splits a migration into its statements, one Exec each: not
// every driver runs several in one call. (Migrations hold no ';' but
// between statements.)
func Statements(m string) []string {
	var out []string
	for _, st := range strings.Split(m, ";") {
		if st = strings.TrimSpace(st); st != "" {
			out = append(out, st)
		}
	}
	return out
}
