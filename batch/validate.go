package batch

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
)

// linesPerInsert is how many checked lines go to the database in one
// transaction while a batch is validated.
const linesPerInsert = 200

// Validate implements Store. The batch is leased (renewed as its lines
// are stored), its input file read a line at a time and each request
// stored as a line; a batch with errors keeps none. A worker that dies
// midway leaves a lease that lapses, and the next one starts over.
func (s *SQLStore) Validate(ctx context.Context, worker string, lease time.Duration) (Batch, error) {
	now := s.clock()
	var id string
	err := s.queryRow(ctx, `UPDATE batch_batches SET lease_owner = ?, lease_until = ?
		WHERE id IN (SELECT b.id FROM batch_batches b WHERE b.status = ? AND b.lease_until < ?
			ORDER BY b.seq LIMIT 1`+s.d.lockSkip("b")+`)
		RETURNING id`, worker, ms(now.Add(lease)), string(StatusValidating), ms(now)).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return Batch{}, ErrNotFound
	}
	if err != nil {
		return Batch{}, fmt.Errorf("batch: %s: claiming a batch to validate: %w", s.d.name, err)
	}
	b, err := s.Batch(ctx, id)
	if err != nil {
		return Batch{}, err
	}
	// A previous validator's lines, if it died midway.
	if _, err := s.exec(ctx, `DELETE FROM batch_lines WHERE batch_id = ?`, id); err != nil {
		return Batch{}, fmt.Errorf("batch: %s: validating %s: %w", s.d.name, id, err)
	}
	v := &validator{s: s, b: b, worker: worker, lease: lease, seen: map[[16]byte]int{}}
	if err := v.run(ctx); err != nil {
		s.abandon(context.WithoutCancel(ctx), id, worker)
		if errors.Is(err, ErrLeaseLost) {
			// Cancelled midway is no failure of the validator's: the
			// batch is the finalizer's to end.
			if cur, cerr := s.Batch(ctx, id); cerr == nil && cur.Status == StatusCancelling {
				return cur, nil
			}
		}
		return Batch{}, err
	}
	return v.finish(ctx)
}

// abandon gives a batch back to validate again later, with the lines
// stored so far removed, if worker still holds it (a worker that lost
// it leaves the lines to the one that took it over).
func (s *SQLStore) abandon(ctx context.Context, id, worker string) {
	_ = s.tx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, s.d.bind(`UPDATE batch_batches SET lease_owner = '', lease_until = 0 WHERE id = ? AND lease_owner = ?`), id, worker)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return nil
		}
		_, err = tx.ExecContext(ctx, s.d.bind(`DELETE FROM batch_lines WHERE batch_id = ?`), id)
		return err
	})
}

// validator checks one batch's input file.
type validator struct {
	s      *SQLStore
	b      Batch
	worker string
	lease  time.Duration
	// seen are the custom_ids so far (a digest each: 50,000 of them
	// are a few megabytes whatever their length), to their line.
	seen    map[[16]byte]int
	errs    []LineError
	total   int
	pending []Line
}

func (v *validator) fail(e LineError) {
	if len(v.errs) < maxErrors {
		v.errs = append(v.errs, e)
	}
}

func (v *validator) run(ctx context.Context) error {
	f, err := v.s.File(ctx, v.b.InputFileID)
	if err == nil && f.Owner.Key() != v.b.Owner.Key() {
		err = ErrNotFound // another owner's file is not this one's to read
	}
	if errors.Is(err, ErrNotFound) {
		v.fail(LineError{Code: "invalid_request", Param: "input_file_id",
			Message: fmt.Sprintf("Cannot find file %s, or it is not yours to read.", v.b.InputFileID)})
		return nil
	}
	if err != nil {
		return err
	}
	rc, err := v.s.OpenFile(ctx, v.b.InputFileID)
	if err != nil {
		return err
	}
	defer rc.Close()
	br := bufio.NewReaderSize(rc, 64<<10)
	maxLine, maxLines := v.s.Limits.maxLineBytes(), v.s.Limits.maxLines()
	var buf []byte
	for n := 1; ; n++ {
		line, tooLong, err := readLine(br, &buf, maxLine)
		if err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("batch: reading the input file of %s: %w", v.b.ID, err)
		}
		switch {
		case tooLong:
			v.fail(LineError{Code: "line_too_large", Line: n,
				Message: fmt.Sprintf("This line is longer than %d bytes, the most a request may be.", maxLine)})
		case len(bytes.TrimSpace(line)) > 0:
			if v.total == maxLines {
				v.fail(LineError{Code: "too_many_tasks", Line: n,
					Message: fmt.Sprintf("The batch has more than %d requests, the most one may have.", maxLines)})
				return nil
			}
			v.total++
			v.check(n, line)
		}
		if len(v.errs) >= maxErrors {
			return nil
		}
		if len(v.pending) >= linesPerInsert {
			if err := v.store(ctx); err != nil {
				return err
			}
		}
		if errors.Is(err, io.EOF) {
			break
		}
	}
	if v.total == 0 && len(v.errs) == 0 {
		v.fail(LineError{Code: "empty_file", Message: "The input file has no requests."})
	}
	if len(v.errs) == 0 {
		return v.store(ctx)
	}
	return nil
}

