package batch

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
)

// fileWriter stores a file's content a chunk at a time: the file's row
// is written first, incomplete (invisible to File and Files), each chunk
// in a statement of its own, and commit marks it complete with its size.
// A writer that fails or is abandoned leaves an incomplete row that
// abort removes.
type fileWriter struct {
	s     *SQLStore
	ctx   context.Context
	f     File
	buf   []byte
	n     int // chunks written
	bytes int64
}

func (s *SQLStore) createFile(ctx context.Context, f File) (*fileWriter, error) {
	if f.ID == "" {
		f.ID = newID("file-")
	}
	f.CreatedAt = s.clock().UTC().Truncate(time.Millisecond)
	// A client's file name, kept as text PostgreSQL takes.
	f.Filename = strings.ReplaceAll(strings.ToValidUTF8(f.Filename, "\uFFFD"), "\x00", "")
	owner, err := json.Marshal(f.Owner)
	if err != nil {
		return nil, fmt.Errorf("batch: encoding the owner: %w", err)
	}
	if _, err := s.exec(ctx, `INSERT INTO batch_files (id, owner_key, owner, purpose, filename, bytes, complete, created_ms, expires_ms)
		VALUES (?, ?, ?, ?, ?, 0, 0, ?, ?)`, f.ID, ownerColumn(f.Owner.Key()), string(owner), f.Purpose, f.Filename, ms(f.CreatedAt), ms(f.ExpiresAt)); err != nil {
		return nil, fmt.Errorf("batch: %s: creating file %s: %w", s.d.name, f.ID, err)
	}
	return &fileWriter{s: s, ctx: ctx, f: f, buf: make([]byte, 0, chunkBytes)}, nil
}

// Write buffers p, storing each full chunk.
func (w *fileWriter) Write(p []byte) (int, error) {
	written := 0
	for len(p) > 0 {
		k := min(len(p), chunkBytes-len(w.buf))
		w.buf = append(w.buf, p[:k]...)
		p, written = p[k:], written+k
		if len(w.buf) == chunkBytes {
			if err := w.flush(); err != nil {
				return written, err
			}
		}
	}
	return written, nil
}

func (w *fileWriter) flush() error {
	if len(w.buf) == 0 {
		return nil
	}
	if _, err := w.s.exec(w.ctx, `INSERT INTO batch_file_chunks (file_id, n, data) VALUES (?, ?, ?)`, w.f.ID, w.n, w.buf); err != nil {
		return fmt.Errorf("batch: %s: writing chunk %d of file %s: %w", w.s.d.name, w.n, w.f.ID, err)
	}
	w.n++
	w.bytes += int64(len(w.buf))
	w.buf = w.buf[:0]
	return nil
}

// commit stores the last chunk and makes the file visible.
func (w *fileWriter) commit() (File, error) {
	if err := w.flush(); err != nil {
		return File{}, err
	}
	if _, err := w.s.exec(w.ctx, `UPDATE batch_files SET complete = 1, bytes = ? WHERE id = ?`, w.bytes, w.f.ID); err != nil {
		return File{}, fmt.Errorf("batch: %s: completing file %s: %w", w.s.d.name, w.f.ID, err)
	}
	w.f.Bytes = w.bytes
	return w.f, nil
}

// abort removes what was written, even when the writer's context ended.
func (w *fileWriter) abort() {
	_ = w.s.removeFile(context.WithoutCancel(w.ctx), w.f.ID)
}

// PutFile implements Store: content is read a chunk at a time into
// rows of batch_file_chunks, never whole in memory.
func (s *SQLStore) PutFile(ctx context.Context, f File, content io.Reader) (File, error) {
	w, err := s.createFile(ctx, f)
	if err != nil {
		return File{}, err
	}
	for {
		n, err := io.ReadFull(content, w.buf[len(w.buf):cap(w.buf)])
		w.buf = w.buf[:len(w.buf)+n]
		if len(w.buf) == chunkBytes {
			if ferr := w.flush(); ferr != nil {
				w.abort()
				return File{}, ferr
			}
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			break
		}
		if err != nil {
			w.abort()
			return File{}, fmt.Errorf("batch: reading file %s: %w", w.f.ID, err)
		}
	}
	out, err := w.commit()
	if err != nil {
		w.abort()
		return File{}, err
	}
	return out, nil
}

const fileColumns = `id, owner, purpose, filename, bytes, created_ms, expires_ms`

