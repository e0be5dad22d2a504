package llmadmin

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/llmedge/llmedge/ledger"
	"github.com/llmedge/llmedge/modules/llmapp"
)

// UsageResponse is GET /llmedge/usage's answer: the ledger's sums, by the
// grouping asked for (one total without one).
type UsageResponse struct {
	By    ledger.Group `json:"by,omitempty"`
	Usage []ledger.Sum `json:"usage"`
	// Dropped is how many records the answering gateway dropped since it
	// loaded its configuration (its buffer full while the database
	// lagged): the sums lack them.
	Dropped uint64 `json:"dropped,omitempty"`
}

// usage serves GET /llmedge/usage?user=&model=&since=&until=&by=.
func usage(w http.ResponseWriter, r *http.Request) error {
	if r.Method != http.MethodGet {
		return caddy.APIError{HTTPStatus: http.StatusMethodNotAllowed, Err: fmt.Errorf("method not allowed")}
	}
	f, err := ledger.FilterFromQuery(r.URL.Query(), time.Now())
	if err != nil {
		return caddy.APIError{HTTPStatus: http.StatusBadRequest, Err: err}
	}
	app, err := runningApp()
	if err != nil {
		return err
	}
	sums, err := app.Usage(r.Context(), f)
	switch {
	case errors.Is(err, llmapp.ErrNoLedger):
		return caddy.APIError{HTTPStatus: http.StatusNotFound, Err: err}
	case err != nil:
		return caddy.APIError{HTTPStatus: http.StatusInternalServerError, Err: err}
	}
	if sums == nil {
		sums = []ledger.Sum{}
	}
	w.Header().Set("Content-Type", "application/json")
	return json.NewEncoder(w).Encode(UsageResponse{By: f.By, Usage: sums, Dropped: app.LedgerDropped()})
}
