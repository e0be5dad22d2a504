package gateway

import (
	"context"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/llmedge/llmedge/auth"
	"github.com/llmedge/llmedge/ledger"
	"github.com/llmedge/llmedge/metrics"
)

// batchKey keys a batch line's run in a request's context. The type is
// unexported: only this package's dispatcher (NewBatchDispatcher) sets
// it, and nothing a client sends can reach it.
type batchKey struct{}

// batchRun is one batch line going through the pipeline as its owner.
type batchRun struct {
	id    string          // the batch's id
	owner *auth.Principal // the batch's owner, in place of a credential
	// created is when the batch was created: a revocation of its owner
	// after it stops its lines (Pipeline.Owners).
	created time.Time
	// ex and g are set by the pipeline as it begins the line's exchange.
	ex *Exchange
	g  *Gateway
	// busy: the gateway had no capacity for the line (Exchange.Busy).
	busy bool
	// record is the line's ledger record, priced, once it was answered
	// (nil without a ledger); the dispatcher hands it to the result.
	record *ledger.Record
}

func withBatchRun(ctx context.Context, run *batchRun) context.Context {
	return context.WithValue(ctx, batchKey{}, run)
}

// beginBatch marks ex, just begun for r, as a batch's line when r comes
// from the dispatcher: the line's owner stands in for the Authenticator
// and its class of work is below every online class.
func (p *Pipeline) beginBatch(r *http.Request, ex *Exchange) {
	run, ok := r.Context().Value(batchKey{}).(*batchRun)
	if !ok {
		return
	}
	ex.batch, run.ex, run.g = run, ex, p.Gateway
}

// Batch is the id of the batch the request is a line of; "" for a
// client's request.
func (ex *Exchange) Batch() string {
	if ex.batch == nil {
		return ""
	}
	return ex.batch.id
}

// Busy reports whether the request is a batch's line refused for want of
// capacity (its model saturated, no replica up), not for anything of its
// own: it is to be tried again later.
func (ex *Exchange) Busy() bool { return ex.batch != nil && ex.batch.busy }

// batchLoad counts a model's batch lines on its replicas, from the
// routing stage to their answer.
type batchLoad struct{ running atomic.Int64 }

// BatchRunning is the number of batch lines on the model's replicas now.
func (m *Model) BatchRunning() int { return int(m.batch.running.Load()) }

// startBatch counts a batch line routed to m until the returned func.
func (g *Gateway) startBatch(m *Model) func() {
	m.batch.running.Add(1)
	g.Metrics.BatchRunning(m.Name, 1)
	return func() {
		m.batch.running.Add(-1)
		g.Metrics.BatchRunning(m.Name, -1)
	}
}

// batchOutcome is a line's outcome, for the metrics.
func batchOutcome(busy bool, status int) string {
	switch {
	case busy:
		return metrics.BatchDeferred
	case status >= 200 && status <= 299:
		return metrics.BatchCompleted
	}
	return metrics.BatchFailed
}
