package batch

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"sort"
	"time"
)

// Claim implements Store in one statement: the lines are chosen and
// leased together (on PostgreSQL their rows locked SKIP LOCKED, so two
// claimers never choose the same line). A line whose lease lapsed counts
// an attempt when it is claimed again.
func (s *SQLStore) Claim(ctx context.Context, worker, model string, n int, lease time.Duration) ([]Line, error) {
	if n <= 0 {
		return nil, nil
	}
	now := s.clock()
	rows, err := s.query(ctx, `UPDATE batch_lines
		SET attempts = attempts + CASE WHEN lease_owner <> '' THEN 1 ELSE 0 END, lease_owner = ?, lease_until = ?
		WHERE (batch_id, idx) IN (
			SELECT l.batch_id, l.idx FROM batch_lines l JOIN batch_batches b ON b.id = l.batch_id
			WHERE b.status = ? AND b.model = ? AND l.done = 0 AND l.lease_until < ?
			ORDER BY b.seq, l.idx LIMIT ?`+s.d.lockSkip("l")+`)
		RETURNING batch_id, idx, custom_id, body, attempts`,
		worker, ms(now.Add(lease)), string(StatusInProgress), model, ms(now), n)
	if err != nil {
		return nil, fmt.Errorf("batch: %s: claiming lines of %s: %w", s.d.name, model, err)
	}
	var lines []Line
	for rows.Next() {
		var l Line
		if err := rows.Scan(&l.BatchID, &l.Index, &l.CustomID, &l.Body, &l.Attempts); err != nil {
			rows.Close()
			return nil, fmt.Errorf("batch: %s: claiming lines of %s: %w", s.d.name, model, err)
		}
		lines = append(lines, l)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("batch: %s: claiming lines of %s: %w", s.d.name, model, err)
	}
	sort.Slice(lines, func(i, j int) bool {
		if lines[i].BatchID != lines[j].BatchID {
			return lines[i].BatchID < lines[j].BatchID
		}
		return lines[i].Index < lines[j].Index
	})
	// The batch's owner and endpoint, read once per batch (a claim
	// holds lines of one or two batches).
	var last Line
	for i := range lines {
		if lines[i].BatchID != last.BatchID {
			var owner string
			var created int64
			err := s.queryRow(ctx, `SELECT owner, endpoint, model, created_ms FROM batch_batches WHERE id = ?`, lines[i].BatchID).
				Scan(&owner, &last.Endpoint, &last.Model, &created)
			if err == nil {
				last.Created = fromMS(created)
				err = json.Unmarshal([]byte(owner), &last.Owner)
			}
			if err != nil {
				_ = s.Release(context.WithoutCancel(ctx), worker, lines)
				return nil, fmt.Errorf("batch: %s: reading batch %s: %w", s.d.name, lines[i].BatchID, err)
			}
			last.BatchID = lines[i].BatchID
		}
		lines[i].Owner, lines[i].Endpoint, lines[i].Model, lines[i].Created = last.Owner, last.Endpoint, last.Model, last.Created
	}
	return lines, nil
}

