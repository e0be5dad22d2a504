package llmhandlers

import (
	"net"
	"net/http"
	"strings"
	"sync"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/modules/llmapp"
	"github.com/llmedge/llmedge/status"
)

func init() {
	caddy.RegisterModule(Status{})
	httpcaddyfile.RegisterHandlerDirective("llm_status", ParseCaddyfile[Status])
}

// Status is `llm_status`: the operators'
// status page (replicas, breakers, loads, rates, time to first token,
// tenants), its JSON snapshot and its live stream.
//
// The page shows replica addresses and user names, so by default it
// answers only requests made on the gateway's own machine: from a
// loopback address, to a loopback host name (the latter defeats DNS
// rebinding, as Caddy's admin endpoint does). `allow_remote` lifts both
// checks, for a site that authenticates its operators itself (basic_auth,
// client certificates, a private network).
//
// It serves the page under whatever path it is given: the page at any
// path, the snapshot at <path>/status.json, the stream at <path>/events.
// It always answers.
type Status struct {
	// AllowRemote answers requests from other machines too.
	AllowRemote bool `json:"allow_remote,omitempty"`

	page *status.Handler
}

// CaddyModule returns the Caddy module information.
func (Status) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "http.handlers.llm_status", New: func() caddy.Module { return new(Status) }}
}

// Provision looks up the llmedge app, and ends the page's streams when
// the server begins to shut down: a stream never ends by itself, and
// Caddy would wait for it through a whole reload's grace period.
func (h *Status) Provision(ctx caddy.Context) error {
	app, err := llmapp.FromContext(ctx)
	if err != nil {
		return err
	}
	done := make(chan struct{})
	if srv, ok := ctx.Value(caddyhttp.ServerCtxKey).(*caddyhttp.Server); ok {
		var once sync.Once
		srv.RegisterOnShutdown(func() { once.Do(func() { close(done) }) })
	}
	h.page = &status.Handler{Snapshot: app.StatusSnapshot, Done: merge(ctx.Done(), done)}
	return nil
}

// merge returns a channel closed when a or b is (the server shuts down,
// or the configuration ends).
func merge(a, b <-chan struct{}) <-chan struct{} {
	out := make(chan struct{})
	go func() {
		select {
		case <-a:
		case <-b:
		}
		close(out)
	}()
	return out
}

// ServeHTTP implements caddyhttp.MiddlewareHandler.
func (h *Status) ServeHTTP(w http.ResponseWriter, r *http.Request, _ caddyhttp.Handler) error {
	if !h.AllowRemote && !local(r) {
		api.CloseUnread(w, r)
		status.Error(w, http.StatusForbidden, "The llmedge status page answers only on the gateway's machine, to a loopback host name (see llm_status allow_remote)")
		return nil
	}
	h.page.ServeHTTP(w, r)
	return nil
}

// local reports whether r was made on this machine: from a loopback
// address (the client's, as Caddy determined it through trusted proxies),
// naming a loopback host.
func local(r *http.Request) bool {
	ip, _ := caddyhttp.GetVar(r.Context(), caddyhttp.ClientIPVarKey).(string)
	if ip == "" {
		ip, _, _ = net.SplitHostPort(r.RemoteAddr)
	}
	if a := net.ParseIP(ip); a == nil || !a.IsLoopback() {
		return false
	}
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.Trim(host, "[]"), ".")
	if a := net.ParseIP(host); a != nil {
		return a.IsLoopback()
	}
	return strings.EqualFold(host, "localhost") || strings.HasSuffix(strings.ToLower(host), ".localhost")
}

// UnmarshalCaddyfile parses
//
//	llm_status [<matcher>] {
//		allow_remote
//	}
func (h *Status) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next()
	if d.NextArg() {
		return d.Err("llm_status takes no arguments")
	}
	for d.NextBlock(0) {
		switch d.Val() {
		case "allow_remote":
			if d.NextArg() {
				return d.ArgErr()
			}
			h.AllowRemote = true
		default:
			return d.Errf("unrecognized llm_status option %q", d.Val())
		}
	}
	return nil
}

// Interface guards.
var (
	_ caddy.Provisioner           = (*Status)(nil)
	_ caddyhttp.MiddlewareHandler = (*Status)(nil)
	_ caddyfile.Unmarshaler       = (*Status)(nil)
)
