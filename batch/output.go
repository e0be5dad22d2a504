package batch

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// resultsPerPage is how many results are read at a time while the
// output files are written: each page's rows are closed before its lines
// are stored, so SQLite's one connection never waits on itself.
const resultsPerPage = 100

// Finalize implements Store. Each candidate batch is leased (a
// conditional UPDATE, so one worker finalizes it), its end decided in one
// transaction (completed: every line answered; cancelled: the lines no
// one runs are dropped, running ones finish first; expired: the lines
// without an answer are answered batch_expired), its output and error
// files written from its results, and its lines and results removed as
// it moves to its final state.
func (s *SQLStore) Finalize(ctx context.Context, worker string, now time.Time) ([]Batch, error) {
	rows, err := s.query(ctx, `SELECT id FROM batch_batches WHERE status IN (?, ?, ?) AND lease_until < ?
		AND (status <> ? OR completed + failed >= total OR expires_ms <= ?) ORDER BY seq LIMIT 16`,
		string(StatusInProgress), string(StatusCancelling), string(StatusFinalizing), ms(now),
		string(StatusInProgress), ms(now))
	if err != nil {
		return nil, fmt.Errorf("batch: %s: finding batches to finalize: %w", s.d.name, err)
	}
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return nil, fmt.Errorf("batch: %s: finding batches to finalize: %w", s.d.name, err)
		}
		ids = append(ids, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("batch: %s: finding batches to finalize: %w", s.d.name, err)
	}
	var out []Batch
	var errs []error
	if err := s.sweepFiles(ctx, now); err != nil {
		errs = append(errs, err)
	}
	for _, id := range ids {
		b, ok, err := s.finalize(ctx, worker, id, now)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if ok {
			out = append(out, b)
		}
	}
	return out, errors.Join(errs...)
}

// finalize finalizes one batch if worker wins its lease and it is done.
func (s *SQLStore) finalize(ctx context.Context, worker, id string, now time.Time) (Batch, bool, error) {
	res, err := s.exec(ctx, `UPDATE batch_batches SET lease_owner = ?, lease_until = ? WHERE id = ? AND lease_until < ?
		AND status IN (?, ?, ?)`, worker, ms(now.Add(finalizeLease)), id, ms(now),
		string(StatusInProgress), string(StatusCancelling), string(StatusFinalizing))
	if err != nil {
		return Batch{}, false, fmt.Errorf("batch: %s: leasing %s to finalize: %w", s.d.name, id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return Batch{}, false, nil // another worker's
	}
	release := func() {
		_, _ = s.exec(context.WithoutCancel(ctx), `UPDATE batch_batches SET lease_owner = '', lease_until = 0 WHERE id = ? AND lease_owner = ?`, id, worker)
	}
	final, err := s.decide(ctx, worker, id, now)
	if err != nil || final == "" {
		release()
		return Batch{}, false, err
	}
	b, err := s.Batch(ctx, id)
	if err != nil {
		release()
		return Batch{}, false, err
	}
	outID, err := s.writeResults(ctx, worker, b, false)
	if err != nil {
		release()
		return Batch{}, false, err
	}
	errID, err := s.writeResults(ctx, worker, b, true)
	if err != nil {
		s.dropFiles(ctx, outID)
		release()
		return Batch{}, false, err
	}
	at := map[Status]string{StatusCompleted: "completed_ms", StatusCancelled: "cancelled_ms", StatusExpired: "expired_ms"}[final]
	err = s.tx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, s.d.bind(`UPDATE batch_batches SET status = ?, output_file_id = ?, error_file_id = ?, `+at+` = ?,
			lease_owner = '', lease_until = 0 WHERE id = ? AND lease_owner = ?`), string(final), outID, errID, ms(now), id, worker)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return ErrLeaseLost
		}
		for _, table := range []string{"batch_lines", "batch_results"} {
			if _, err := tx.ExecContext(ctx, s.d.bind(`DELETE FROM `+table+` WHERE batch_id = ?`), id); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		s.dropFiles(ctx, outID, errID)
		if errors.Is(err, ErrLeaseLost) {
			return Batch{}, false, nil // taken over: the other worker writes it
		}
		release()
		return Batch{}, false, fmt.Errorf("batch: %s: finalizing %s: %w", s.d.name, id, err)
	}
	b, err = s.Batch(ctx, id)
	return b, err == nil, err
}

// abandonedUpload is how old an upload that never completed (its
// writer's instance died) is when its chunks are removed.
const abandonedUpload = 24 * time.Hour

