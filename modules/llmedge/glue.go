package llmedge

import (
	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/llmedge/llmedge/gateway"
)

// NoArgs parses a directive that takes neither arguments nor a block.
func NoArgs(d *caddyfile.Dispenser) error {
	d.Next() // the directive's name
	name := d.Val()
	if d.NextArg() || d.NextBlock(0) {
		return d.Errf("%s takes no arguments", name)
	}
	return nil
}

// Handler is what each llmedge HTTP handler module is.
type Handler interface {
	caddyhttp.MiddlewareHandler
	caddyfile.Unmarshaler
}

// ParseCaddyfile is the directive parser of handler type T, for
// httpcaddyfile.RegisterHandlerDirective.
func ParseCaddyfile[T any, PT interface {
	*T
	Handler
}](h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	m := PT(new(T))
	return m, m.UnmarshalCaddyfile(h.Dispenser)
}

// PipelineFrom returns the inference pipeline of ctx's llmedge app.
func PipelineFrom(ctx caddy.Context) (*gateway.Pipeline, error) {
	app, err := FromContext(ctx)
	if err != nil {
		return nil, err
	}
	return app.Pipeline(), nil
}
