package gateway

import (
	"time"

	"github.com/llmedge/llmedge/ledger"
	"github.com/llmedge/llmedge/metrics"
)

// recordLedger hands the usage ledger the record of ex. Only requests
// that passed authentication and admission are recorded, so that nobody
// writes rows faster than its limits admit requests: one refused before
// (no credential, a body reset or refused before it was read, a scope, a
// limit) is counted in llmedge_ledger_unrecorded_total by reason instead.
// The record is copied into the writer's current batch: nothing is
// allocated, and nothing waits for the database.
func (g *Gateway) recordLedger(ex *Exchange) {
	if g.Ledger == nil {
		return
	}
	if ex.Principal == nil || !ex.admitted {
		g.Metrics.LedgerUnrecorded(unrecordedReason(ex))
		return
	}
	if ex.Busy() {
		return // a batch's line put off for capacity: its record is the run that answers it
	}
	rec := ledger.Record{
		Time: ex.Start, RequestID: ex.RequestID, ClientRequestID: ex.ClientRequestID,
		User: ex.Principal.Subject, KeyID: ex.Principal.KeyID, Team: ex.Team,
		Model: ex.Model(), Alias: ex.Chat.Asked, ServedModel: ex.ServedModel(), Replica: ex.Replica, Door: ex.Door.Name(), Status: ex.Status,
		PromptTokens: ex.Usage.PromptTokens, CachedTokens: ex.Usage.CachedTokens, CompletionTokens: ex.Usage.CompletionTokens,
		TTFT: ex.TTFT, Duration: time.Since(ex.Start), Batch: ex.Batch(),
	}
	if ex.batch != nil {
		// A batch line's record is written with its result, in one
		// transaction, so that a line has one record however often it
		// ran (an instance killed between the two would lose it, or a
		// rerun write a second one).
		ex.batch.record = g.Ledger.Priced(rec)
		return
	}
	g.Ledger.Add(rec)
}

// unrecordedReason is why ex, refused before admission, is not recorded.
// A refusal is observed before the pipeline marks it answered, so its
// stage is the last one it passed.
func unrecordedReason(ex *Exchange) string {
	switch {
	case ex.Principal == nil:
		return metrics.UnrecordedUnauthenticated
	case ex.Stage < StageDecoded:
		return metrics.UnrecordedBeforeBody
	}
	return metrics.UnrecordedRefused
}

// ServedModel is the model whose replicas answered the request: the
// fallback that served in the place of the model asked for, the share of
// its rollout, or the model itself; "" before the body is decoded. Its
// price is what the ledger and the cost budgets charge.
func (ex *Exchange) ServedModel() string {
	switch {
	case ex.Fallback != "":
		return ex.Fallback
	case ex.Rollout != "":
		return ex.Rollout
	}
	return ex.Model()
}
