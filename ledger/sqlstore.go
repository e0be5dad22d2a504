package ledger

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/llmedge/llmedge/internal/sqlschema"
)

// sqlStore is a Store on database/sql; SQLite and PostgreSQL differ only
// in their placeholders and migrations' column types (dialect). Times are
// kept as Unix milliseconds and durations as microseconds, integers both
// databases read and group alike (a UTC day is time_ms / 86400000).
type sqlStore struct {
	db *sql.DB
	d  dialect

	// inserts are the INSERTs of insertRows[i] records, prepared on the
	// database once (at the first Write) and used by every transaction.
	mu      sync.Mutex
	inserts [len(insertRows)]*sql.Stmt
}

// dialect is what differs between the databases.
type dialect struct {
	name string
	// numbered placeholders ($1, $2, ...) rather than ?.
	numbered bool
	// migrations, in order: migration i brings the schema to version i+1.
	migrations []string
}

// columns are usage_records' columns that a Record fills, in order.
const columns = "time_ms, request_id, user_name, key_id, model, alias, replica, door, status, " +
	"prompt_tokens, cached_tokens, completion_tokens, ttft_us, duration_us, cost, team, served_model, client_request_id, batch_id"

const dayMillis = 24 * 60 * 60 * 1000

// bind rewrites ? placeholders into the dialect's.
func (d dialect) bind(q string) string { return sqlschema.Bind(d.numbered, q) }

// migrate brings the schema to the newest version, recorded in
// schema_version.
func (s *sqlStore) migrate(ctx context.Context) error {
	if err := sqlschema.Migrate(ctx, s.db, "schema_version", s.d.numbered, s.d.migrations); err != nil {
		return fmt.Errorf("ledger: %s: %w", s.d.name, err)
	}
	return nil
}

// Version is the schema's version, for tests and diagnostics.
func (s *sqlStore) Version(ctx context.Context) (int, error) {
	var v int
	err := s.db.QueryRowContext(ctx, `SELECT version FROM schema_version`).Scan(&v)
	return v, err
}

// insertRows are the sizes of the INSERTs a batch is written in, largest
// first: 100 rows of nColumns values is well within the parameters a
// statement may have in SQLite (32,766) and PostgreSQL (65,535). One
// statement per record cost, for each record, a statement's round
// through database/sql and the driver and SQLite's starting and ending
// of one; a statement of the batch's exact size would have to be
// compiled at each write. A batch of 237 goes in 2 of 100, 3 of 10 and
// 7 of 1.
var insertRows = [...]int{100, 10, 1}

// nColumns is the number of columns.
const nColumns = 19

// insertSQL is the INSERT of n records, in the dialect's placeholders.
func (d dialect) insertSQL(n int) string {
	row := "(" + strings.Repeat("?, ", nColumns-1) + "?)"
	var b strings.Builder
	b.WriteString("INSERT INTO usage_records (" + columns + ") VALUES ")
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(row)
	}
	// A record written already (its request id, the unique index of
	// migration 6) is not written again: a batch retried after a commit
	// whose acknowledgement was lost, a batch line's record.
	b.WriteString(" ON CONFLICT DO NOTHING")
	return d.bind(b.String())
}

// prepareInserts prepares the INSERTs once. It runs before a write's
// transaction begins: SQLite's store has a single connection, which the
// transaction holds.
func (s *sqlStore) prepareInserts(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, n := range insertRows {
		if s.inserts[i] != nil {
			continue
		}
		st, err := s.db.PrepareContext(ctx, s.d.insertSQL(n))
		if err != nil {
			return fmt.Errorf("ledger: %s: preparing the insert of %d: %w", s.d.name, n, err)
		}
		s.inserts[i] = st
	}
	return nil
}

