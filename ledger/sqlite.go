package ledger

import (
	"context"
	"fmt"

	"github.com/llmedge/llmedge/internal/sqlschema"
)

// sqliteMigrations bring a SQLite ledger's schema up, version by version.
// A released migration is never edited: a change is a new one.
var sqliteMigrations = []string{
	`CREATE TABLE usage_records (
		id                INTEGER PRIMARY KEY,
		time_ms           INTEGER NOT NULL,
		request_id        TEXT    NOT NULL,
		user_name         TEXT    NOT NULL,
		key_id            TEXT    NOT NULL,
		model             TEXT    NOT NULL,
		alias             TEXT    NOT NULL,
		replica           TEXT    NOT NULL,
		door              TEXT    NOT NULL,
		status            INTEGER NOT NULL,
		prompt_tokens     INTEGER NOT NULL,
		cached_tokens     INTEGER NOT NULL,
		completion_tokens INTEGER NOT NULL,
		ttft_us           INTEGER NOT NULL,
		duration_us       INTEGER NOT NULL,
		cost              REAL    NOT NULL
	);
	CREATE INDEX usage_records_time ON usage_records (time_ms);
	CREATE INDEX usage_records_user_time ON usage_records (user_name, time_ms);
	CREATE INDEX usage_records_model_time ON usage_records (model, time_ms);`,
	// 2: daily roll-ups of the records past their retention (day is
	// time_ms / 86400000, a UTC day number).
	`CREATE TABLE usage_daily (
		day               INTEGER NOT NULL,
		user_name         TEXT NOT NULL,
		model             TEXT NOT NULL,
		requests          INTEGER NOT NULL,
		prompt_tokens     INTEGER NOT NULL,
		cached_tokens     INTEGER NOT NULL,
		completion_tokens INTEGER NOT NULL,
		cost              REAL NOT NULL,
		PRIMARY KEY (day, user_name, model)
	)`,
	// 3: the team a request counted against; indexes for the budgets'
	// sums by key and by team.
	`ALTER TABLE usage_records ADD COLUMN team TEXT NOT NULL DEFAULT '';
	CREATE INDEX usage_records_team_time ON usage_records (team, time_ms);
	CREATE INDEX usage_records_key_time ON usage_records (key_id, time_ms)`,
	// 4: the model that answered (a fallback, a rollout's share), whose
	// price the cost is at, and the client's own X-Request-ID beside the
	// gateway's request_id. Records written before have both empty: which
	// model answered them was not kept.
	`ALTER TABLE usage_records ADD COLUMN served_model TEXT NOT NULL DEFAULT '';
	ALTER TABLE usage_records ADD COLUMN client_request_id TEXT NOT NULL DEFAULT ''`,
	// 5: the batch a record's request was a line of ("" for an online
	// request): a line is priced at its model's batch price.
	`ALTER TABLE usage_records ADD COLUMN batch_id TEXT NOT NULL DEFAULT ''`,
	// 6: one record per request: a write retried after its commit's
	// acknowledgement was lost (a database failing over) inserts nothing
	// the second time. Copies such a retry made before are removed first.
	`DELETE FROM usage_records WHERE request_id <> '' AND id NOT IN
		(SELECT MIN(id) FROM usage_records WHERE request_id <> '' GROUP BY request_id);
	CREATE UNIQUE INDEX usage_records_request ON usage_records (request_id) WHERE request_id <> ''`,
}

// SQLite is a Store in a SQLite file.
type SQLite struct{ sqlStore }

// OpenSQLite opens (creating it and its folder if need be) the ledger at
// path and brings its schema up to date. The database is in WAL mode,
// so readers (the usage command) do not block the writer.
func OpenSQLite(ctx context.Context, path string) (*SQLite, error) {
	db, err := sqlschema.OpenSQLite(path, false)
	if err != nil {
		return nil, fmt.Errorf("ledger: sqlite: %w", err)
	}
	s := &SQLite{sqlStore{db: db, d: dialect{name: "sqlite", migrations: sqliteMigrations}}}
	if err := s.migrate(ctx); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("%w (file %s)", err, path)
	}
	return s, nil
}
