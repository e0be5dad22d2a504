package llmapp

import (
	"fmt"
	"strings"
	"testing"
)

func TestNaming(t *testing.T) {
	m := func(name string, aliases, fallbacks []string) *ModelConfig {
		return &ModelConfig{Name: name, Aliases: aliases, Fallbacks: fallbacks}
	}
	for _, tc := range []struct {
		name     string
		models   []*ModelConfig
		accepted string
		chains   map[string]string
		err      string
	}{
		{"none", []*ModelConfig{m("qwen", nil, nil), m("gemma", nil, nil)}, "qwen gemma",
			map[string]string{"qwen": "", "gemma": ""}, ""},
		{"aliases after their model", []*ModelConfig{m("qwen", []string{"q", "gpt-4o"}, nil), m("gemma", []string{"g"}, nil)},
			"qwen q gpt-4o gemma g", nil, ""},
		{"a fallback by its alias", []*ModelConfig{m("qwen", nil, []string{"g"}), m("gemma", []string{"g"}, []string{"llama"}), m("llama", nil, nil)},
			"qwen gemma g llama", map[string]string{"qwen": "gemma llama", "gemma": "llama", "llama": ""}, ""},
		{"an alias that is a model", []*ModelConfig{m("qwen", []string{"gemma"}, nil), m("gemma", nil, nil)}, "", nil,
			`model "qwen": alias "gemma" is the name of a model`},
		{"an alias of its own model's name", []*ModelConfig{m("qwen", []string{"qwen"}, nil)}, "", nil,
			`alias "qwen" is the name of a model`},
		{"an alias twice", []*ModelConfig{m("qwen", []string{"x"}, nil), m("gemma", []string{"x"}, nil)}, "", nil,
			`model "gemma": alias "x" is already an alias of model "qwen"`},
		{"a fallback that is no model", []*ModelConfig{m("qwen", nil, []string{"llama"})}, "", nil,
			`model "qwen": fallback "llama" is not a configured model`},
		{"a cycle through an alias", []*ModelConfig{m("qwen", []string{"q"}, []string{"gemma"}), m("gemma", nil, []string{"q"})}, "", nil,
			"fallback cycle gemma -> qwen -> gemma"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := &App{Models: tc.models}
			n, err := a.naming()
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want ~%q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(n.accepted, " "); got != tc.accepted {
				t.Errorf("accepted %q, want %q", got, tc.accepted)
			}
			for model, chain := range tc.chains {
				if got := strings.Join(n.fallbacks[model], " "); got != chain {
					t.Errorf("%s falls back to %q, want %q", model, got, chain)
				}
			}
			for _, mc := range tc.models {
				for _, al := range mc.Aliases {
					if n.aliases[al] != mc.Name {
						t.Errorf("alias %s names %q, want %q", al, n.aliases[al], mc.Name)
					}
				}
			}
		})
	}
}

func TestRolloutNaming(t *testing.T) {
	for _, tc := range []struct {
		name   string
		models []*ModelConfig
		want   string // the shares of qwen, or the error
	}{
		{"by name and alias", []*ModelConfig{{Name: "qwen", Rollout: []RolloutShare{{"a", 9}, {"bee", 1}}},
			{Name: "a"}, {Name: "b", Aliases: []string{"bee"}}}, "a 9 b 1"},
		{"itself", []*ModelConfig{{Name: "qwen", Aliases: []string{"q"}, Rollout: []RolloutShare{{"q", 1}}}}, "names the model itself"},
		{"no model", []*ModelConfig{{Name: "qwen", Rollout: []RolloutShare{{"z", 1}}}}, `rollout model "z" is not a configured model`},
		{"nested", []*ModelConfig{{Name: "qwen", Rollout: []RolloutShare{{"a", 1}}}, {Name: "a", Rollout: []RolloutShare{{"b", 1}}}, {Name: "b"}},
			`rollout model "a" has a rollout of its own`},
		{"twice", []*ModelConfig{{Name: "qwen", Rollout: []RolloutShare{{"a", 1}, {"a", 2}}}, {Name: "a"}}, `rollout model "a" is named twice`},
		{"zero weight", []*ModelConfig{{Name: "qwen", Rollout: []RolloutShare{{"a", 0}}}, {Name: "a"}}, "weight must be positive"},
		{"replicas of its own", []*ModelConfig{{Name: "qwen", SourceRaw: []byte(`{"source":"static"}`), Rollout: []RolloutShare{{"a", 1}}}, {Name: "a"}},
			"has no replicas of its own"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, err := (&App{Models: tc.models}).naming()
			if err != nil {
				if !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("err = %v, want ~%q", err, tc.want)
				}
				return
			}
			var got []string
			for _, s := range n.rollouts["qwen"] {
				got = append(got, fmt.Sprint(s.Model, " ", s.Weight))
			}
			if strings.Join(got, " ") != tc.want {
				t.Fatalf("shares %v, want %q", got, tc.want)
			}
		})
	}
}