// Models implements Store.
func (s *SQLStore) Models(ctx context.Context) ([]string, error) {
	rows, err := s.query(ctx, `SELECT DISTINCT b.model FROM batch_batches b WHERE b.status = ?
		AND EXISTS (SELECT 1 FROM batch_lines l WHERE l.batch_id = b.id AND l.done = 0 AND l.lease_until < ?)
		ORDER BY b.model`, string(StatusInProgress), ms(s.clock()))
	if err != nil {
		return nil, fmt.Errorf("batch: %s: listing models: %w", s.d.name, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var m string
		if err := rows.Scan(&m); err != nil {
			return nil, fmt.Errorf("batch: %s: listing models: %w", s.d.name, err)
		}
		out = append(out, m)
	}
	return out, rows.Err()
}

// Renew implements Store.
func (s *SQLStore) Renew(ctx context.Context, worker string, lines []Line, lease time.Duration) error {
	until := ms(s.clock().Add(lease))
	return s.eachLine(ctx, worker, lines, true, `UPDATE batch_lines SET lease_until = ?
		WHERE batch_id = ? AND idx = ? AND lease_owner = ? AND done = 0`, until)
}

// Release implements Store.
func (s *SQLStore) Release(ctx context.Context, worker string, lines []Line) error {
	return s.eachLine(ctx, worker, lines, false, `UPDATE batch_lines SET lease_owner = '', lease_until = 0
		WHERE batch_id = ? AND idx = ? AND lease_owner = ? AND done = 0`)
}

// Retry gives lines back unclaimed counting an attempt: they ran and
// their replica failed (an answer of status 0 or 5xx), so the next
// claim is their next try.
func (s *SQLStore) Retry(ctx context.Context, worker string, lines []Line) error {
	return s.eachLine(ctx, worker, lines, false, `UPDATE batch_lines SET lease_owner = '', lease_until = 0, attempts = attempts + 1
		WHERE batch_id = ? AND idx = ? AND lease_owner = ? AND done = 0`)
}

// eachLine runs the update q (its leading arguments first, then each
// line's batch, index and the worker) on lines in one transaction;
// lost says whether a line not updated is ErrLeaseLost.
func (s *SQLStore) eachLine(ctx context.Context, worker string, lines []Line, lost bool, q string, lead ...any) error {
	if len(lines) == 0 {
		return nil
	}
	missed := 0
	err := s.tx(ctx, func(tx *sql.Tx) error {
		st, err := tx.PrepareContext(ctx, s.d.bind(q))
		if err != nil {
			return err
		}
		defer st.Close()
		for _, l := range lines {
			res, err := st.ExecContext(ctx, append(lead[:len(lead):len(lead)], l.BatchID, l.Index, worker)...)
			if err != nil {
				return err
			}
			if n, _ := res.RowsAffected(); n == 0 {
				missed++
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("batch: %s: updating %d leases: %w", s.d.name, len(lines), err)
	}
	if lost && missed > 0 {
		return fmt.Errorf("%w: %d of %d lines", ErrLeaseLost, missed, len(lines))
	}
	return nil
}

// Complete implements Store. In one transaction: the line is marked
// done if worker still holds it, the result is inserted unless one for
// its custom_id exists (ON CONFLICT DO NOTHING), and the batch's counts
// move; any step that finds the line taken rolls all back.
func (s *SQLStore) Complete(ctx context.Context, worker string, r Result) error {
	failed := 0
	if r.Failed() {
		failed = 1
	}
	var code, msg, param string
	if r.Err != nil {
		code, msg, param = r.Err.Code, r.Err.Message, r.Err.Param
	}
	body := r.Body
	if body == nil {
		body = []byte{}
	}
	err := s.tx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, s.d.bind(`UPDATE batch_lines SET done = 1, lease_owner = '', lease_until = 0, body = ?
			WHERE batch_id = ? AND idx = ? AND custom_id = ? AND lease_owner = ? AND done = 0`), []byte{}, r.BatchID, r.Index, r.CustomID, worker)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return ErrLeaseLost
		}
		res, err = tx.ExecContext(ctx, s.d.bind(`INSERT INTO batch_results
			(batch_id, idx, custom_id, failed, status_code, request_id, body, err_code, err_message, err_param)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`),
			r.BatchID, r.Index, r.CustomID, failed, r.StatusCode, r.RequestID, body, code, msg, param)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return ErrLeaseLost
		}
		if r.Usage != nil {
			if err := r.Usage(ctx, tx, s.d.name); err != nil {
				return fmt.Errorf("recording its usage: %w", err)
			}
		}
		_, err = tx.ExecContext(ctx, s.d.bind(`UPDATE batch_batches SET completed = completed + ?, failed = failed + ? WHERE id = ?`),
			1-failed, failed, r.BatchID)
		return err
	})
	if err == ErrLeaseLost {
		return fmt.Errorf("%w: line %d of %s", ErrLeaseLost, r.Index, r.BatchID)
	}
	if err != nil {
		return fmt.Errorf("batch: %s: writing line %d of %s: %w", s.d.name, r.Index, r.BatchID, err)
	}
	return nil
}
