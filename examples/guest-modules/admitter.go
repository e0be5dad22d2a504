package guests

import (
	"context"
	"fmt"
	"net/http"
	"strconv"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/limits"
	"github.com/llmedge/llmedge/modules/llmadmitter"
	"github.com/llmedge/llmedge/tenancy"
)

func init() { caddy.RegisterModule(PromptCap{}) }

// PromptCap (llmedge.admitters.prompt_cap) refuses, before any replica
// sees it, a request whose prompt is too long for the model to take: 413
// with a detail that names the estimate and the cap, in the shape of the
// door the client called. Replicas are spared prompts they would refuse or
// truncate after queueing and prefilling them, and a client gets a clear
// answer at once.
//
// The prompt's size is llmedge's own estimate, the one the tenants' token
// limits reserve (limits.EstimateTokens: a token per 3 bytes of the prompt
// as the replica receives it, system message included, plus 4 a message
// and 3 for the reply's priming). It errs high on purpose (real tokenizers
// average about 4 bytes of English a token), so leave the cap some room
// below the model's context length. A request within the cap is admitted
// with no ticket: the cap holds nothing to give back.
//
//	llmedge {
//		admitter prompt_cap {
//			max_prompt_tokens 6000     # every model
//			model gemma 3000           # gemma's own
//		}
//		admitter limits              # the tenants' limits, asked next
//		...
//	}
type PromptCap struct {
	// MaxPromptTokens caps every model without a cap of its own; 0 leaves
	// them uncapped.
	MaxPromptTokens int `json:"max_prompt_tokens,omitempty"`
	// Models are caps by model name.
	Models map[string]int `json:"models,omitempty"`
}

// CaddyModule returns the Caddy module information.
func (PromptCap) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  llmadmitter.Namespace + ".prompt_cap",
		New: func() caddy.Module { return new(PromptCap) },
	}
}

// Validate checks that some cap is set and every cap is positive.
func (p *PromptCap) Validate() error {
	if p.MaxPromptTokens < 0 {
		return fmt.Errorf("prompt_cap: max_prompt_tokens must be at least 1, got %d", p.MaxPromptTokens)
	}
	for m, n := range p.Models {
		if n < 1 {
			return fmt.Errorf("prompt_cap: model %s: the cap must be at least 1, got %d", m, n)
		}
	}
	if p.MaxPromptTokens == 0 && len(p.Models) == 0 {
		return fmt.Errorf("prompt_cap: no cap configured (max_prompt_tokens or model <name> <n>)")
	}
	return nil
}

// Admitter implements llmadmitter.Admitter.
func (p *PromptCap) Admitter(llmadmitter.Env) (tenancy.Admitter, error) {
	return promptCap{def: p.MaxPromptTokens, models: p.Models}, nil
}

// UnmarshalCaddyfile parses
//
//	admitter prompt_cap {
//		max_prompt_tokens <n>
//		model <name> <n>
//	}
func (p *PromptCap) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // the admitter's name
	if d.NextArg() {
		return d.ArgErr()
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		switch d.Val() {
		case "max_prompt_tokens":
			args := d.RemainingArgs()
			n, err := positive(args, 1)
			if err != nil {
				return d.Errf("prompt_cap max_prompt_tokens: %v", err)
			}
			p.MaxPromptTokens = n
		case "model":
			args := d.RemainingArgs()
			if len(args) != 2 {
				return d.Errf("prompt_cap model: want <name> <n>")
			}
			n, err := positive(args[1:], 1)
			if err != nil {
				return d.Errf("prompt_cap model %s: %v", args[0], err)
			}
			if p.Models == nil {
				p.Models = map[string]int{}
			}
			p.Models[args[0]] = n
		default:
			return d.Errf("unrecognized prompt_cap option %q", d.Val())
		}
	}
	return p.Validate()
}

// positive reads the one argument in args as a whole number ≥ min.
func positive(args []string, least int) (int, error) {
	if len(args) != 1 {
		return 0, fmt.Errorf("want one number")
	}
	n, err := strconv.Atoi(args[0])
	if err != nil || n < least {
		return 0, fmt.Errorf("want a whole number ≥ %d, got %q", least, args[0])
	}
	return n, nil
}

// promptCap is the admission rule (tenancy.Admitter).
type promptCap struct {
	def    int
	models map[string]int
}

// Admit implements tenancy.Admitter.
func (c promptCap) Admit(_ context.Context, a *tenancy.Admission, _ http.Header) (tenancy.Ticket, *api.Error) {
	limit, ok := c.models[a.Model]
	if !ok {
		limit = c.def
	}
	if limit == 0 {
		return nil, nil
	}
	if est := limits.EstimateTokens(a.PromptBytes, a.Messages); est > limit {
		return nil, &api.Error{
			Status: http.StatusRequestEntityTooLarge,
			Detail: "Prompt too long for model '" + a.Model + "': about " + strconv.Itoa(est) +
				" tokens by the gateway's estimate; the cap is " + strconv.Itoa(limit) + " prompt tokens",
			Code: "prompt_too_long", Param: "messages",
		}
	}
	return nil, nil
}

// Interface guards.
var (
	_ llmadmitter.Admitter  = (*PromptCap)(nil)
	_ caddy.Validator       = (*PromptCap)(nil)
	_ caddyfile.Unmarshaler = (*PromptCap)(nil)
	_ tenancy.Admitter      = promptCap{}
)