// sweepFiles removes a few files past their expiry and uploads
// abandoned midway.
func (s *SQLStore) sweepFiles(ctx context.Context, now time.Time) error {
	rows, err := s.query(ctx, `SELECT id FROM batch_files WHERE (complete = 0 AND created_ms < ?)
		OR (expires_ms > 0 AND expires_ms <= ?) LIMIT 16`, ms(now.Add(-abandonedUpload)), ms(now))
	if err != nil {
		return fmt.Errorf("batch: %s: finding files to remove: %w", s.d.name, err)
	}
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err == nil {
			ids = append(ids, id)
		}
	}
	rows.Close()
	for _, id := range ids {
		if err := s.removeFile(ctx, id); err != nil {
			return err
		}
	}
	return rows.Err()
}

func (s *SQLStore) dropFiles(ctx context.Context, ids ...string) {
	for _, id := range ids {
		if id != "" {
			_ = s.removeFile(context.WithoutCancel(ctx), id)
		}
	}
}

// decide settles, in one transaction, how the leased batch ends: its
// final status, or "" when it is not done yet (a cancelling batch with
// lines still running). The decision is kept (final_status), so a
// worker that takes a lapsed finalization over writes the same end.
func (s *SQLStore) decide(ctx context.Context, worker, id string, now time.Time) (Status, error) {
	var final Status
	err := s.tx(ctx, func(tx *sql.Tx) error {
		var status, decided string
		var total, done int
		var expires int64
		if err := tx.QueryRowContext(ctx, s.d.bind(`SELECT status, final_status, total, completed + failed, expires_ms
			FROM batch_batches WHERE id = ? AND lease_owner = ?`), id, worker).Scan(&status, &decided, &total, &done, &expires); err != nil {
			return err
		}
		if decided != "" {
			final = Status(decided)
			return nil
		}
		exec := func(q string, args ...any) (int64, error) {
			res, err := tx.ExecContext(ctx, s.d.bind(q), args...)
			if err != nil {
				return 0, err
			}
			n, _ := res.RowsAffected()
			return n, nil
		}
		switch {
		case Status(status) == StatusCancelling:
			// Lines no one runs are dropped; running ones may still
			// finish (or their lease lapse) before the batch ends.
			if _, err := exec(`DELETE FROM batch_lines WHERE batch_id = ? AND done = 0 AND lease_until < ?`, id, ms(now)); err != nil {
				return err
			}
			var running int
			if err := tx.QueryRowContext(ctx, s.d.bind(`SELECT COUNT(*) FROM batch_lines WHERE batch_id = ? AND done = 0`), id).Scan(&running); err != nil {
				return err
			}
			if running > 0 {
				return nil
			}
			final = StatusCancelled
		case Status(status) == StatusInProgress && done < total && expires <= ms(now):
			// Every line without an answer is answered batch_expired;
			// a worker still running one finds it done and drops its
			// result.
			n, err := exec(`INSERT INTO batch_results
				(batch_id, idx, custom_id, failed, status_code, request_id, body, err_code, err_message, err_param)
				SELECT batch_id, idx, custom_id, 1, 0, '', ?, 'batch_expired', ?, '' FROM batch_lines
				WHERE batch_id = ? AND done = 0 ON CONFLICT DO NOTHING`, []byte{},
				"This request could not be executed before the completion window expired.", id)
			if err != nil {
				return err
			}
			if _, err := exec(`UPDATE batch_lines SET done = 1, lease_owner = '', lease_until = 0 WHERE batch_id = ? AND done = 0`, id); err != nil {
				return err
			}
			if _, err := exec(`UPDATE batch_batches SET failed = failed + ? WHERE id = ?`, n, id); err != nil {
				return err
			}
			final = StatusExpired
		case Status(status) == StatusInProgress && done >= total, Status(status) == StatusFinalizing:
			if _, err := exec(`UPDATE batch_batches SET status = ?, finalizing_ms = ? WHERE id = ?`,
				string(StatusFinalizing), ms(now), id); err != nil {
				return err
			}
			final = StatusCompleted
		default:
			return nil
		}
		_, err := exec(`UPDATE batch_batches SET final_status = ? WHERE id = ?`, string(final), id)
		return err
	})
	if err != nil {
		return "", fmt.Errorf("batch: %s: finalizing %s: %w", s.d.name, id, err)
	}
	return final, nil
}

