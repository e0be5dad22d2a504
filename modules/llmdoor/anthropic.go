package llmdoor

import (
	"net/http"

	"github.com/caddyserver/caddy/v2"

	"github.com/llmedge/llmedge/doors/anthropic"
	"github.com/llmedge/llmedge/gateway"
	"github.com/llmedge/llmedge/modules/llmapp"
)

func init() { caddy.RegisterModule(Anthropic{}) }

// Anthropic is Anthropic's Messages API: POST /v1/messages and POST
// /v1/messages/count_tokens. Each model's `anthropic` option says how its
// replicas get the requests (carried through, translated, or auto).
type Anthropic struct{ door *anthropic.Door }

// CaddyModule returns the Caddy module information.
func (Anthropic) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: Namespace + ".anthropic", New: func() caddy.Module { return new(Anthropic) }}
}

// Provision takes the models, their modes and the limits of the llmedge
// app.
func (a *Anthropic) Provision(ctx caddy.Context) error {
	app, err := llmapp.FromContext(ctx)
	if err != nil {
		return err
	}
	modes := make(map[string]anthropic.Mode, len(app.Models))
	for _, m := range app.Models {
		mode, err := anthropic.ParseMode(m.Anthropic)
		if err != nil {
			return err
		}
		modes[m.Name] = mode
		for _, al := range m.Aliases {
			modes[al] = mode // the door reads the body before the pipeline resolves an alias
		}
	}
	v := app.Validator()
	a.door = anthropic.New(v.Limits, v.Models, modes).WithNames(v.Names)
	return nil
}

// Codec implements Door.
func (a *Anthropic) Codec() gateway.Door { return a.door }

// Mount implements Door.
func (a *Anthropic) Mount(p *gateway.Pipeline, done func(*http.Request, *gateway.Exchange)) gateway.Mount {
	return anthropic.NewMount(p, a.door, done)
}

// Interface guards.
var (
	_ Door              = (*Anthropic)(nil)
	_ caddy.Provisioner = (*Anthropic)(nil)
)
