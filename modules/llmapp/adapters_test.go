package llmapp

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

// TestAdaptersOption: the adapter lines of a model block reach the
// gateway's model.
func TestAdaptersOption(t *testing.T) {
	mc := parseModel(t, "model m {\n\tstatic http://a:1\n\tadapters sql poem\n\tadapters dynamic\n\tadapter_path /loras/{adapter}\n\tadapter_cap 3\n\tadapter_load_timeout 30s\n\tadapter_pattern [a-z]+\n\tadapter_idle 1m\n\tadapter_loads_per_tenant 3 per 1h\n}")
	if err := mc.validate(); err != nil {
		t.Fatal(err)
	}
	m, _, err := build(t, mc)
	if err != nil {
		t.Fatal(err)
	}
	a := m.Adapters
	if a == nil || !slices.Equal(a.Names, []string{"sql", "poem"}) || !a.Dynamic || a.Path != "/loras/{adapter}" ||
		a.Cap != 3 || a.LoadTimeout != 30*time.Second || a.Known == nil || a.Idle != time.Minute ||
		a.TenantLoads != 3 || a.TenantWindow != time.Hour || a.Pattern == nil || a.Pattern.MatchString("x1") || !a.Pattern.MatchString("xy") {
		t.Fatalf("%+v", a)
	}
	if m, _, _ := build(t, parseModel(t, "model n {\n\tstatic http://a:1\n}")); m.Adapters != nil {
		t.Errorf("a model without adapter lines has adapters")
	}
}

func TestAdaptersOptionErrors(t *testing.T) {
	for _, tc := range []struct{ block, want string }{
		{"adapters", "adapters: want adapter names, or dynamic"},
		{"adapter_cap 0", "adapter_cap"},
		{"adapter_cap x", "adapter_cap"},
		{"adapter_load_timeout soon", "adapter_load_timeout"},
		{"adapter_path", "argument"},
		{"adapter_idle 0s", "adapter_idle"},
		{"adapter_loads_per_tenant", "adapter_loads_per_tenant"},
		{"adapter_loads_per_tenant 0", "adapter_loads_per_tenant"},
		{"adapter_loads_per_tenant 3 every 1m", "adapter_loads_per_tenant"},
		{"adapter_loads_per_tenant 3 per never", "adapter_loads_per_tenant"},
	} {
		mc := new(ModelConfig)
		d := caddyfile.NewTestDispenser("model m {\n\t" + tc.block + "\n}")
		d.Next()
		if err := mc.unmarshalCaddyfile(d); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: err %v, want ~%q", tc.block, err, tc.want)
		}
	}
	for _, tc := range []struct {
		mc   ModelConfig
		want string
	}{
		{ModelConfig{Name: "m", Adapters: &AdaptersConfig{Path: "/x"}}, "need an adapters line"},
		{ModelConfig{Name: "m", Adapters: &AdaptersConfig{Names: []string{"a b"}}}, "invalid adapter name"},
		{ModelConfig{Name: "m", Adapters: &AdaptersConfig{Names: []string{"../x"}}}, "invalid adapter name"},
		{ModelConfig{Name: "m", Adapters: &AdaptersConfig{Names: []string{"Sql"}, Pattern: "[a-z]+"}}, "does not match adapter_pattern"},
		{ModelConfig{Name: "m", Adapters: &AdaptersConfig{Dynamic: true, Pattern: "("}}, "adapter_pattern"},
		{ModelConfig{Name: "m", Adapters: &AdaptersConfig{Dynamic: true, Path: "/loras/x"}}, "{adapter} exactly once"},
		{ModelConfig{Name: "m", Adapters: &AdaptersConfig{Names: []string{"a", "a"}}}, `"a" is named twice`},
		{ModelConfig{Name: "m", Adapters: &AdaptersConfig{Dynamic: true}, Rollout: []RolloutShare{{"x", 1}}}, "a model with a rollout has no adapters"},
	} {
		if err := tc.mc.validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: err %v, want ~%q", tc.mc.Adapters, err, tc.want)
		}
	}
}

// TestAdapterNaming: a bare adapter name is not a model's name or alias,
// nor an adapter of two models; a user's model may be one adapter.
func TestAdapterNaming(t *testing.T) {
	withAdapters := func(name string, aliases []string, names ...string) *ModelConfig {
		return &ModelConfig{Name: name, Aliases: aliases, Adapters: &AdaptersConfig{Names: names}}
	}
	for _, tc := range []struct {
		name   string
		models []*ModelConfig
		err    string
	}{
		{"fine", []*ModelConfig{withAdapters("qwen", nil, "sql"), withAdapters("gemma", nil, "poem")}, ""},
		{"a model's name", []*ModelConfig{withAdapters("qwen", nil, "gemma"), {Name: "gemma"}}, `adapter "gemma" is the name of model "gemma"`},
		{"an alias", []*ModelConfig{withAdapters("qwen", []string{"q"}, "q")}, `adapter "q" is the name of model "qwen"`},
		{"two models", []*ModelConfig{withAdapters("qwen", nil, "sql"), withAdapters("gemma", nil, "sql")}, `adapter "sql" is already an adapter of model`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := (&App{Models: tc.models}).naming()
			if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
				t.Fatalf("err %v, want ~%q", err, tc.err)
			}
		})
	}
	a := &App{Models: []*ModelConfig{withAdapters("qwen", nil, "sql"), {Name: "llama:3", Adapters: &AdaptersConfig{Dynamic: true}},
		{Name: "mistral", Adapters: &AdaptersConfig{Dynamic: true, Pattern: "team-[a-z]+"}}, {Name: "gemma"}}}
	for name, want := range map[string]bool{"qwen:sql": true, "qwen:poem": false, "llama:3:any": true, "gemma:x": false, "qwen": false,
		"llama:3:../x": false, "mistral:team-a": true, "mistral:other": false} {
		if got := a.adapterScope(name); got != want {
			t.Errorf("adapterScope(%q) = %v, want %v", name, got, want)
		}
	}
}

// TestAdaptersKeptAcrossReloads: a configuration built while another of
// the same model is alive shares its table of adapters, and the last to
// close lets go of it.
func TestAdaptersKeptAcrossReloads(t *testing.T) {
	block := "model kept-lora {\n\tstatic http://a:1\n\tadapters dynamic\n}"
	_, s1, err := build(t, parseModel(t, block))
	if err != nil {
		t.Fatal(err)
	}
	s1.Model.Adapters.Known.MarkLoaded("http://a:1", "x")
	_, s2, err := build(t, parseModel(t, block))
	if err != nil {
		t.Fatal(err)
	}
	if s2.Model.Adapters.Known != s1.Model.Adapters.Known {
		t.Fatal("the second configuration has a table of its own")
	}
	if refs := kept.Refs(adaptersKey + "kept-lora"); refs != 2 {
		t.Errorf("refs %d, want 2", refs)
	}
	s1.Close()
	s2.Close()
	if refs := kept.Refs(adaptersKey + "kept-lora"); refs != 0 {
		t.Errorf("after both closed: refs %d", refs)
	}
}
