package openai

import (
	"net/http"
	"strings"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/gateway"
)

// isBatchPath reports whether path is one of the Files or Batches API's.
func isBatchPath(path string) bool {
	for _, p := range [...]string{PathFiles, PathBatches} {
		if path == p || strings.HasPrefix(path, p+"/") {
			return true
		}
	}
	return false
}

// serveBatches serves the Files and Batches API to the credential that
// authenticates, as the owner of what it creates: 404 in OpenAI's shape
// when the configuration runs no batches.
func (a *Mount) serveBatches(w http.ResponseWriter, r *http.Request) {
	ex, ok := a.pipeline.Identify(w, r, a.door)
	if a.done != nil {
		defer a.done(r, ex)
	}
	if !ok {
		return
	}
	if b := a.pipeline.Batches; b != nil && b.Serve(w, r, gateway.BatchOwner(ex)) {
		return
	}
	if a.pipeline.Batches == nil {
		api.CloseUnread(w, r)
		writeError(w, api.NewError(http.StatusNotFound,
			"The Files and Batches API is not enabled on this gateway (its operator turns it on with the batches option)"))
		return
	}
	a.NotFound(w, r)
}