func scanFile(sc interface{ Scan(...any) error }) (File, error) {
	var f File
	var owner string
	var created, expires int64
	if err := sc.Scan(&f.ID, &owner, &f.Purpose, &f.Filename, &f.Bytes, &created, &expires); err != nil {
		return File{}, err
	}
	if err := json.Unmarshal([]byte(owner), &f.Owner); err != nil {
		return File{}, fmt.Errorf("batch: file %s: reading its owner: %w", f.ID, err)
	}
	f.CreatedAt, f.ExpiresAt = fromMS(created), fromMS(expires)
	return f, nil
}

// File implements Store.
func (s *SQLStore) File(ctx context.Context, id string) (File, error) {
	f, err := scanFile(s.queryRow(ctx, `SELECT `+fileColumns+` FROM batch_files WHERE id = ? AND complete = 1`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return File{}, ErrNotFound
	}
	if err != nil {
		return File{}, fmt.Errorf("batch: %s: reading file %s: %w", s.d.name, id, err)
	}
	return f, nil
}

// Files implements Store.
func (s *SQLStore) Files(ctx context.Context, ownerKey, purpose, after string, limit int) ([]File, error) {
	q := `SELECT ` + fileColumns + ` FROM batch_files WHERE complete = 1`
	var args []any
	if ownerKey != "" {
		q, args = q+` AND owner_key = ?`, append(args, ownerColumn(ownerKey))
	}
	if purpose != "" {
		q, args = q+` AND purpose = ?`, append(args, purpose)
	}
	if after != "" {
		q, args = q+` AND seq < (SELECT seq FROM batch_files WHERE id = ?)`, append(args, after)
	}
	if limit <= 0 {
		limit = 10000
	}
	q, args = q+` ORDER BY seq DESC LIMIT ?`, append(args, limit)
	rows, err := s.query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("batch: %s: listing files: %w", s.d.name, err)
	}
	defer rows.Close()
	var out []File
	for rows.Next() {
		f, err := scanFile(rows)
		if err != nil {
			return nil, fmt.Errorf("batch: %s: listing files: %w", s.d.name, err)
		}
		out = append(out, f)
	}
	return out, rows.Err()
}

// OpenFile implements Store: the reader fetches one chunk per query, so
// a slow reader holds no connection between its reads.
func (s *SQLStore) OpenFile(ctx context.Context, id string) (io.ReadCloser, error) {
	if _, err := s.File(ctx, id); err != nil {
		return nil, err
	}
	return &fileReader{s: s, ctx: ctx, id: id}, nil
}

type fileReader struct {
	s    *SQLStore
	ctx  context.Context
	id   string
	n    int    // the next chunk to fetch
	buf  []byte // the current chunk
	cur  []byte // what is left of it
	done bool
}

func (r *fileReader) Read(p []byte) (int, error) {
	for len(r.cur) == 0 {
		if r.done {
			return 0, io.EOF
		}
		if err := r.fetch(); err != nil {
			return 0, err
		}
	}
	k := copy(p, r.cur)
	r.cur = r.cur[k:]
	return k, nil
}

// fetch reads the next chunk into the reader's one buffer (a chunk's
// bytes scanned as RawBytes, not a new slice each).
func (r *fileReader) fetch() error {
	rows, err := r.s.query(r.ctx, `SELECT data FROM batch_file_chunks WHERE file_id = ? AND n = ?`, r.id, r.n)
	if err != nil {
		return fmt.Errorf("batch: %s: reading chunk %d of file %s: %w", r.s.d.name, r.n, r.id, err)
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return fmt.Errorf("batch: %s: reading chunk %d of file %s: %w", r.s.d.name, r.n, r.id, err)
		}
		r.done = true
		return nil
	}
	var raw sql.RawBytes
	if err := rows.Scan(&raw); err != nil {
		return fmt.Errorf("batch: %s: reading chunk %d of file %s: %w", r.s.d.name, r.n, r.id, err)
	}
	r.buf = append(r.buf[:0], raw...)
	r.cur = r.buf
	r.n++
	return nil
}

func (r *fileReader) Close() error { r.buf, r.cur, r.done = nil, nil, true; return nil }

// DeleteFile implements Store.
func (s *SQLStore) DeleteFile(ctx context.Context, id string) error {
	if _, err := s.File(ctx, id); err != nil {
		return err
	}
	return s.removeFile(ctx, id)
}

func (s *SQLStore) removeFile(ctx context.Context, id string) error {
	err := s.tx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, s.d.bind(`DELETE FROM batch_file_chunks WHERE file_id = ?`), id); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, s.d.bind(`DELETE FROM batch_files WHERE id = ?`), id)
		return err
	})
	if err != nil {
		return fmt.Errorf("batch: %s: deleting file %s: %w", s.d.name, id, err)
	}
	return nil
}
