package llmdoor

import (
	"net/http"

	"github.com/caddyserver/caddy/v2"

	"github.com/llmedge/llmedge/doors/native"
	"github.com/llmedge/llmedge/gateway"
	"github.com/llmedge/llmedge/modules/llmapp"
)

func init() { caddy.RegisterModule(Native{}) }

// Native is llmedge's own API: POST /tasks/assistant_inference.
type Native struct{ door native.Door }

// CaddyModule returns the Caddy module information.
func (Native) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: Namespace + ".native", New: func() caddy.Module { return new(Native) }}
}

// Provision takes the models and limits of the llmedge app.
func (n *Native) Provision(ctx caddy.Context) error {
	app, err := llmapp.FromContext(ctx)
	if err != nil {
		return err
	}
	n.door = native.Door{Validator: app.Validator()}
	return nil
}

// Codec implements Door.
func (n *Native) Codec() gateway.Door { return n.door }

// Mount implements Door.
func (n *Native) Mount(p *gateway.Pipeline, done func(*http.Request, *gateway.Exchange)) gateway.Mount {
	return native.NewMount(p, n.door, done)
}

// Interface guards.
var (
	_ Door              = (*Native)(nil)
	_ caddy.Provisioner = (*Native)(nil)
)
