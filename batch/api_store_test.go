package batch

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"sync"
	"time"
)

// memStore is the API tests' Store: files and batches in memory, newest
// first in lists, with a switch to count a file's bytes instead of
// keeping them and one to fail every call.
type memStore struct {
	mu      sync.Mutex
	seq     int
	files   []File // in creation order
	content map[string][]byte
	batches []Batch
	// discard counts an upload's bytes without keeping them.
	discard bool
	// fail, when set, is every call's error.
	fail error
	// createErr, when set, is CreateBatch's (the file deleted
	// meanwhile).
	createErr error
	// finishOnCancel completes a batch as Cancel is called (the last
	// line's result written meanwhile).
	finishOnCancel bool
}

func newMemStore() *memStore { return &memStore{content: map[string][]byte{}} }

func (s *memStore) PutFile(_ context.Context, f File, content io.Reader) (File, error) {
	var buf bytes.Buffer
	var n int64
	var err error
	if s.discard {
		n, err = io.Copy(io.Discard, content)
	} else {
		n, err = io.Copy(&buf, content)
	}
	if err != nil {
		return File{}, fmt.Errorf("mem store: reading the upload: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return File{}, s.fail
	}
	s.seq++
	if f.ID == "" {
		f.ID = fmt.Sprintf("file-%03d", s.seq)
	}
	f.Bytes = n
	if f.CreatedAt.IsZero() {
		f.CreatedAt = time.Unix(1700000000+int64(s.seq), 0)
	}
	s.files = append(s.files, f)
	if !s.discard {
		s.content[f.ID] = buf.Bytes()
	}
	return f, nil
}

func (s *memStore) File(_ context.Context, id string) (File, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return File{}, s.fail
	}
	for _, f := range s.files {
		if f.ID == id {
			return f, nil
		}
	}
	return File{}, ErrNotFound
}

func (s *memStore) Files(_ context.Context, ownerKey, purpose, after string, limit int) ([]File, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return nil, s.fail
	}
	var out []File
	skipping := after != ""
	for i := len(s.files) - 1; i >= 0 && len(out) < limit; i-- {
		f := s.files[i]
		if skipping {
			skipping = f.ID != after
			continue
		}
		if (ownerKey == "" || f.Owner.Key() == ownerKey) && (purpose == "" || f.Purpose == purpose) {
			out = append(out, f)
		}
	}
	return out, nil
}

func (s *memStore) OpenFile(_ context.Context, id string) (io.ReadCloser, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return nil, s.fail
	}
	c, ok := s.content[id]
	if !ok {
		return nil, ErrNotFound
	}
	return io.NopCloser(bytes.NewReader(c)), nil
}

func (s *memStore) DeleteFile(_ context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return s.fail
	}
	for i, f := range s.files {
		if f.ID == id {
			s.files = append(s.files[:i], s.files[i+1:]...)
			delete(s.content, id)
			return nil
		}
	}
	return ErrNotFound
}

func (s *memStore) CreateBatch(_ context.Context, b Batch) (Batch, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return Batch{}, s.fail
	}
	if s.createErr != nil {
		return Batch{}, s.createErr
	}
	s.seq++
	b.ID = fmt.Sprintf("batch_%03d", s.seq)
	b.Status = StatusValidating
	s.batches = append(s.batches, b)
	return b, nil
}

func (s *memStore) Batch(_ context.Context, id string) (Batch, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return Batch{}, s.fail
	}
	for _, b := range s.batches {
		if b.ID == id {
			return b, nil
		}
	}
	return Batch{}, ErrNotFound
}

func (s *memStore) Batches(_ context.Context, ownerKey, after string, limit int) ([]Batch, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return nil, s.fail
	}
	var out []Batch
	skipping := after != ""
	for i := len(s.batches) - 1; i >= 0 && len(out) < limit; i-- {
		b := s.batches[i]
		if skipping {
			skipping = b.ID != after
			continue
		}
		if ownerKey == "" || b.Owner.Key() == ownerKey {
			out = append(out, b)
		}
	}
	return out, nil
}

func (s *memStore) Cancel(_ context.Context, id string) (Batch, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return Batch{}, s.fail
	}
	for i, b := range s.batches {
		if b.ID == id {
			if s.finishOnCancel {
				b.Status = StatusCompleted
				s.batches[i] = b
			}
			if b.Status.Terminal() {
				return Batch{}, ErrConflict
			}
			b.Status, b.CancellingAt = StatusCancelling, time.Unix(1800000000, 0)
			s.batches[i] = b
			return b, nil
		}
	}
	return Batch{}, ErrNotFound
}

// set replaces a batch's state, as the runner would.
func (s *memStore) set(b Batch) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range s.batches {
		if s.batches[i].ID == b.ID {
			s.batches[i] = b
		}
	}
}

// The runner's side is not the API's.
func (s *memStore) Validate(context.Context, string, time.Duration) (Batch, error) {
	return Batch{}, ErrNotFound
}
func (s *memStore) Claim(context.Context, string, string, int, time.Duration) ([]Line, error) {
	return nil, nil
}
func (s *memStore) Models(context.Context) ([]string, error)                     { return nil, nil }
func (s *memStore) Renew(context.Context, string, []Line, time.Duration) error   { return nil }
func (s *memStore) Release(context.Context, string, []Line) error                { return nil }
func (s *memStore) Complete(context.Context, string, Result) error               { return nil }
func (s *memStore) Finalize(context.Context, string, time.Time) ([]Batch, error) { return nil, nil }
func (s *memStore) Close() error                                                 { return nil }

var _ Store = (*memStore)(nil)
