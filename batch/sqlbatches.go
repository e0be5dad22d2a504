package batch

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

const batchColumns = `id, owner, endpoint, model, input_file_id, output_file_id, error_file_id, window_ms, status,
	total, completed, failed, errors, metadata, created_ms, in_progress_ms, expires_ms, finalizing_ms,
	completed_ms, failed_ms, expired_ms, cancelling_ms, cancelled_ms`

func scanBatch(sc interface{ Scan(...any) error }) (Batch, error) {
	var b Batch
	var owner, errs, meta, status string
	var window int64
	var t [9]int64
	if err := sc.Scan(&b.ID, &owner, &b.Endpoint, &b.Model, &b.InputFileID, &b.OutputFileID, &b.ErrorFileID, &window, &status,
		&b.Counts.Total, &b.Counts.Completed, &b.Counts.Failed, &errs, &meta,
		&t[0], &t[1], &t[2], &t[3], &t[4], &t[5], &t[6], &t[7], &t[8]); err != nil {
		return Batch{}, err
	}
	b.Status = Status(status)
	b.CompletionWindow = time.Duration(window) * time.Millisecond
	if err := json.Unmarshal([]byte(owner), &b.Owner); err != nil {
		return Batch{}, fmt.Errorf("batch %s: reading its owner: %w", b.ID, err)
	}
	if errs != "" {
		if err := json.Unmarshal([]byte(errs), &b.Errors); err != nil {
			return Batch{}, fmt.Errorf("batch %s: reading its errors: %w", b.ID, err)
		}
	}
	if meta != "" {
		if err := json.Unmarshal([]byte(meta), &b.Metadata); err != nil {
			return Batch{}, fmt.Errorf("batch %s: reading its metadata: %w", b.ID, err)
		}
	}
	b.CreatedAt, b.InProgressAt, b.ExpiresAt, b.FinalizingAt = fromMS(t[0]), fromMS(t[1]), fromMS(t[2]), fromMS(t[3])
	b.CompletedAt, b.FailedAt, b.ExpiredAt, b.CancellingAt, b.CancelledAt = fromMS(t[4]), fromMS(t[5]), fromMS(t[6]), fromMS(t[7]), fromMS(t[8])
	return b, nil
}

// CreateBatch implements Store. A batch without a completion window
// gets OpenAI's only one, 24 hours; it expires that long after creation.
func (s *SQLStore) CreateBatch(ctx context.Context, b Batch) (Batch, error) {
	b.ID = newID("batch_")
	b.Status = StatusValidating
	b.CreatedAt = s.clock().UTC().Truncate(time.Millisecond)
	if b.CompletionWindow <= 0 {
		b.CompletionWindow = 24 * time.Hour
	}
	if b.ExpiresAt.IsZero() {
		b.ExpiresAt = b.CreatedAt.Add(b.CompletionWindow)
	}
	b.Counts, b.Errors = Counts{}, nil
	owner, err := json.Marshal(b.Owner)
	if err != nil {
		return Batch{}, fmt.Errorf("batch: encoding the owner: %w", err)
	}
	meta := ""
	if len(b.Metadata) > 0 {
		m, err := json.Marshal(b.Metadata)
		if err != nil {
			return Batch{}, fmt.Errorf("batch: encoding the metadata: %w", err)
		}
		meta = string(m)
	}
	_, err = s.exec(ctx, `INSERT INTO batch_batches (id, owner_key, owner, endpoint, model, input_file_id, output_file_id, error_file_id,
		window_ms, status, final_status, total, completed, failed, errors, metadata, lease_owner, lease_until,
		created_ms, in_progress_ms, expires_ms, finalizing_ms, completed_ms, failed_ms, expired_ms, cancelling_ms, cancelled_ms)
		VALUES (?, ?, ?, ?, ?, ?, '', '', ?, ?, '', 0, 0, 0, '', ?, '', 0, ?, 0, ?, 0, 0, 0, 0, 0, 0)`,
		b.ID, ownerColumn(b.Owner.Key()), string(owner), b.Endpoint, b.Model, b.InputFileID,
		b.CompletionWindow.Milliseconds(), string(b.Status), meta, ms(b.CreatedAt), ms(b.ExpiresAt))
	if err != nil {
		return Batch{}, fmt.Errorf("batch: %s: creating a batch: %w", s.d.name, err)
	}
	b.OutputFileID, b.ErrorFileID = "", ""
	return b, nil
}

