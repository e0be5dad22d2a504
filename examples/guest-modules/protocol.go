package guests

import (
	"fmt"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/llmedge/llmedge/backends/protocols"
	"github.com/llmedge/llmedge/backends/protocols/openaicompat"
	"github.com/llmedge/llmedge/modules/llmprotocol"
)

func init() { caddy.RegisterModule(LMStudio{}) }

// LMStudio (llmedge.protocols.lmstudio) is LM Studio's local server
// (`lms server start`, port 1234 by default). Its chat API is OpenAI's, so
// the module embeds llmedge's OpenAI-compatible client and only describes
// the engine, which is what sets it apart from protocol openai:
//
//   - health: LM Studio documents no /health; its OpenAI-compatible
//     endpoints are GET /v1/models, POST /v1/chat/completions,
//     /v1/completions, /v1/embeddings and /v1/responses
//     (https://lmstudio.ai/docs/api/openai-api). GET /v1/models answers
//     200 with the loaded models whenever the server is up, so it is the
//     default health path. llmedge's prober sends no API key: on a server
//     that requires one, set health_path to a path that answers without.
//   - metrics: LM Studio serves no Prometheus endpoint, so the module
//     names no dialect and llmedge does not scrape its replicas (the
//     gateway's own in-flight counts stand in).
//
// A model chooses it for all its replicas, or a replica for itself with
// the "lmstudio+" prefix:
//
//	model llama {
//		static http://10.0.0.9:1234
//		protocol lmstudio {
//			health_path /v1/models
//		}
//	}
type LMStudio struct {
	// The chat client: llmedge's own for OpenAI-compatible servers, with
	// its defaults (its fields are not options of this module).
	openaicompat.Protocol `json:"-"`
	// HealthPath is GET-probed while the replica may serve; default
	// /v1/models.
	HealthPath string `json:"health_path,omitempty"`
}

// DefaultLMStudioHealthPath is the path LMStudio probes unless told
// otherwise.
const DefaultLMStudioHealthPath = "/v1/models"

// CaddyModule returns the Caddy module information.
func (LMStudio) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  llmprotocol.Namespace + ".lmstudio",
		New: func() caddy.Module { return new(LMStudio) },
	}
}

// Engine implements protocols.Describer: the health path, and no metrics.
func (p *LMStudio) Engine() protocols.Engine {
	path := p.HealthPath
	if path == "" {
		path = DefaultLMStudioHealthPath
	}
	return protocols.Engine{HealthPath: path}
}

// Validate checks the health path.
func (p *LMStudio) Validate() error {
	if p.HealthPath != "" && (!strings.HasPrefix(p.HealthPath, "/") || strings.ContainsAny(p.HealthPath, "?# ")) {
		return fmt.Errorf("lmstudio: health_path must be a path starting with / (no query), got %q", p.HealthPath)
	}
	return nil
}

// UnmarshalCaddyfile parses `protocol lmstudio [{ health_path <path> }]`.
func (p *LMStudio) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // the protocol's name
	if d.NextArg() {
		return d.ArgErr()
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		switch d.Val() {
		case "health_path":
			if !d.NextArg() {
				return d.Errf("lmstudio health_path: want a path")
			}
			p.HealthPath = d.Val()
			if d.NextArg() {
				return d.Errf("lmstudio health_path takes one path")
			}
		default:
			return d.Errf("unrecognized lmstudio option %q", d.Val())
		}
	}
	return p.Validate()
}

// Interface guards.
var (
	_ llmprotocol.Protocol  = (*LMStudio)(nil)
	_ protocols.Describer   = (*LMStudio)(nil)
	_ caddy.Validator       = (*LMStudio)(nil)
	_ caddyfile.Unmarshaler = (*LMStudio)(nil)
)
