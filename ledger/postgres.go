package ledger

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the PostgreSQL driver, "pgx"
)

// postgresMigrations bring a PostgreSQL ledger's schema up, version by
// version: the same tables as SQLite's, in PostgreSQL's types. A released
// migration is never edited: a change is a new one.
var postgresMigrations = []string{
	`CREATE TABLE usage_records (
		id                BIGSERIAL PRIMARY KEY,
		time_ms           BIGINT           NOT NULL,
		request_id        TEXT             NOT NULL,
		user_name         TEXT             NOT NULL,
		key_id            TEXT             NOT NULL,
		model             TEXT             NOT NULL,
		alias             TEXT             NOT NULL,
		replica           TEXT             NOT NULL,
		door              TEXT             NOT NULL,
		status            INTEGER          NOT NULL,
		prompt_tokens     BIGINT           NOT NULL,
		cached_tokens     BIGINT           NOT NULL,
		completion_tokens BIGINT           NOT NULL,
		ttft_us           BIGINT           NOT NULL,
		duration_us       BIGINT           NOT NULL,
		cost              DOUBLE PRECISION NOT NULL
	);
	CREATE INDEX usage_records_time ON usage_records (time_ms);
	CREATE INDEX usage_records_user_time ON usage_records (user_name, time_ms);
	CREATE INDEX usage_records_model_time ON usage_records (model, time_ms);`,
	// 2: daily roll-ups of the records past their retention (day is
	// time_ms / 86400000, a UTC day number).
	`CREATE TABLE usage_daily (
		day               BIGINT NOT NULL,
		user_name         TEXT NOT NULL,
		model             TEXT NOT NULL,
		requests          BIGINT NOT NULL,
		prompt_tokens     BIGINT NOT NULL,
		cached_tokens     BIGINT NOT NULL,
		completion_tokens BIGINT NOT NULL,
		cost              DOUBLE PRECISION NOT NULL,
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
	// acknowledgement was lost (a failover) inserts nothing the second
	// time. Copies such a retry made before are removed first.
	`DELETE FROM usage_records a USING usage_records b
		WHERE a.request_id <> '' AND a.request_id = b.request_id AND a.id > b.id;
	CREATE UNIQUE INDEX usage_records_request ON usage_records (request_id) WHERE request_id <> ''`,
}

// Postgres is a Store in a PostgreSQL database.
type Postgres struct{ sqlStore }

// OpenPostgres connects to the database dsn names (a URL,
// postgres://user:password@host:5432/db?sslmode=..., or key=value pairs)
// and brings the ledger's schema up to date. Gateways sharing the database
// share the ledger; two starting at once with a new schema may race on
// its creation, and the loser fails to start (start it again).
func OpenPostgres(ctx context.Context, dsn string) (*Postgres, error) {
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		return nil, fmt.Errorf("ledger: postgres: %w", err) // never the DSN: it may hold a password
	}
	db.SetMaxOpenConns(4)
	db.SetConnMaxIdleTime(5 * time.Minute)
	s := &Postgres{sqlStore{db: db, d: dialect{name: "postgres", numbered: true, migrations: postgresMigrations}}}
	if err := s.migrate(ctx); err != nil {
		_ = db.Close()
		return nil, err
	}
	return s, nil
}