// Batch implements Store.
func (s *SQLStore) Batch(ctx context.Context, id string) (Batch, error) {
	return s.batch(ctx, s.db, id)
}

type queryer interface {
	QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row
}

func (s *SQLStore) batch(ctx context.Context, q queryer, id string) (Batch, error) {
	b, err := scanBatch(q.QueryRowContext(ctx, s.d.bind(`SELECT `+batchColumns+` FROM batch_batches WHERE id = ?`), id))
	if errors.Is(err, sql.ErrNoRows) {
		return Batch{}, ErrNotFound
	}
	if err != nil {
		return Batch{}, fmt.Errorf("batch: %s: reading batch %s: %w", s.d.name, id, err)
	}
	return b, nil
}

// Batches implements Store.
func (s *SQLStore) Batches(ctx context.Context, ownerKey, after string, limit int) ([]Batch, error) {
	q := `SELECT ` + batchColumns + ` FROM batch_batches WHERE 1 = 1`
	var args []any
	if ownerKey != "" {
		q, args = q+` AND owner_key = ?`, append(args, ownerColumn(ownerKey))
	}
	if after != "" {
		q, args = q+` AND seq < (SELECT seq FROM batch_batches WHERE id = ?)`, append(args, after)
	}
	if limit <= 0 {
		limit = 10000
	}
	q, args = q+` ORDER BY seq DESC LIMIT ?`, append(args, limit)
	rows, err := s.query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("batch: %s: listing batches: %w", s.d.name, err)
	}
	defer rows.Close()
	var out []Batch
	for rows.Next() {
		b, err := scanBatch(rows)
		if err != nil {
			return nil, fmt.Errorf("batch: %s: listing batches: %w", s.d.name, err)
		}
		out = append(out, b)
	}
	return out, rows.Err()
}

// Cancel implements Store. A cancelling batch is cancelled again
// without a change; a finalizing one has all its answers and finishes.
func (s *SQLStore) Cancel(ctx context.Context, id string) (Batch, error) {
	now := ms(s.clock())
	res, err := s.exec(ctx, `UPDATE batch_batches SET status = ?, cancelling_ms = ? WHERE id = ? AND status IN (?, ?)`,
		string(StatusCancelling), now, id, string(StatusValidating), string(StatusInProgress))
	if err != nil {
		return Batch{}, fmt.Errorf("batch: %s: cancelling batch %s: %w", s.d.name, id, err)
	}
	b, err := s.Batch(ctx, id)
	if err != nil {
		return Batch{}, err
	}
	if n, _ := res.RowsAffected(); n == 0 && b.Status != StatusCancelling {
		return b, fmt.Errorf("%w: batch %s is %s", ErrConflict, id, b.Status)
	}
	return b, nil
}

// Unfinished lists every owner's batches that are not final
// (validating, in progress, finalizing or cancelling), the oldest first,
// at most limit, in one query: the status page's view of the work under
// way.
func (s *SQLStore) Unfinished(ctx context.Context, limit int) ([]Batch, error) {
	if limit <= 0 {
		limit = 100
	}
	rows, err := s.query(ctx, `SELECT `+batchColumns+` FROM batch_batches WHERE status IN (?, ?, ?, ?) ORDER BY seq LIMIT ?`,
		string(StatusValidating), string(StatusInProgress), string(StatusFinalizing), string(StatusCancelling), limit)
	if err != nil {
		return nil, fmt.Errorf("batch: %s: listing the unfinished batches: %w", s.d.name, err)
	}
	defer rows.Close()
	var out []Batch
	for rows.Next() {
		b, err := scanBatch(rows)
		if err != nil {
			return nil, fmt.Errorf("batch: %s: listing the unfinished batches: %w", s.d.name, err)
		}
		out = append(out, b)
	}
	return out, rows.Err()
}