// Write implements Store: one transaction, the records in the prepared
// INSERTs, largest first.
func (s *sqlStore) Write(ctx context.Context, recs []Record) error {
	if len(recs) == 0 {
		return nil
	}
	if err := s.prepareInserts(ctx); err != nil {
		return err
	}
	total := len(recs)
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("ledger: %s: %w", s.d.name, err)
	}
	defer func() { _ = tx.Rollback() }() // a no-op after Commit; it closes the statements too
	var stmts [len(insertRows)]*sql.Stmt
	args := make([]any, 0, min(len(recs), insertRows[0])*nColumns)
	for i, n := range insertRows {
		for len(recs) >= n {
			if stmts[i] == nil {
				stmts[i] = tx.StmtContext(ctx, s.inserts[i])
			}
			args = appendArgs(args[:0], recs[:n])
			if _, err := stmts[i].ExecContext(ctx, args...); err != nil {
				return fmt.Errorf("ledger: %s: inserting %d records: %w", s.d.name, n, err)
			}
			recs = recs[n:]
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("ledger: %s: committing %d records: %w", s.d.name, total, err)
	}
	return nil
}

// appendArgs appends the values of recs' columns, in columns' order.
func appendArgs(args []any, recs []Record) []any {
	for j := range recs {
		r := &recs[j]
		args = append(args, r.Time.UnixMilli(), r.RequestID, r.User, r.KeyID, r.Model, r.Alias,
			r.Replica, r.Door, r.Status, r.PromptTokens, r.CachedTokens, r.CompletionTokens,
			r.TTFT.Microseconds(), r.Duration.Microseconds(), r.Cost, r.Team, r.ServedModel, r.ClientRequestID, r.Batch)
	}
	return args
}

// InsertTx writes recs, as they are (priced: Writer.Priced), in tx, a
// transaction of another part of the gateway on the ledger's database
// ("sqlite" or "postgres", the dialect), so that the records are
// written exactly when what they account for is (a batch's result).
func InsertTx(ctx context.Context, tx *sql.Tx, dialectName string, recs ...Record) error {
	if len(recs) == 0 {
		return nil
	}
	d := dialect{name: dialectName, numbered: dialectName == "postgres"}
	if _, err := tx.ExecContext(ctx, d.insertSQL(len(recs)), appendArgs(nil, recs)...); err != nil {
		return fmt.Errorf("ledger: %s: inserting %d records: %w", dialectName, len(recs), err)
	}
	return nil
}

// Sum implements Store. It adds up the records and the daily roll-ups
// of the days pruned from them (a day is in one or the other, never
// both); a roll-up's day counts when its start is within Since and Until.
func (s *sqlStore) Sum(ctx context.Context, f Filter) ([]Sum, error) {
	var key string
	switch f.By {
	case ByNone:
		key = "''"
	case ByDay:
		key = "day" // a day number, named in Go
	case ByModel:
		key = "model"
	case ByUser:
		key = "user_name"
	case ByKey:
		key = "key_id"
	case ByTeam:
		key = "team"
	default:
		return nil, fmt.Errorf("ledger: unknown grouping %q", f.By)
	}
	var args []any
	between := func(col string, scale string) string {
		var w []string
		if !f.Since.IsZero() {
			w, args = append(w, col+scale+" >= ?"), append(args, f.Since.UnixMilli())
		}
		if !f.Until.IsZero() {
			w, args = append(w, col+scale+" < ?"), append(args, f.Until.UnixMilli())
		}
		if len(w) == 0 {
			return ""
		}
		return " WHERE " + strings.Join(w, " AND ")
	}
	// The roll-ups keep no key or team: a filter or grouping by them
	// counts the records within the retention.
	records := "SELECT time_ms / " + strconv.Itoa(dayMillis) + " AS day, user_name, model, key_id, team, 1 AS requests, " +
		"prompt_tokens, cached_tokens, completion_tokens, cost FROM usage_records" + between("time_ms", "")
	rollups := "SELECT day, user_name, model, '' AS key_id, '' AS team, requests, prompt_tokens, cached_tokens, completion_tokens, cost " +
		"FROM usage_daily" + between("day", " * "+strconv.Itoa(dayMillis))
	var where []string
	if f.User != "" {
		where, args = append(where, "user_name = ?"), append(args, f.User)
	}
	if f.Model != "" {
		where, args = append(where, "model = ?"), append(args, f.Model)
	}
	if f.Key != "" {
		where, args = append(where, "key_id = ?"), append(args, f.Key)
	}
	if f.Team != "" {
		where, args = append(where, "team = ?"), append(args, f.Team)
	}
	// The casts: PostgreSQL sums integers as numeric.
	q := "SELECT " + key + " AS k, CAST(COALESCE(SUM(requests), 0) AS BIGINT), CAST(COALESCE(SUM(prompt_tokens), 0) AS BIGINT), " +
		"CAST(COALESCE(SUM(cached_tokens), 0) AS BIGINT), CAST(COALESCE(SUM(completion_tokens), 0) AS BIGINT), " +
		"COALESCE(SUM(cost), 0) FROM (" + records + " UNION ALL " + rollups + ") AS u"
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	if f.By != ByNone {
		q += " GROUP BY k ORDER BY k"
	}
	rows, err := s.db.QueryContext(ctx, s.d.bind(q), args...)
	if err != nil {
		return nil, fmt.Errorf("ledger: %s: summing: %w", s.d.name, err)
	}
	defer rows.Close()
	var out []Sum
	for rows.Next() {
		var sum Sum
		var k any
		if err := rows.Scan(&k, &sum.Requests, &sum.PromptTokens, &sum.CachedTokens, &sum.CompletionTokens, &sum.Cost); err != nil {
			return nil, fmt.Errorf("ledger: %s: reading a sum: %w", s.d.name, err)
		}
		sum.Key = keyText(f.By, k)
		if f.By == ByNone && sum.Requests == 0 {
			continue // no records: no total
		}
		out = append(out, sum)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("ledger: %s: reading the sums: %w", s.d.name, err)
	}
	return out, nil
}

