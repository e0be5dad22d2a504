package llmapp

import (
	"fmt"
	"strconv"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/llmedge/llmedge/boundary/reserve"
)

// CapsConfig are the options that bound one request's shape, in a model
// block and in a tier block (boundary/reserve.Caps):
//
//	max_generations   <n>|off   # n, best_of; model default 16, off (or 0): the engine's own
//	max_prompt_tokens <n>|off   # the prompt's estimated tokens, every prompt of a batch
type CapsConfig struct {
	// MaxGenerations bounds n and best_of; nil takes the default in a
	// model (reserve.DefaultMaxGenerations) and nothing in a tier; 0
	// leaves them to the engine.
	MaxGenerations *int `json:"max_generations,omitempty"`
	// MaxPromptTokens bounds the prompt's estimate; 0: no bound.
	MaxPromptTokens int `json:"max_prompt_tokens,omitempty"`
}

// parseCapsOption reads opt when it is one of the caps, and reports
// whether it was.
func parseCapsOption(d *caddyfile.Dispenser, what, opt string, c *CapsConfig) (bool, error) {
	var dst *int
	switch opt {
	case "max_generations":
		c.MaxGenerations = new(int)
		dst = c.MaxGenerations
	case "max_prompt_tokens":
		dst = &c.MaxPromptTokens
	default:
		return false, nil
	}
	var v string
	if err := oneString(d, &v); err != nil {
		return true, err
	}
	if v == "off" {
		*dst = 0
		return true, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return true, d.Errf("%s: %s: want a whole number ≥ 0, or off, got %q", what, opt, v)
	}
	*dst = n
	return true, nil
}

// validate refuses negative caps (JSON configuration can say anything).
func (c CapsConfig) validate(what string) error {
	if c.MaxGenerations != nil && *c.MaxGenerations < 0 {
		return fmt.Errorf("%s: max_generations must be 0 (off) or more, got %d", what, *c.MaxGenerations)
	}
	if c.MaxPromptTokens < 0 {
		return fmt.Errorf("%s: max_prompt_tokens must be 0 (off) or more, got %d", what, c.MaxPromptTokens)
	}
	return nil
}

// caps are the bounds c sets; def is the generations' when c sets none.
func (c CapsConfig) caps(def int) reserve.Caps {
	g := def
	if c.MaxGenerations != nil {
		g = *c.MaxGenerations
	}
	return reserve.Caps{MaxGenerations: g, MaxPromptTokens: c.MaxPromptTokens}
}

// tierCaps are the tiers' caps, for those that set any.
func (a *App) tierCaps() map[string]reserve.Caps {
	var out map[string]reserve.Caps
	for name, t := range a.Tiers {
		if c := t.CapsConfig.caps(0); c != (reserve.Caps{}) {
			if out == nil {
				out = map[string]reserve.Caps{}
			}
			out[name] = c
		}
	}
	return out
}
