package batch

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"strconv"
	"time"

	"github.com/llmedge/llmedge/internal/sqlschema"
)

// SQLStore is a Store on database/sql, in the ledger's database: SQLite
// for one instance, PostgreSQL for several. Its tables are its own
// (batch_*), versioned in batch_schema, so the ledger's migrations and
// these never meet. Times are Unix milliseconds.
type SQLStore struct {
	db *sql.DB
	d  dialect

	// Limits bound what Validate accepts; set them before the store is
	// used (zero members take the defaults).
	Limits Limits

	// now is the clock of leases and timestamps (tests move it).
	now func() time.Time
}

// Limits bound a batch's input file.
type Limits struct {
	// MaxLineBytes is the longest line of an input file (default 8 MiB).
	MaxLineBytes int
	// MaxLines is the most requests in a batch (default 50,000, OpenAI's).
	MaxLines int
}

const (
	defaultMaxLineBytes = 8 << 20
	defaultMaxLines     = 50_000
	// chunkBytes is the size of a file's stored chunks: a file is
	// written and read one chunk at a time, never whole.
	chunkBytes = 1 << 20
	// maxErrors is the most validation errors a failed batch reports.
	maxErrors = 100
	// finalizeLease is how long a worker holds a batch it finalizes
	// before another may take it over; it is renewed while writing.
	finalizeLease = time.Minute
)

func (l Limits) maxLineBytes() int {
	if l.MaxLineBytes > 0 {
		return l.MaxLineBytes
	}
	return defaultMaxLineBytes
}

func (l Limits) maxLines() int {
	if l.MaxLines > 0 {
		return l.MaxLines
	}
	return defaultMaxLines
}

// dialect is what differs between the databases.
type dialect struct {
	name string
	// numbered placeholders ($1, $2, ...) rather than ?.
	numbered bool
	// skipLocked: a claim's SELECT ends FOR UPDATE SKIP LOCKED, so
	// concurrent claimers pass each other's rows (PostgreSQL); SQLite
	// has one writer, its claims one after the other.
	skipLocked bool
	// migrations, in order: migration i brings the schema to version i+1.
	migrations []string
}

// bind rewrites ? placeholders into the dialect's.
func (d dialect) bind(q string) string { return sqlschema.Bind(d.numbered, q) }

// lockSkip is the end of a claim's SELECT locking the rows of table
// alias (nothing on SQLite).
func (d dialect) lockSkip(alias string) string {
	if !d.skipLocked {
		return ""
	}
	return " FOR UPDATE OF " + alias + " SKIP LOCKED"
}

func (s *SQLStore) exec(ctx context.Context, q string, args ...any) (sql.Result, error) {
	return s.db.ExecContext(ctx, s.d.bind(q), args...)
}

func (s *SQLStore) query(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	return s.db.QueryContext(ctx, s.d.bind(q), args...)
}

func (s *SQLStore) queryRow(ctx context.Context, q string, args ...any) *sql.Row {
	return s.db.QueryRowContext(ctx, s.d.bind(q), args...)
}

// tx runs fn in a transaction (SQLite's begin immediately: it writes).
func (s *SQLStore) tx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }() // a no-op after Commit
	if err := fn(tx); err != nil {
		return err
	}
	return tx.Commit()
}

func (s *SQLStore) clock() time.Time {
	if s.now != nil {
		return s.now()
	}
	return time.Now()
}

// migrate brings the schema to the newest version, recorded in
// batch_schema.
func (s *SQLStore) migrate(ctx context.Context) error {
	if err := sqlschema.Migrate(ctx, s.db, "batch_schema", s.d.numbered, s.d.migrations); err != nil {
		return fmt.Errorf("batch: %s: %w", s.d.name, err)
	}
	return nil
}

// newID is prefix and 24 random hex digits, as OpenAI's ids look
// (file-…, batch_…).
func newID(prefix string) string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// ownerColumn is an owner's key as the owner_key columns keep it:
// quoted, since the key holds a NUL that PostgreSQL's text refuses.
func ownerColumn(key string) string { return strconv.Quote(key) }

func ms(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

func fromMS(v int64) time.Time {
	if v == 0 {
		return time.Time{}
	}
	return time.UnixMilli(v).UTC()
}

// Close implements Store.
func (s *SQLStore) Close() error { return s.db.Close() }
