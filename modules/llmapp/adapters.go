package llmapp

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/llmedge/llmedge/backends/adapters"
	"github.com/llmedge/llmedge/backends/fleet"
)

// AdaptersConfig configures a model's LoRA adapters (docs/models.md#lora-adapters);
// the feature is backends/adapters, this is its configuration.
type AdaptersConfig struct {
	// Names are the adapters requests may ask for, as "<model>:<name>"
	// or "<name>".
	Names []string `json:"names,omitempty"`
	// Dynamic accepts any adapter name (an identifier, narrowed by
	// Pattern), loading the adapter on a replica when none has it.
	Dynamic bool `json:"dynamic,omitempty"`
	// Pattern, a regular expression matched against the whole name,
	// narrows the names requests may ask for.
	Pattern string `json:"pattern,omitempty"`
	// Path is the lora_path of an adapter the gateway loads, "{adapter}"
	// replaced by its name. Default: the name itself.
	Path string `json:"path,omitempty"`
	// Cap is the most adapters the gateway has one replica hold. Default 4.
	Cap int `json:"cap,omitempty"`
	// Idle is how long an adapter must go unused before it is unloaded
	// to make room for another. Default 5m.
	Idle caddy.Duration `json:"idle,omitempty"`
	// TenantLoads adapters not configured may one principal cause to be
	// loaded per TenantWindow. Default 8 per 10m.
	TenantLoads  int            `json:"tenant_loads,omitempty"`
	TenantWindow caddy.Duration `json:"tenant_window,omitempty"`
	// LoadTimeout bounds one load. Default 2m.
	LoadTimeout caddy.Duration `json:"load_timeout,omitempty"`
}

// unmarshalCaddyfile reads one of the model's adapter lines:
// "adapters <name>... | dynamic", "adapter_path <template>",
// "adapter_pattern <regexp>", "adapter_cap <n>", "adapter_idle
// <duration>", "adapter_loads_per_tenant <n> [per <duration>]",
// "adapter_load_timeout <duration>".
func (a *AdaptersConfig) unmarshalCaddyfile(d *caddyfile.Dispenser, opt string) error {
	switch opt {
	case "adapters":
		args := d.RemainingArgs()
		if len(args) == 0 {
			return d.Errf("adapters: want adapter names, or dynamic")
		}
		for _, n := range args {
			if n == "dynamic" {
				a.Dynamic = true
				continue
			}
			a.Names = append(a.Names, n)
		}
		return nil
	case "adapter_path":
		return oneString(d, &a.Path)
	case "adapter_pattern":
		return oneString(d, &a.Pattern)
	case "adapter_cap":
		return positiveInt(d, opt, &a.Cap)
	case "adapter_idle":
		return positiveDuration(d, opt, &a.Idle)
	case "adapter_loads_per_tenant":
		args := d.RemainingArgs()
		n, err := strconv.Atoi(firstOr(args, ""))
		if err != nil || n < 1 || (len(args) != 1 && (len(args) != 3 || args[1] != "per")) {
			return d.Errf("adapter_loads_per_tenant: want <n> [per <duration>], n ≥ 1")
		}
		a.TenantLoads = n
		if len(args) == 3 {
			w, err := caddy.ParseDuration(args[2])
			if err != nil || w <= 0 {
				return d.Errf("adapter_loads_per_tenant: want a positive duration after per, got %q", args[2])
			}
			a.TenantWindow = caddy.Duration(w)
		}
		return nil
	default:
		return positiveDuration(d, opt, &a.LoadTimeout)
	}
}

func firstOr(args []string, def string) string {
	if len(args) == 0 {
		return def
	}
	return args[0]
}

