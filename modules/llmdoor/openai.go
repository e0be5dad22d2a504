package llmdoor

import (
	"net/http"

	"github.com/caddyserver/caddy/v2"

	"github.com/llmedge/llmedge/doors/openai"
	"github.com/llmedge/llmedge/gateway"
	"github.com/llmedge/llmedge/modules/llmapp"
)

func init() { caddy.RegisterModule(OpenAI{}) }

// OpenAI is OpenAI's API: POST /v1/chat/completions, GET /v1/models and
// GET /v1/models/{id}.
type OpenAI struct{ door *openai.Door }

// CaddyModule returns the Caddy module information.
func (OpenAI) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: Namespace + ".openai", New: func() caddy.Module { return new(OpenAI) }}
}

// Provision takes the models and limits of the llmedge app.
func (o *OpenAI) Provision(ctx caddy.Context) error {
	app, err := llmapp.FromContext(ctx)
	if err != nil {
		return err
	}
	v := app.Validator()
	o.door = openai.New(v.Limits, v.Models).WithAliases(v.Aliases).WithNames(v.Names)
	return nil
}

// Codec implements Door.
func (o *OpenAI) Codec() gateway.Door { return o.door }

// Mount implements Door.
func (o *OpenAI) Mount(p *gateway.Pipeline, done func(*http.Request, *gateway.Exchange)) gateway.Mount {
	return openai.NewMount(p, o.door, done)
}

// Interface guards.
var (
	_ Door              = (*OpenAI)(nil)
	_ caddy.Provisioner = (*OpenAI)(nil)
)
