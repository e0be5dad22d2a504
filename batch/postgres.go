package batch

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the PostgreSQL driver, "pgx"
)

// postgresMigrations are SQLite's in PostgreSQL's types.
var postgresMigrations = func() []string {
	out := make([]string, len(sqliteMigrations))
	r := strings.NewReplacer("INTEGER PRIMARY KEY AUTOINCREMENT", "BIGSERIAL PRIMARY KEY",
		"INTEGER", "BIGINT", "BLOB", "BYTEA")
	for i, m := range sqliteMigrations {
		out[i] = r.Replace(m)
	}
	return out
}()

// OpenPostgres connects to the database dsn names, the ledger's, and
// brings the batch tables up to date. Instances sharing the database
// share the files and batches and work on the same lines: claims lock
// rows FOR UPDATE SKIP LOCKED, so concurrent claimers pass each other.
func OpenPostgres(ctx context.Context, dsn string) (*SQLStore, error) {
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		return nil, fmt.Errorf("batch: postgres: %w", err) // never the DSN: it may hold a password
	}
	db.SetMaxOpenConns(8)
	db.SetConnMaxIdleTime(5 * time.Minute)
	s := &SQLStore{db: db, d: dialect{name: "postgres", numbered: true,
		skipLocked: true, migrations: postgresMigrations}}
	if err := s.migrate(ctx); err != nil {
		_ = db.Close()
		return nil, err
	}
	return s, nil
}
