package llmadmin

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/caddyserver/caddy/v2"

	"github.com/llmedge/llmedge/gateway"
	"github.com/llmedge/llmedge/modules/llmapp"
	"github.com/llmedge/llmedge/status"
)

func init() {
	caddy.RegisterModule(StatusAdmin{})
}

// StatusAdmin serves the status page's data on Caddy's admin endpoint,
// for scripts and tools on the gateway's machine:
//
//	GET /llmedge/status.json     the current snapshot
//	GET /llmedge/status/events   a snapshot a second, as server-sent events
//	GET /llmedge/readyz          the readiness report: every check, every
//	                             model's state and the reasons (200 ready,
//	                             503 not), which the public /readyz omits
//
// The page itself is served by the llm_status handler: Caddy's admin
// endpoint refuses a browser's navigation (it sends Sec-Fetch-Mode without
// an Origin, which the endpoint's cross-site checks reject), so a page
// there could never be opened.
type StatusAdmin struct {
	done <-chan struct{}
}

// CaddyModule returns the Caddy module information.
func (StatusAdmin) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "admin.api.llmedge_status", New: func() caddy.Module { return new(StatusAdmin) }}
}

// Provision keeps the configuration's end: streams end with it, so that
// the admin endpoint it replaces shuts down at once.
func (s *StatusAdmin) Provision(ctx caddy.Context) error {
	s.done = ctx.Done()
	return nil
}

// Routes implements caddy.AdminRouter.
func (s *StatusAdmin) Routes() []caddy.AdminRoute {
	h := &status.Handler{Snapshot: activeSnapshot, Done: s.done, NoPage: true}
	serve := caddy.AdminHandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		h.ServeHTTP(w, r)
		return nil
	})
	ready := caddy.AdminHandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			return caddy.APIError{HTTPStatus: http.StatusMethodNotAllowed, Err: fmt.Errorf("method %s not allowed", r.Method)}
		}
		g := activeGateway()
		if g == nil {
			return caddy.APIError{HTTPStatus: http.StatusNotFound, Err: errors.New("no llmedge app in the running configuration")}
		}
		g.ServeReport(w, r)
		return nil
	})
	return []caddy.AdminRoute{
		{Pattern: "/llmedge/readyz", Handler: ready},
		{Pattern: "/llmedge/" + status.JSONPath, Handler: serve},
		{Pattern: "/llmedge/status/" + status.EventsPath, Handler: serve},
	}
}

// activeSnapshot is the snapshot of the running configuration's llmedge
// app, nil when it has none.
func activeSnapshot() *status.Snapshot {
	v, err := caddy.ActiveContext().AppIfConfigured("llmedge")
	if err != nil {
		return nil
	}
	return v.(*llmapp.App).StatusSnapshot()
}

// activeGateway is the running configuration's gateway, nil when it has
// no llmedge app.
func activeGateway() *gateway.Gateway {
	v, err := caddy.ActiveContext().AppIfConfigured("llmedge")
	if err != nil {
		return nil
	}
	if p := v.(*llmapp.App).Pipeline(); p != nil {
		return p.Gateway
	}
	return nil
}

var (
	_ caddy.AdminRouter = (*StatusAdmin)(nil)
	_ caddy.Provisioner = (*StatusAdmin)(nil)
)
