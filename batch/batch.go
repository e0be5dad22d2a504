// Package batch is OpenAI's Batch API run by the gateway: files uploaded
// by their owners, batches of requests read from them, and the lines of
// those batches claimed by any instance under a lease, run on the spare
// capacity of the online fleet and written back exactly once, keyed by
// their custom_id.
//
// The package is plain Go: a Store keeps files, batches, lines and
// results (PostgreSQL for several instances, SQLite for one); a Runner
// claims lines and hands them to a Dispatcher (the gateway's request
// path) when a Gate says the model has room; the HTTP API (api.go) is
// OpenAI's /v1/files and /v1/batches.
package batch

import (
	"context"
	"database/sql"
	"errors"
	"io"
	"time"
)

// Status is a batch's state, as OpenAI names it.
type Status string

// A batch goes validating → in_progress → finalizing → completed; or
// failed (its input file is not a valid batch), expired (its completion
// window passed first), cancelling → cancelled.
const (
	StatusValidating Status = "validating"
	StatusFailed     Status = "failed"
	StatusInProgress Status = "in_progress"
	StatusFinalizing Status = "finalizing"
	StatusCompleted  Status = "completed"
	StatusExpired    Status = "expired"
	StatusCancelling Status = "cancelling"
	StatusCancelled  Status = "cancelled"
)

// Terminal reports whether s is a final state.
func (s Status) Terminal() bool {
	switch s {
	case StatusFailed, StatusCompleted, StatusExpired, StatusCancelled:
		return true
	}
	return false
}

// Owner is who a file or batch belongs to: a snapshot of the credential
// that created it, enough to run its lines as that credential (limits,
// budgets, team, class of work) and to let only it see them.
type Owner struct {
	// Subject is the credential's subject (a user); KeyID the API key's
	// id when it came with one. Files and batches are visible to the
	// same Subject and Provider.
	Subject  string   `json:"subject"`
	Provider string   `json:"provider,omitempty"`
	KeyID    string   `json:"key_id,omitempty"`
	Team     string   `json:"team,omitempty"`
	Tier     string   `json:"tier,omitempty"`
	Scopes   []string `json:"scopes,omitempty"`
}

// Key is the owner's identity for visibility: files and batches are
// listed and read by the owner with the same key.
func (o Owner) Key() string { return o.Provider + "\x00" + o.Subject }

// File is an uploaded (or produced) file's metadata.
type File struct {
	ID    string
	Owner Owner
	// Purpose is "batch" for an uploaded input, "batch_output" for a
	// batch's output and error files.
	Purpose   string
	Filename  string
	Bytes     int64
	CreatedAt time.Time
	// ExpiresAt is zero for a file kept until deleted.
	ExpiresAt time.Time
}

// LineError is why a batch or one of its lines failed, in OpenAI's
// shape ({code, message, param, line}).
type LineError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Param   string `json:"param,omitempty"`
	// Line is the input file's line number (1-based), 0 when none.
	Line int `json:"line,omitempty"`
}

// Counts are a batch's request_counts.
type Counts struct {
	Total     int `json:"total"`
	Completed int `json:"completed"`
	Failed    int `json:"failed"`
}

// Batch is a batch's state.
type Batch struct {
	ID       string
	Owner    Owner
	Endpoint string // "/v1/chat/completions", "/v1/completions", "/v1/embeddings", "/v1/responses"
	// Model is the model of its lines (a batch runs one model: the first
	// line's, and validation refuses lines naming another).
	Model            string
	InputFileID      string
	OutputFileID     string
	ErrorFileID      string
	CompletionWindow time.Duration
	Status           Status
	Counts           Counts
	// Errors are the validation errors of a failed batch.
	Errors   []LineError
	Metadata map[string]string

	CreatedAt, InProgressAt, ExpiresAt, FinalizingAt, CompletedAt time.Time
	FailedAt, ExpiredAt, CancellingAt, CancelledAt                time.Time
}

// Line is one request of a batch, claimed by a worker.
type Line struct {
	BatchID  string
	Index    int // the input file's line number, 1-based
	CustomID string
	// Body is the request's JSON body, as the input file had it.
	Body []byte
	// Attempts counts the claims of the line before this one that ended
	// without a result (a worker lost, a replica died).
	Attempts int
	// Owner, Endpoint and Model are the batch's, for the dispatcher.
	Owner    Owner
	Endpoint string
	Model    string
	// Created is when the batch was created: its owner's credential
	// stands for its lines as long as it was not revoked since.
	Created time.Time
}

