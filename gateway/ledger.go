package gateway

import (
	"time"

	"github.com/llmedge/llmedge/ledger"
)

// recordLedger hands the usage ledger the record of ex. Only requests
// with a credential are recorded: one refused before it (401) is nobody's
// usage, and recording them would let anyone fill the ledger. The record
// is copied into the writer's current batch: nothing is allocated, and
// nothing waits for the database.
func (g *Gateway) recordLedger(ex *Exchange) {
	if g.Ledger == nil || ex.Principal == nil {
		return
	}
	g.Ledger.Add(ledger.Record{
		Time: ex.Start, RequestID: ex.RequestID,
		User: ex.Principal.Subject, KeyID: ex.Principal.KeyID, Team: ex.Team,
		Model: ex.Model(), Alias: ex.Chat.Asked, Replica: ex.Replica, Door: ex.Door.Name(), Status: ex.Status,
		PromptTokens: ex.Usage.PromptTokens, CachedTokens: ex.Usage.CachedTokens, CompletionTokens: ex.Usage.CompletionTokens,
		TTFT: ex.TTFT, Duration: time.Since(ex.Start),
	})
}
