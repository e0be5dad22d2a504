package llmadmin

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/caddyserver/caddy/v2"

	"github.com/llmedge/llmedge/batch"
)

func init() {
	caddy.RegisterModule(BatchesAdmin{})
}

// BatchesAdmin serves the operator's view of the Batch API on Caddy's
// admin endpoint, over every owner (batch.API.ServeAdmin):
//
//	GET  /llmedge/batches               every batch, newest first (after, limit, subject, provider)
//	GET  /llmedge/batches/<id>          one batch, with its owner
//	POST /llmedge/batches/<id>/cancel   cancel it
//	GET  /llmedge/files                 every file (purpose, after, limit, order, subject, provider)
//	GET  /llmedge/files/<id>            one file's metadata (never its content)
type BatchesAdmin struct{}

// CaddyModule returns the Caddy module information.
func (BatchesAdmin) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "admin.api.llmedge_batches", New: func() caddy.Module { return new(BatchesAdmin) }}
}

// Routes implements caddy.AdminRouter.
func (BatchesAdmin) Routes() []caddy.AdminRoute {
	h := batchesAdmin(runningBatches)
	return []caddy.AdminRoute{
		{Pattern: "/llmedge/batches", Handler: h},
		{Pattern: "/llmedge/batches/", Handler: h},
		{Pattern: "/llmedge/files", Handler: h},
		{Pattern: "/llmedge/files/", Handler: h},
	}
}

// batchesAdmin serves the routes with the API find returns.
func batchesAdmin(find func() (*batch.API, error)) caddy.AdminHandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		api, err := find()
		if err != nil {
			return err
		}
		if !api.ServeAdmin(w, r) {
			return caddy.APIError{HTTPStatus: http.StatusNotFound, Err: fmt.Errorf("no such route: %s", r.URL.Path)}
		}
		return nil
	}
}

// batchAPIer is the running app when it runs batches.
type batchAPIer interface {
	// BatchAPI is the app's Batch API, nil when batches are not
	// configured.
	BatchAPI() *batch.API
}

// errNoBatches answers the routes of a gateway that runs no batches.
var errNoBatches = errors.New("batches are not configured on this gateway")

// runningBatches is the running app's Batch API.
func runningBatches() (*batch.API, error) {
	app, err := runningApp()
	if err != nil {
		return nil, err
	}
	if b, ok := any(app).(batchAPIer); ok {
		if api := b.BatchAPI(); api != nil {
			return api, nil
		}
	}
	return nil, caddy.APIError{HTTPStatus: http.StatusNotFound, Err: errNoBatches}
}

var _ caddy.AdminRouter = BatchesAdmin{}