// readLine reads the next line (without its newline) into *buf; a line
// longer than max is read to its end and dropped (tooLong).
func readLine(br *bufio.Reader, buf *[]byte, max int) (line []byte, tooLong bool, err error) {
	*buf = (*buf)[:0]
	for {
		frag, err := br.ReadSlice('\n')
		if !tooLong {
			n := len(frag)
			if n > 0 && frag[n-1] == '\n' {
				n-- // the newline is not the line's
			}
			if len(*buf)+n > max {
				tooLong, *buf = true, (*buf)[:0]
			} else {
				*buf = append(*buf, frag...)
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		line = bytes.TrimSuffix(*buf, []byte{'\n'})
		return bytes.TrimSuffix(line, []byte{'\r'}), tooLong, err
	}
}

// request is an input line's members.
type request struct {
	CustomID json.RawMessage `json:"custom_id"`
	Method   json.RawMessage `json:"method"`
	URL      json.RawMessage `json:"url"`
	Body     json.RawMessage `json:"body"`
}

// check checks line n, adding the request to the pending lines or an
// error, with OpenAI's codes and messages where it has them.
func (v *validator) check(n int, line []byte) {
	var r request
	if err := json.Unmarshal(line, &r); err != nil || bytes.TrimSpace(line)[0] != '{' {
		v.fail(LineError{Code: "invalid_json_line", Line: n, Message: "This line is not parseable as valid JSON."})
		return
	}
	missing := func(p string) {
		v.fail(LineError{Code: "missing_required_parameter", Line: n, Param: p, Message: fmt.Sprintf("Missing required parameter: '%s'.", p)})
	}
	var customID, method, url string
	for _, m := range []struct {
		name string
		raw  json.RawMessage
		to   *string
	}{{"custom_id", r.CustomID, &customID}, {"method", r.Method, &method}, {"url", r.URL, &url}} {
		if isNull(m.raw) {
			missing(m.name)
			return
		}
		if json.Unmarshal(m.raw, m.to) != nil {
			v.fail(LineError{Code: "invalid_type", Line: n, Param: m.name, Message: fmt.Sprintf("Invalid type for '%s': expected a string.", m.name)})
			return
		}
	}
	if customID == "" {
		missing("custom_id")
		return
	}
	if strings.ContainsRune(customID, 0) {
		// PostgreSQL's text cannot keep it.
		v.fail(LineError{Code: "invalid_value", Line: n, Param: "custom_id", Message: "The custom_id may not contain a NUL character."})
		return
	}
	if isNull(r.Body) {
		missing("body")
		return
	}
	if method != "POST" {
		v.fail(LineError{Code: "invalid_method", Line: n, Param: "method", Message: "The method of this request is not supported: only POST is."})
		return
	}
	if url != v.b.Endpoint {
		v.fail(LineError{Code: "invalid_url", Line: n, Param: "url", Message: "The URL provided for this request does not match the batch endpoint."})
		return
	}
	var body struct {
		Model  json.RawMessage `json:"model"`
		Stream json.RawMessage `json:"stream"`
	}
	if bytes.TrimSpace(r.Body)[0] != '{' || json.Unmarshal(r.Body, &body) != nil {
		v.fail(LineError{Code: "invalid_type", Line: n, Param: "body", Message: "Invalid type for 'body': expected an object."})
		return
	}
	var model string
	if isNull(body.Model) || json.Unmarshal(body.Model, &model) != nil || model == "" || strings.ContainsRune(model, 0) {
		v.fail(LineError{Code: "invalid_request", Line: n, Param: "body.model", Message: "Model parameter is required."})
		return
	}
	if bytes.Equal(bytes.TrimSpace(body.Stream), []byte("true")) {
		v.fail(LineError{Code: "streaming_unsupported", Line: n, Param: "body.stream", Message: "Streaming is not supported in the Batch API."})
		return
	}
	if v.b.Model == "" {
		v.b.Model = model
	} else if model != v.b.Model {
		v.fail(LineError{Code: "mismatched_model", Line: n, Param: "body.model",
			Message: fmt.Sprintf("The model '%s' does not match the batch's, '%s': a batch runs one model.", model, v.b.Model)})
		return
	}
	key := digest(customID)
	if first, ok := v.seen[key]; ok {
		v.fail(LineError{Code: "duplicate_custom_id", Line: n, Param: "custom_id",
			Message: fmt.Sprintf("The custom_id for this request is a duplicate of line %d's. The custom_id parameter must be unique for each request in a batch.", first)})
		return
	}
	v.seen[key] = n
	if len(v.errs) == 0 { // a batch with errors keeps no lines
		v.pending = append(v.pending, Line{Index: n, CustomID: customID, Body: r.Body})
	}
}

func digest(s string) [16]byte {
	sum := sha256.Sum256([]byte(s))
	return [16]byte(sum[:16])
}

func isNull(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) == 0 || bytes.Equal(t, []byte("null"))
}

// store writes the pending lines in one transaction, renewing the
// batch's lease; a lease another worker took ends the validation.
func (v *validator) store(ctx context.Context) error {
	if len(v.errs) > 0 {
		v.pending = v.pending[:0]
		return nil
	}
	s := v.s
	err := s.tx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, s.d.bind(`UPDATE batch_batches SET lease_until = ? WHERE id = ? AND lease_owner = ? AND status = ?`),
			ms(s.clock().Add(v.lease)), v.b.ID, v.worker, string(StatusValidating))
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return ErrLeaseLost
		}
		if len(v.pending) == 0 {
			return nil
		}
		st, err := tx.PrepareContext(ctx, s.d.bind(`INSERT INTO batch_lines
			(batch_id, idx, custom_id, body, attempts, done, lease_owner, lease_until) VALUES (?, ?, ?, ?, 0, 0, '', 0)`))
		if err != nil {
			return err
		}
		defer st.Close()
		for _, l := range v.pending {
			if _, err := st.ExecContext(ctx, v.b.ID, l.Index, l.CustomID, []byte(l.Body)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("batch: %s: storing the lines of %s: %w", s.d.name, v.b.ID, err)
	}
	v.pending = v.pending[:0]
	return nil
}