// validate checks the names and bounds; nil is no adapters.
func (a *AdaptersConfig) validate() error {
	if a == nil {
		return nil
	}
	if len(a.Names) == 0 && !a.Dynamic {
		return fmt.Errorf("adapter_path, adapter_pattern, adapter_cap, adapter_idle, adapter_loads_per_tenant and adapter_load_timeout need an adapters line")
	}
	var re *regexp.Regexp
	if a.Pattern != "" {
		var err error
		if re, err = adapters.CompilePattern(a.Pattern); err != nil {
			return err
		}
	}
	for i, n := range a.Names {
		if err := adapters.CheckName(n); err != nil {
			return fmt.Errorf("adapters: %q: %w", n, err)
		}
		if re != nil && !re.MatchString(n) {
			return fmt.Errorf("adapters: %q does not match adapter_pattern", n)
		}
		if slices.Contains(a.Names[:i], n) {
			return fmt.Errorf("adapters: %q is named twice", n)
		}
	}
	if err := adapters.CheckTemplate(a.Path); err != nil {
		return err
	}
	if a.Cap < 0 || a.LoadTimeout < 0 || a.Idle < 0 || a.TenantLoads < 0 || a.TenantWindow < 0 {
		return fmt.Errorf("adapter_cap, adapter_idle, adapter_loads_per_tenant and adapter_load_timeout must be positive")
	}
	return nil
}

// accepts reports whether requests may name adapter (validate ran).
func (a *AdaptersConfig) accepts(adapter string) bool {
	if adapters.CheckName(adapter) != nil {
		return false
	}
	if slices.Contains(a.Names, adapter) {
		return true
	}
	if a.Pattern != "" {
		if re, err := adapters.CompilePattern(a.Pattern); err != nil || !re.MatchString(adapter) {
			return false
		}
	}
	return a.Dynamic
}

// keepAdapters shares what the gateway knows of the model's replicas'
// adapters with the configurations before and after a reload, by model
// name, so that a reload does not forget the adapters it loaded (and
// load them again elsewhere before the next reads of the replicas); the
// fleet lets go of it when it closes.
func keepAdapters(model string, s *fleet.Spec) {
	a := s.Model.Adapters
	if a == nil {
		return
	}
	key := adaptersKey + model
	v, _, err := kept.LoadOrNew(key, func() (any, error) { return adapters.NewTable(), nil })
	if err != nil {
		return // a fresh table, the one build made
	}
	a.Known = v.(*adapters.Table)
	closeSource := s.Close
	var once sync.Once
	s.Close = func() {
		if closeSource != nil {
			closeSource()
		}
		once.Do(func() { _, _ = kept.Delete(key) }) // one reference, let go once
	}
}

// adaptersKey starts the keys of the adapter tables in the kept store.
const adaptersKey = "llmapp.adapters\x00"

// build is the feature's set for the gateway; nil without adapters.
func (a *AdaptersConfig) build() *adapters.Set {
	if a == nil {
		return nil
	}
	var re *regexp.Regexp
	if a.Pattern != "" {
		re, _ = adapters.CompilePattern(a.Pattern) // validate compiled it
	}
	return &adapters.Set{Names: slices.Clone(a.Names), Dynamic: a.Dynamic, Pattern: re, Path: a.Path, Cap: a.Cap,
		Idle: time.Duration(a.Idle), TenantLoads: a.TenantLoads, TenantWindow: time.Duration(a.TenantWindow),
		LoadTimeout: time.Duration(a.LoadTimeout), Known: adapters.NewTable()}
}

// adapterNames checks the models' bare adapter names: none may be a
// model's name or alias, nor an adapter of two models.
func (a *App) adapterNames(owner map[string]string) error {
	of := map[string]string{}
	for _, m := range a.Models {
		if m.Adapters == nil {
			continue
		}
		for _, n := range m.Adapters.Names {
			if o, taken := owner[n]; taken {
				return fmt.Errorf("model %q: adapter %q is the name of model %q or of one of its aliases", m.Name, n, o)
			}
			if o, taken := of[n]; taken {
				return fmt.Errorf("model %q: adapter %q is already an adapter of model %q (ask for %s:%s and %s:%s)", m.Name, n, o, o, n, m.Name, n)
			}
			of[n] = m.Name
		}
	}
	return nil
}

// adapterScope reports whether name, a user's model, is one adapter of a
// model ("<model>:<adapter>"), which such a scope covers alone.
func (a *App) adapterScope(name string) bool {
	for _, m := range a.Models {
		ad, ok := strings.CutPrefix(name, m.Name+":")
		if ok && m.Adapters != nil && m.Adapters.accepts(ad) {
			return true
		}
	}
	return false
}
