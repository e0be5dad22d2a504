package llmadmin

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/caddyserver/caddy/v2"

	"github.com/llmedge/llmedge/modules/llmapp"
)

func init() {
	caddy.RegisterModule(AdminAPI{})
}

// AdminAPI adds llmedge's endpoints to Caddy's admin API, with its
// protections (by default it listens on localhost only, and checks Host
// and Origin):
//
//	POST   /llmedge/rotate-keys      make a new signing key now
//	POST   /llmedge/keys             create an API key (answers it, once)
//	GET    /llmedge/keys             list API keys (never the keys)
//	DELETE /llmedge/keys/<id|name>   revoke an API key
//	GET    /llmedge/usage            the usage ledger's sums (user, model, since, until, by)
type AdminAPI struct{}

// CaddyModule returns the Caddy module information.
func (AdminAPI) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "admin.api.llmedge", New: func() caddy.Module { return new(AdminAPI) }}
}

// Routes implements caddy.AdminRouter.
func (AdminAPI) Routes() []caddy.AdminRoute {
	return []caddy.AdminRoute{
		{Pattern: "/llmedge/rotate-keys", Handler: caddy.AdminHandlerFunc(rotateKeys)},
		{Pattern: "/llmedge/keys", Handler: caddy.AdminHandlerFunc(apiKeysCollection)},
		{Pattern: "/llmedge/keys/", Handler: caddy.AdminHandlerFunc(apiKeyItem)},
		{Pattern: "/llmedge/usage", Handler: caddy.AdminHandlerFunc(usage)},
	}
}

func rotateKeys(w http.ResponseWriter, r *http.Request) error {
	if r.Method != http.MethodPost {
		return caddy.APIError{HTTPStatus: http.StatusMethodNotAllowed, Err: fmt.Errorf("method not allowed")}
	}
	app, err := runningApp()
	if err != nil {
		return err
	}
	ring, err := app.Credentials().RotateKeys(r.Context())
	if err != nil {
		return caddy.APIError{HTTPStatus: http.StatusInternalServerError, Err: err}
	}
	w.Header().Set("Content-Type", "application/json")
	return json.NewEncoder(w).Encode(map[string]any{"active_kid": ring.ActiveKID(), "kids": ring.KIDs()})
}

// runningApp is the llmedge app of the running configuration.
func runningApp() (*llmapp.App, error) {
	v, err := caddy.ActiveContext().AppIfConfigured("llmedge")
	if err != nil {
		return nil, caddy.APIError{HTTPStatus: http.StatusNotFound, Err: fmt.Errorf("no llmedge app is running: %w", err)}
	}
	return v.(*llmapp.App), nil
}

var _ caddy.AdminRouter = AdminAPI{}
