package llmadmin

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/llmedge/llmedge/modules/llmapp"
)

func init() {
	caddy.RegisterModule(RevokeAdminAPI{})
}

// RevokeAdminAPI adds token revocation to Caddy's admin API (with its
// protections: localhost by default, Host and Origin checked):
//
//	POST /llmedge/revoke   {"user":"alice"} refuses every token issued to
//	                       alice until now; {"token":"<jwt or jti>"} one token
//
// It answers 200 with what was revoked, or 503 when the revocation holds
// on this instance but could not be shared with the others (retry).
type RevokeAdminAPI struct{}

// CaddyModule returns the Caddy module information.
func (RevokeAdminAPI) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "admin.api.llmedge_revoke", New: func() caddy.Module { return new(RevokeAdminAPI) }}
}

// Routes implements caddy.AdminRouter.
func (RevokeAdminAPI) Routes() []caddy.AdminRoute {
	return []caddy.AdminRoute{{Pattern: "/llmedge/revoke", Handler: caddy.AdminHandlerFunc(adminRevoke)}}
}

// revokeRequest is the body of POST /llmedge/revoke: one of the fields.
type revokeRequest struct {
	User  string `json:"user"`
	Token string `json:"token"`
}

func adminRevoke(w http.ResponseWriter, r *http.Request) error {
	if r.Method != http.MethodPost {
		return caddy.APIError{HTTPStatus: http.StatusMethodNotAllowed, Err: fmt.Errorf("method not allowed")}
	}
	var req revokeRequest
	dec := json.NewDecoder(io.LimitReader(r.Body, 64<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return caddy.APIError{HTTPStatus: http.StatusBadRequest, Err: fmt.Errorf(`want {"user":"<name>"} or {"token":"<token or jti>"}: %w`, err)}
	}
	if (req.User == "") == (req.Token == "") {
		return caddy.APIError{HTTPStatus: http.StatusBadRequest, Err: errors.New(`want exactly one of "user" and "token"`)}
	}
	v, err := caddy.ActiveContext().AppIfConfigured("llmedge")
	if err != nil {
		return caddy.APIError{HTTPStatus: http.StatusNotFound, Err: fmt.Errorf("no llmedge app is running: %w", err)}
	}
	app := v.(*llmapp.App)
	out := map[string]any{}
	var shareErr error
	if req.User != "" {
		before, err := app.Tenancy().RevokeUser(r.Context(), req.User, "user")
		out["user"], out["issued_before"], shareErr = req.User, before.UTC().Format(time.RFC3339), err
	} else {
		jti, exp := tokenID(req.Token)
		expires, err := app.Tenancy().RevokeToken(r.Context(), jti, exp)
		out["jti"], out["until"], shareErr = jti, expires.UTC().Format(time.RFC3339), err
	}
	if shareErr != nil {
		return caddy.APIError{HTTPStatus: http.StatusServiceUnavailable,
			Err: fmt.Errorf("revoked on this instance, but not shared with the others (retry): %w", shareErr)}
	}
	w.Header().Set("Content-Type", "application/json")
	return json.NewEncoder(w).Encode(out)
}

// tokenID reads the jti and expiry of a JWT without verifying it (revoking
// a forged token harms nothing); anything else is taken as a jti, with no
// known expiry.
func tokenID(token string) (jti string, exp time.Time) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return token, time.Time{}
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return token, time.Time{}
	}
	var c struct {
		JTI string  `json:"jti"`
		Exp float64 `json:"exp"`
	}
	if json.Unmarshal(payload, &c) != nil || c.JTI == "" {
		return token, time.Time{}
	}
	if c.Exp > 0 {
		exp = time.Unix(int64(c.Exp), 0)
	}
	return c.JTI, exp
}

var _ caddy.AdminRouter = RevokeAdminAPI{}
