package gateway

import (
	"net/http"
	"slices"

	"github.com/llmedge/llmedge/batch"
)

// BatchAPI serves OpenAI's Files and Batches API (batch.API) to an
// authenticated owner; it reports false for a path that is not its own.
type BatchAPI interface {
	Serve(w http.ResponseWriter, r *http.Request, o batch.Owner) bool
}

// BatchOwner is the owner of what ex's credential creates through the
// Batch API: enough of the principal to run the batch's lines as it later,
// on any instance, after its token expired.
func BatchOwner(ex *Exchange) batch.Owner {
	p := ex.Principal
	if p == nil {
		return batch.Owner{}
	}
	return batch.Owner{
		Subject:  p.Subject,
		Provider: p.Provider,
		KeyID:    p.KeyID,
		Team:     ex.Team,
		Tier:     p.Tier,
		Scopes:   slices.Clone(p.Scopes),
	}
}