// keyText turns a group's value as the driver gives it into its name.
func keyText(by Group, k any) string {
	switch v := k.(type) {
	case int64:
		if by == ByDay {
			return time.UnixMilli(v * dayMillis).UTC().Format(time.DateOnly)
		}
		return strconv.FormatInt(v, 10)
	case []byte:
		return string(v)
	case string:
		return v
	case nil:
		return ""
	}
	return fmt.Sprint(k)
}

// Prune implements Store: the records of the whole UTC days before
// before's day are added to the daily roll-ups (usage_daily: per day,
// user and model), then deleted, in one transaction.
func (s *sqlStore) Prune(ctx context.Context, before time.Time) (int64, error) {
	ms := before.UnixMilli()
	cut := (ms - ((ms%dayMillis)+dayMillis)%dayMillis) // the day's start, also before 1970
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("ledger: %s: pruning: %w", s.d.name, err)
	}
	defer func() { _ = tx.Rollback() }() // a no-op after Commit
	day := "time_ms / " + strconv.Itoa(dayMillis)
	if _, err := tx.ExecContext(ctx, s.d.bind(`INSERT INTO usage_daily
		(day, user_name, model, requests, prompt_tokens, cached_tokens, completion_tokens, cost)
		SELECT `+day+`, user_name, model, COUNT(*), SUM(prompt_tokens), SUM(cached_tokens), SUM(completion_tokens), SUM(cost)
		FROM usage_records WHERE time_ms < ? GROUP BY `+day+`, user_name, model
		ON CONFLICT (day, user_name, model) DO UPDATE SET
			requests = usage_daily.requests + excluded.requests,
			prompt_tokens = usage_daily.prompt_tokens + excluded.prompt_tokens,
			cached_tokens = usage_daily.cached_tokens + excluded.cached_tokens,
			completion_tokens = usage_daily.completion_tokens + excluded.completion_tokens,
			cost = usage_daily.cost + excluded.cost`), cut); err != nil {
		return 0, fmt.Errorf("ledger: %s: rolling up the days before %s: %w", s.d.name, time.UnixMilli(cut).UTC().Format(time.DateOnly), err)
	}
	res, err := tx.ExecContext(ctx, s.d.bind(`DELETE FROM usage_records WHERE time_ms < ?`), cut)
	if err != nil {
		return 0, fmt.Errorf("ledger: %s: pruning: %w", s.d.name, err)
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("ledger: %s: pruning: %w", s.d.name, err)
	}
	n, _ := res.RowsAffected()
	return n, nil
}

// Close implements Store.
func (s *sqlStore) Close() error {
	s.mu.Lock()
	for i, st := range s.inserts {
		if st != nil {
			_ = st.Close()
			s.inserts[i] = nil
		}
	}
	s.mu.Unlock()
	return s.db.Close()
}
