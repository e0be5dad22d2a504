package llmapp

import (
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/llmedge/llmedge/boundary/reserve"
)

// TestCapsCaddyfile: max_generations and max_prompt_tokens in a model
// block and a tier block; a model without them caps generations at 16,
// off (or 0) leaves them to the engine, a tier without them adds nothing.
func TestCapsCaddyfile(t *testing.T) {
	tests := []struct {
		name      string
		model     string // lines of model qwen's block
		tier      string // lines of tier free's block ("" for no tier)
		wantModel reserve.Caps
		wantTiers map[string]reserve.Caps
	}{
		{name: "defaults", wantModel: reserve.Caps{MaxGenerations: reserve.DefaultMaxGenerations}},
		{name: "model caps", model: "max_generations 4\nmax_prompt_tokens 32000",
			wantModel: reserve.Caps{MaxGenerations: 4, MaxPromptTokens: 32000}},
		{name: "off: the engine's own", model: "max_generations off\nmax_prompt_tokens off",
			wantModel: reserve.Caps{}},
		{name: "zero: the engine's own", model: "max_generations 0", wantModel: reserve.Caps{}},
		{name: "tier caps", tier: "rpm 10\nmax_generations 1\nmax_prompt_tokens 4000",
			wantModel: reserve.Caps{MaxGenerations: 16},
			wantTiers: map[string]reserve.Caps{"free": {MaxGenerations: 1, MaxPromptTokens: 4000}}},
		{name: "tier without caps", tier: "rpm 10", wantModel: reserve.Caps{MaxGenerations: 16}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := "llmedge {\nmodel qwen {\nstatic http://127.0.0.1:1\n" + tt.model + "\n}\n"
			if tt.tier != "" {
				in += "tier free {\n" + tt.tier + "\n}\n"
			}
			a := new(App)
			if err := a.UnmarshalCaddyfile(caddyfile.NewTestDispenser(in + "}")); err != nil {
				t.Fatal(err)
			}
			if err := a.Models[0].validate(); err != nil {
				t.Fatal(err)
			}
			if got := a.Models[0].CapsConfig.caps(reserve.DefaultMaxGenerations); got != tt.wantModel {
				t.Errorf("model caps %+v, want %+v", got, tt.wantModel)
			}
			got := a.tierCaps()
			if len(got) != len(tt.wantTiers) || got["free"] != tt.wantTiers["free"] {
				t.Errorf("tier caps %+v, want %+v", got, tt.wantTiers)
			}
		})
	}
}

func TestCapsCaddyfileErrors(t *testing.T) {
	tests := []struct{ name, input, want string }{
		{"model: not a number", "llmedge {\nmodel qwen {\nmax_generations many\n}\n}", `model qwen: max_generations: want a whole number ≥ 0, or off, got "many"`},
		{"model: negative", "llmedge {\nmodel qwen {\nmax_prompt_tokens -1\n}\n}", `model qwen: max_prompt_tokens: want a whole number ≥ 0, or off, got "-1"`},
		{"model: no value", "llmedge {\nmodel qwen {\nmax_generations\n}\n}", "wrong argument count"},
		{"tier: not a number", "llmedge {\ntier free {\nmax_generations 1.5\n}\n}", `tier free: max_generations: want a whole number ≥ 0, or off, got "1.5"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := new(App).UnmarshalCaddyfile(caddyfile.NewTestDispenser(tt.input))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want one containing %q", err, tt.want)
			}
		})
	}
}

// TestCapsValidate: JSON configuration cannot set negative caps.
func TestCapsValidate(t *testing.T) {
	neg := -1
	mc := &ModelConfig{Name: "qwen", CapsConfig: CapsConfig{MaxGenerations: &neg}}
	if err := mc.validate(); err == nil || !strings.Contains(err.Error(), "model qwen: max_generations must be 0 (off) or more") {
		t.Errorf("negative max_generations: %v", err)
	}
}
