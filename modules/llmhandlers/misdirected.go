package llmhandlers

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/gateway"
	"github.com/llmedge/llmedge/modules/llmapp"
	"github.com/llmedge/llmedge/modules/llmdoor"
)

func init() {
	caddy.RegisterModule(Misdirected{})
	httpcaddyfile.RegisterHandlerDirective("llm_misdirected", ParseCaddyfile[Misdirected])
}

// CodeMisdirected is the machine-readable code of the answer, for doors
// whose errors carry one (OpenAI's).
const CodeMisdirected = "misdirected_request"

// Misdirected is `llm_misdirected`: the answer of a catch-all site to a
// request whose host no site serves (a Host header or an absolute-form
// URI naming another host): 421 Misdirected Request (RFC 9110 §15.5.20)
// in the API's JSON shape, the door's under its path prefix (OpenAI's
// under /v1/), FastAPI's elsewhere, instead of Caddy's empty 200. The
// body is never read, and an HTTP/1 connection is closed after the
// answer.
type Misdirected struct {
	// Status is the answer's status: 421 (default) or 404.
	Status int `json:"status,omitempty"`

	doors []misdirectedDoor
}

type misdirectedDoor struct {
	prefix string
	codec  gateway.Door
}

// CaddyModule returns the Caddy module information.
func (Misdirected) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "http.handlers.llm_misdirected", New: func() caddy.Module { return new(Misdirected) }}
}

// Provision loads every door, for its prefix and its error shape.
func (h *Misdirected) Provision(ctx caddy.Context) error {
	if h.Status == 0 {
		h.Status = http.StatusMisdirectedRequest
	}
	app, err := llmapp.FromContext(ctx)
	if err != nil {
		return err
	}
	for _, name := range llmdoor.Names() {
		d, err := llmdoor.Load(ctx, name)
		if err != nil {
			return fmt.Errorf("door %q: %w", name, err)
		}
		h.doors = append(h.doors, misdirectedDoor{prefix: d.Mount(app.Pipeline(), nil).Prefix(), codec: d.Codec()})
	}
	return nil
}

// Validate checks Status.
func (h *Misdirected) Validate() error {
	if h.Status != http.StatusMisdirectedRequest && h.Status != http.StatusNotFound {
		return fmt.Errorf("llm_misdirected: status must be 421 or 404, not %d", h.Status)
	}
	return nil
}

// ServeHTTP implements caddyhttp.MiddlewareHandler.
func (h *Misdirected) ServeHTTP(w http.ResponseWriter, r *http.Request, _ caddyhttp.Handler) error {
	e := &api.Error{Status: h.Status, Code: CodeMisdirected,
		Detail: "This server does not serve the host " + quoteHost(r.Host) + ": send the request to the host it is addressed to"}
	if h.Status == http.StatusNotFound {
		e.Code, e.Detail = "not_found", "Not Found: no site for the host "+quoteHost(r.Host)
	}
	api.CloseUnread(w, r)
	for _, d := range h.doors {
		if strings.HasPrefix(r.URL.Path, d.prefix) {
			d.codec.WriteError(w, e)
			return nil
		}
	}
	e.Write(w)
	return nil
}

// quoteHost names the host in an answer: quoted, at most 100 bytes,
// printable ASCII only.
func quoteHost(h string) string {
	if len(h) > 100 {
		h = h[:100] + "..."
	}
	b := []byte(h)
	for i, c := range b {
		if c < 0x20 || c > 0x7e || c == '\'' || c == '"' || c == '\\' {
			b[i] = '?'
		}
	}
	return "'" + string(b) + "'"
}

// UnmarshalCaddyfile parses `llm_misdirected [421|404]`.
func (h *Misdirected) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next()
	if d.NextArg() {
		switch d.Val() {
		case "421":
			h.Status = http.StatusMisdirectedRequest
		case "404":
			h.Status = http.StatusNotFound
		default:
			return d.Errf("llm_misdirected: status must be 421 or 404, not %q", d.Val())
		}
	}
	if d.NextArg() || d.NextBlock(0) {
		return d.Err("llm_misdirected takes one optional argument: 421 or 404")
	}
	return nil
}

// Interface guards.
var (
	_ caddy.Provisioner           = (*Misdirected)(nil)
	_ caddy.Validator             = (*Misdirected)(nil)
	_ caddyhttp.MiddlewareHandler = (*Misdirected)(nil)
	_ caddyfile.Unmarshaler       = (*Misdirected)(nil)
)
