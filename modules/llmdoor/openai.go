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

// Provision takes the models, their modes for the Responses API
// (/v1/responses: each model's `responses` option) and the limits of the
// llmedge app.
func (o *OpenAI) Provision(ctx caddy.Context) error {
	app, err := llmapp.FromContext(ctx)
	if err != nil {
		return err
	}
	modes := make(map[string]openai.ResponsesMode, len(app.Models))
	for _, m := range app.Models {
		mode, err := openai.ParseResponsesMode(m.Responses)
		if err != nil {
			return err
		}
		modes[m.Name] = mode
		for _, al := range m.Aliases {
			modes[al] = mode // the door reads the body before the pipeline resolves an alias
		}
	}
	v := app.Validator()
	o.door = openai.New(v.Limits, v.Models).WithAliases(v.Aliases).WithNames(v.Names).WithResponsesModes(modes)
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