// finish moves the batch to in_progress, or to failed with its errors,
// if this worker still holds it and it was not cancelled meanwhile.
func (v *validator) finish(ctx context.Context) (Batch, error) {
	s, b := v.s, v.b
	now := s.clock()
	err := s.tx(ctx, func(tx *sql.Tx) error {
		var res sql.Result
		var err error
		if len(v.errs) > 0 {
			errs, _ := json.Marshal(v.errs)
			res, err = tx.ExecContext(ctx, s.d.bind(`UPDATE batch_batches SET status = ?, errors = ?, failed_ms = ?, lease_owner = '', lease_until = 0
				WHERE id = ? AND lease_owner = ? AND status = ?`), string(StatusFailed), string(errs), ms(now), b.ID, v.worker, string(StatusValidating))
		} else {
			res, err = tx.ExecContext(ctx, s.d.bind(`UPDATE batch_batches SET status = ?, model = ?, total = ?, in_progress_ms = ?, lease_owner = '', lease_until = 0
				WHERE id = ? AND lease_owner = ? AND status = ?`), string(StatusInProgress), b.Model, v.total, ms(now), b.ID, v.worker, string(StatusValidating))
		}
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return ErrLeaseLost
		}
		if len(v.errs) > 0 { // the lines stored before the first error
			_, err = tx.ExecContext(ctx, s.d.bind(`DELETE FROM batch_lines WHERE batch_id = ?`), b.ID)
		}
		return err
	})
	if errors.Is(err, ErrLeaseLost) {
		// Cancelled meanwhile, or taken over: a cancelled batch's lines
		// go with the lease; another worker's are its own.
		s.abandon(ctx, b.ID, v.worker)
		if cur, err := s.Batch(ctx, b.ID); err == nil && cur.Status == StatusCancelling {
			return cur, nil
		}
		return Batch{}, fmt.Errorf("%w: batch %s, validating", ErrLeaseLost, b.ID)
	}
	if err != nil {
		return Batch{}, fmt.Errorf("batch: %s: validating %s: %w", s.d.name, b.ID, err)
	}
	return s.Batch(ctx, b.ID)
}
