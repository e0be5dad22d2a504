package gateway

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/llmedge/llmedge/auth"
	"github.com/llmedge/llmedge/batch"
	"github.com/llmedge/llmedge/ledger"
)

// ErrBusy is the dispatcher's refusal of a line the gateway had no
// capacity for now (its model saturated, an online request waiting, no
// replica up): the line is released and tried again later.
var ErrBusy = errors.New("gateway: no spare capacity for the batch line")

// DefaultMaxBatchAnswer bounds one line's answer when the dispatcher is
// given no bound.
const DefaultMaxBatchAnswer = 16 << 20

// NewBatchDispatcher runs batch lines through handler(l.Endpoint), the
// OpenAI door's handler of the line's endpoint, as the batch's owner: the
// pipeline authorizes, limits, charges, routes and records it as it does
// a client's request, in the class below every online one. An answer
// larger than maxAnswer bytes (0: DefaultMaxBatchAnswer) becomes the
// line's error answer_too_large.
func NewBatchDispatcher(handler func(path string) http.Handler, maxAnswer int64) batch.Dispatcher {
	if maxAnswer <= 0 {
		maxAnswer = DefaultMaxBatchAnswer
	}
	return &batchDispatcher{handler: handler, max: maxAnswer}
}

type batchDispatcher struct {
	handler func(path string) http.Handler
	max     int64
}

// Dispatch implements batch.Dispatcher.
func (d *batchDispatcher) Dispatch(ctx context.Context, l batch.Line) (batch.Result, error) {
	res := batch.Result{BatchID: l.BatchID, CustomID: l.CustomID, Index: l.Index}
	h := d.handler(l.Endpoint)
	if h == nil {
		res.Err = &batch.LineError{Code: "invalid_url", Message: "The endpoint " + strconv.Quote(l.Endpoint) + " is not served here", Line: l.Index}
		return res, nil
	}
	run := &batchRun{id: l.BatchID, owner: ownerPrincipal(l.Owner), created: l.Created}
	// A request of the gateway's own: no client header is carried, only
	// what the door needs to read the body.
	r, err := http.NewRequestWithContext(withBatchRun(ctx, run), http.MethodPost, l.Endpoint, bytes.NewReader(l.Body))
	if err != nil {
		return res, fmt.Errorf("gateway: batch %s line %d: %w", l.BatchID, l.Index, err)
	}
	r.Header.Set("Content-Type", "application/json")
	r.RemoteAddr = "batch"
	w := newAnswerBuffer(d.max)
	h.ServeHTTP(w, r)

	ex, g := run.ex, run.g
	if ex != nil {
		res.RequestID = ex.RequestID
	}
	outcome := ""
	defer func() {
		if g != nil {
			g.Metrics.BatchLine(l.Model, outcome)
		}
	}()
	switch {
	case ctx.Err() != nil:
		// The runner is stopping (or its lease ended): nobody is to
		// have this answer; the line is run again.
		return res, fmt.Errorf("gateway: batch %s line %d: %w", l.BatchID, l.Index, ctx.Err())
	case run.busy:
		outcome = batchOutcome(true, 0)
		return res, fmt.Errorf("gateway: batch %s line %d, model %q: %w", l.BatchID, l.Index, l.Model, ErrBusy)
	}
	res.StatusCode = w.status()
	outcome = batchOutcome(false, res.StatusCode)
	if w.over {
		res.Err = &batch.LineError{Code: "answer_too_large",
			Message: "The answer is larger than the " + strconv.FormatInt(d.max, 10) + " bytes a batch line may have", Line: l.Index}
		outcome = batchOutcome(false, 0) // failed
		return res, nil
	}
	res.Body = w.body.Bytes()
	if rec := run.record; rec != nil {
		res.Usage = func(ctx context.Context, tx *sql.Tx, dialect string) error {
			return ledger.InsertTx(ctx, tx, dialect, *rec)
		}
	}
	return res, nil
}

// ownerPrincipal is the credential a batch's lines run as: the snapshot
// of its owner's, taken when the batch was created.
func ownerPrincipal(o batch.Owner) *auth.Principal {
	return &auth.Principal{Subject: o.Subject, Provider: o.Provider, KeyID: o.KeyID, Team: o.Team, Tier: o.Tier,
		Scopes: o.Scopes}
}

// answerBuffer is the ResponseWriter a line is answered into: in memory,
// up to max bytes, past which the rest is dropped and over is set.
type answerBuffer struct {
	header http.Header
	code   int
	body   bytes.Buffer
	max    int64
	over   bool
}

func newAnswerBuffer(max int64) *answerBuffer {
	return &answerBuffer{header: http.Header{}, max: max}
}

func (b *answerBuffer) Header() http.Header { return b.header }

func (b *answerBuffer) WriteHeader(code int) {
	if b.code == 0 {
		b.code = code
	}
}

func (b *answerBuffer) Write(p []byte) (int, error) {
	if b.code == 0 {
		b.code = http.StatusOK
	}
	if b.over {
		return len(p), nil
	}
	if int64(b.body.Len())+int64(len(p)) > b.max {
		b.over = true
		b.body = bytes.Buffer{} // no half answer is kept
		return len(p), nil
	}
	return b.body.Write(p)
}

// Flush lets a streamed answer through (the gateway flushes its events).
func (b *answerBuffer) Flush() {}

func (b *answerBuffer) status() int {
	if b.code == 0 {
		return http.StatusOK
	}
	return b.code
}