// writeResults writes the batch's successes (failed false) or failures
// to a file of purpose batch_output, owned by the batch's owner, a page
// of results at a time; it returns "" for none (no file is made).
func (s *SQLStore) writeResults(ctx context.Context, worker string, b Batch, failed bool) (string, error) {
	flag, name := 0, b.ID+"_output.jsonl"
	if failed {
		flag, name = 1, b.ID+"_error.jsonl"
	}
	var w *fileWriter
	after := 0
	renewed := s.clock()
	for {
		page, err := s.resultsPage(ctx, b.ID, flag, after)
		if err != nil {
			if w != nil {
				w.abort()
			}
			return "", err
		}
		if len(page) == 0 {
			break
		}
		if w == nil {
			if w, err = s.createFile(ctx, File{Owner: b.Owner, Purpose: "batch_output", Filename: name}); err != nil {
				return "", err
			}
		}
		for _, r := range page {
			if _, err := w.Write(outputLine(r)); err != nil {
				w.abort()
				return "", err
			}
		}
		after = page[len(page)-1].Index
		if s.clock().Sub(renewed) > finalizeLease/3 {
			renewed = s.clock()
			if _, err := s.exec(ctx, `UPDATE batch_batches SET lease_until = ? WHERE id = ? AND lease_owner = ?`,
				ms(renewed.Add(finalizeLease)), b.ID, worker); err != nil {
				w.abort()
				return "", fmt.Errorf("batch: %s: renewing the lease of %s: %w", s.d.name, b.ID, err)
			}
		}
	}
	if w == nil {
		return "", nil
	}
	f, err := w.commit()
	if err != nil {
		w.abort()
		return "", err
	}
	return f.ID, nil
}

func (s *SQLStore) resultsPage(ctx context.Context, id string, failed, after int) ([]Result, error) {
	rows, err := s.query(ctx, `SELECT idx, custom_id, status_code, request_id, body, err_code, err_message, err_param
		FROM batch_results WHERE batch_id = ? AND failed = ? AND idx > ? ORDER BY idx LIMIT ?`, id, failed, after, resultsPerPage)
	if err != nil {
		return nil, fmt.Errorf("batch: %s: reading the results of %s: %w", s.d.name, id, err)
	}
	defer rows.Close()
	var out []Result
	for rows.Next() {
		r := Result{BatchID: id}
		var code, msg, param string
		if err := rows.Scan(&r.Index, &r.CustomID, &r.StatusCode, &r.RequestID, &r.Body, &code, &msg, &param); err != nil {
			return nil, fmt.Errorf("batch: %s: reading the results of %s: %w", s.d.name, id, err)
		}
		if code != "" {
			r.Err = &LineError{Code: code, Message: msg, Param: param}
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// lineErr is an output line's error.
type lineErr struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// outputLine is a result in OpenAI's output shape, newline ended:
// {"id","custom_id","response":{"status_code","request_id","body"},"error"}.
// A failed line's error is its own, or one drawn from the replica's
// error answer.
func outputLine(r Result) []byte {
	type response struct {
		StatusCode int             `json:"status_code"`
		RequestID  string          `json:"request_id"`
		Body       json.RawMessage `json:"body"`
	}
	var line struct {
		ID       string    `json:"id"`
		CustomID string    `json:"custom_id"`
		Response *response `json:"response"`
		Error    *lineErr  `json:"error"`
	}
	line.ID = newID("batch_req_")
	line.CustomID = r.CustomID
	if r.StatusCode != 0 {
		body := bytes.TrimSpace(r.Body)
		if !json.Valid(body) {
			body, _ = json.Marshal(string(r.Body)) // not JSON: carried as a string
		}
		line.Response = &response{StatusCode: r.StatusCode, RequestID: r.RequestID, Body: body}
	}
	switch {
	case r.Err != nil:
		line.Error = &lineErr{Code: r.Err.Code, Message: r.Err.Message}
	case r.Failed():
		line.Error = answerError(r)
	}
	b, _ := json.Marshal(line) // cannot fail: every member is valid JSON
	return append(b, '\n')
}

// answerError is a non-2xx answer's error: the body's own
// {"error":{"code"|"type","message"}} when it has one.
func answerError(r Result) *lineErr {
	var body struct {
		Error struct {
			Code    any    `json:"code"`
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	_ = json.Unmarshal(r.Body, &body)
	e := &lineErr{Message: body.Error.Message}
	if c, ok := body.Error.Code.(string); ok && c != "" {
		e.Code = c
	} else if body.Error.Type != "" {
		e.Code = body.Error.Type
	} else {
		e.Code = "http_" + fmt.Sprint(r.StatusCode)
	}
	if e.Message == "" {
		e.Message = fmt.Sprintf("The request was answered with status %d.", r.StatusCode)
	}
	return e
}