// Result is the outcome of one line: the replica's answer (any status
// the gateway gave it, a 4xx included), or an error that is the line's
// own (Err set, Body empty).
type Result struct {
	BatchID    string
	CustomID   string
	Index      int
	StatusCode int
	RequestID  string
	Body       []byte
	Err        *LineError
	// Usage, when set, writes what the line cost (the ledger's record)
	// in the transaction that writes the result, with the store's
	// dialect ("sqlite" or "postgres"): both are written once, or
	// neither.
	Usage func(ctx context.Context, tx *sql.Tx, dialect string) error
}

// Failed reports whether the result goes to the batch's error file:
// an error, or an answer whose status is not 2xx.
func (r Result) Failed() bool { return r.Err != nil || r.StatusCode < 200 || r.StatusCode > 299 }

// Errors of the Store.
var (
	ErrNotFound = errors.New("batch: not found")
	// ErrLeaseLost: the line's lease lapsed and another worker holds it,
	// or its result is written already; the caller drops its result.
	ErrLeaseLost = errors.New("batch: lease lost")
	// ErrConflict: the batch is not in a state that allows the change.
	ErrConflict = errors.New("batch: conflict")
)

// Store keeps files, batches, their lines and results, for every
// instance of the gateway. Its methods are safe for concurrent use.
type Store interface {
	// PutFile stores f with content read to its end, without holding it
	// whole in memory, and returns it with its ID (when empty), Bytes and
	// CreatedAt set.
	PutFile(ctx context.Context, f File, content io.Reader) (File, error)
	// File is a file's metadata; ErrNotFound for none (or one deleted).
	File(ctx context.Context, id string) (File, error)
	// Files lists an owner's files (every owner's for ownerKey ""),
	// newest first, after the id after ("" from the newest), at most
	// limit, of purpose (any for "").
	Files(ctx context.Context, ownerKey, purpose, after string, limit int) ([]File, error)
	// OpenFile reads a file's content.
	OpenFile(ctx context.Context, id string) (io.ReadCloser, error)
	// DeleteFile deletes a file and its content.
	DeleteFile(ctx context.Context, id string) error

	// CreateBatch stores b in StatusValidating and returns it with its ID
	// and CreatedAt set.
	CreateBatch(ctx context.Context, b Batch) (Batch, error)
	// Batch is a batch's state; Batches lists an owner's (every owner's
	// for ownerKey ""), newest first, after the id after, at most limit.
	Batch(ctx context.Context, id string) (Batch, error)
	Batches(ctx context.Context, ownerKey, after string, limit int) ([]Batch, error)
	// Cancel moves a batch that is not final to cancelling (ErrConflict
	// for a final one) and returns it.
	Cancel(ctx context.Context, id string) (Batch, error)

	// Validate claims one batch in StatusValidating (none: ErrNotFound)
	// under a lease for worker, reads its input file into lines (a line
	// per request, checked as OpenAI checks them) and moves it to
	// in_progress, or to failed with the errors found.
	Validate(ctx context.Context, worker string, lease time.Duration) (Batch, error)
	// Claim takes up to n lines of in-progress batches of model that no
	// worker holds (never claimed, or their lease lapsed) for worker
	// until lease from now, lines of the batch created first first.
	Claim(ctx context.Context, worker, model string, n int, lease time.Duration) ([]Line, error)
	// Models lists the models that have lines to claim.
	Models(ctx context.Context) ([]string, error)
	// Renew extends worker's leases on lines; ErrLeaseLost for any it no
	// longer holds (the others are renewed).
	Renew(ctx context.Context, worker string, lines []Line, lease time.Duration) error
	// Release gives lines back unclaimed, without counting an attempt
	// (the gate closed before they ran).
	Release(ctx context.Context, worker string, lines []Line) error
	// Complete writes a line's result, once: ErrLeaseLost when the
	// worker no longer holds the line or a result is written for its
	// custom_id already. It updates the batch's counts.
	Complete(ctx context.Context, worker string, r Result) error
	// Finalize moves, for worker, batches whose lines all have results
	// (or that are cancelling, or past their expiry) to their final
	// state, writing their output and error files.
	Finalize(ctx context.Context, worker string, now time.Time) ([]Batch, error)
	Close() error
}

// Dispatcher runs one line through the gateway's request path as its
// owner, in the batch class of work, and returns the answer. An error is
// the gateway's refusal to run it now (saturated, shed, no replica): the
// line is released and tried again later, not failed.
type Dispatcher interface {
	Dispatch(ctx context.Context, l Line) (Result, error)
}

// Gate says how many lines of a model may start now: the spare capacity
// the online classes leave, within the operator's share for batches. It
// is asked again before every start, and 0 stops new starts at once.
type Gate interface {
	Room(model string, running int) int
}
