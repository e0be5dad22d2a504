package batch

import (
	"context"
	"fmt"

	"github.com/llmedge/llmedge/internal/sqlschema"
)

// sqliteMigrations bring the batch tables of a SQLite ledger up, version
// by version. A released migration is never edited: a change is a new one.
var sqliteMigrations = []string{
	`CREATE TABLE batch_files (
		seq        INTEGER PRIMARY KEY AUTOINCREMENT,
		id         TEXT    NOT NULL UNIQUE,
		owner_key  TEXT    NOT NULL,
		owner      TEXT    NOT NULL,
		purpose    TEXT    NOT NULL,
		filename   TEXT    NOT NULL,
		bytes      INTEGER NOT NULL,
		complete   INTEGER NOT NULL,
		created_ms INTEGER NOT NULL,
		expires_ms INTEGER NOT NULL
	);
	CREATE INDEX batch_files_owner ON batch_files (owner_key, seq);
	CREATE TABLE batch_file_chunks (
		file_id TEXT    NOT NULL,
		n       INTEGER NOT NULL,
		data    BLOB    NOT NULL,
		PRIMARY KEY (file_id, n)
	);
	CREATE TABLE batch_batches (
		seq            INTEGER PRIMARY KEY AUTOINCREMENT,
		id             TEXT    NOT NULL UNIQUE,
		owner_key      TEXT    NOT NULL,
		owner          TEXT    NOT NULL,
		endpoint       TEXT    NOT NULL,
		model          TEXT    NOT NULL,
		input_file_id  TEXT    NOT NULL,
		output_file_id TEXT    NOT NULL,
		error_file_id  TEXT    NOT NULL,
		window_ms      INTEGER NOT NULL,
		status         TEXT    NOT NULL,
		final_status   TEXT    NOT NULL,
		total          INTEGER NOT NULL,
		completed      INTEGER NOT NULL,
		failed         INTEGER NOT NULL,
		errors         TEXT    NOT NULL,
		metadata       TEXT    NOT NULL,
		lease_owner    TEXT    NOT NULL,
		lease_until    INTEGER NOT NULL,
		created_ms     INTEGER NOT NULL,
		in_progress_ms INTEGER NOT NULL,
		expires_ms     INTEGER NOT NULL,
		finalizing_ms  INTEGER NOT NULL,
		completed_ms   INTEGER NOT NULL,
		failed_ms      INTEGER NOT NULL,
		expired_ms     INTEGER NOT NULL,
		cancelling_ms  INTEGER NOT NULL,
		cancelled_ms   INTEGER NOT NULL
	);
	CREATE INDEX batch_batches_owner ON batch_batches (owner_key, seq);
	CREATE INDEX batch_batches_status ON batch_batches (status, model, seq);
	CREATE TABLE batch_lines (
		batch_id    TEXT    NOT NULL,
		idx         INTEGER NOT NULL,
		custom_id   TEXT    NOT NULL,
		body        BLOB    NOT NULL,
		attempts    INTEGER NOT NULL,
		done        INTEGER NOT NULL,
		lease_owner TEXT    NOT NULL,
		lease_until INTEGER NOT NULL,
		PRIMARY KEY (batch_id, idx)
	);
	CREATE INDEX batch_lines_pending ON batch_lines (batch_id, done, idx);
	CREATE TABLE batch_results (
		batch_id    TEXT    NOT NULL,
		idx         INTEGER NOT NULL,
		custom_id   TEXT    NOT NULL,
		failed      INTEGER NOT NULL,
		status_code INTEGER NOT NULL,
		request_id  TEXT    NOT NULL,
		body        BLOB    NOT NULL,
		err_code    TEXT    NOT NULL,
		err_message TEXT    NOT NULL,
		err_param   TEXT    NOT NULL,
		PRIMARY KEY (batch_id, idx),
		UNIQUE (batch_id, custom_id)
	)`,
}

// OpenSQLite opens (creating it and its folder if need be) the batch
// tables in the SQLite file at path, the ledger's, and brings them up to
// date. Transactions begin immediately (they all write), so two writers
// wait on the file's lock rather than fail on upgrading a read.
func OpenSQLite(ctx context.Context, path string) (*SQLStore, error) {
	// No method keeps a cursor open while it writes (files are read a
	// chunk per query), so the one connection never waits on itself.
	db, err := sqlschema.OpenSQLite(path, true)
	if err != nil {
		return nil, fmt.Errorf("batch: sqlite: %w", err)
	}
	s := &SQLStore{db: db, d: dialect{name: "sqlite", migrations: sqliteMigrations}}
	if err := s.migrate(ctx); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("%w (file %s)", err, path)
	}
	return s, nil
}
