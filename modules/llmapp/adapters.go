package llmapp

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/llmedge/llmedge/backends/fleet"
	"github.com/llmedge/llmedge/backends/pool"
	"github.com/llmedge/llmedge/gateway"
)

// AdaptersConfig configures a model's LoRA adapters (docs/models.md#lora-adapters).
type AdaptersConfig struct {
	// Names are the adapters requests may ask for, as "<model>:<name>"
	// or "<name>".
	Names []string `json:"names,omitempty"`
	// Dynamic accepts any adapter name, loading the adapter on a replica
	// when none has it.
	Dynamic bool `json:"dynamic,omitempty"`
	// Path is the lora_path of an adapter the gateway loads, "{adapter}"
	// replaced by its name. Default: the name itself.
	Path string `json:"path,omitempty"`
	// Cap is the most adapters the gateway has one replica hold. Default 4.
	Cap int `json:"cap,omitempty"`
	// LoadTimeout bounds one load. Default 2m.
	LoadTimeout caddy.Duration `json:"load_timeout,omitempty"`
}

// unmarshalCaddyfile reads one of the model's adapter lines:
// "adapters <name>... | dynamic", "adapter_path <template>",
// "adapter_cap <n>", "adapter_load_timeout <duration>".
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
	case "adapter_cap":
		return positiveInt(d, opt, &a.Cap)
	default:
		return positiveDuration(d, opt, &a.LoadTimeout)
	}
}

// validate checks the names and bounds; nil is no adapters.
func (a *AdaptersConfig) validate() error {
	if a == nil {
		return nil
	}
	if len(a.Names) == 0 && !a.Dynamic {
		return fmt.Errorf("adapter_path, adapter_cap and adapter_load_timeout need an adapters line")
	}
	for i, n := range a.Names {
		if !gateway.ValidAdapterName(n) {
			return fmt.Errorf("adapters: %q is not a valid adapter name (printable, no spaces, at most %d bytes)", n, gateway.MaxAdapterName)
		}
		if slices.Contains(a.Names[:i], n) {
			return fmt.Errorf("adapters: %q is named twice", n)
		}
	}
	if a.Cap < 0 || a.LoadTimeout < 0 {
		return fmt.Errorf("adapter_cap and adapter_load_timeout must be positive")
	}
	return nil
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
	v, _, err := kept.LoadOrNew(key, func() (any, error) { return pool.NewAdapters(), nil })
	if err != nil {
		return // a fresh table, the one build made
	}
	a.Known = v.(*pool.Adapters)
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

// build is the gateway's view; nil without adapters.
func (a *AdaptersConfig) build() *gateway.Adapters {
	if a == nil {
		return nil
	}
	return &gateway.Adapters{Names: slices.Clone(a.Names), Dynamic: a.Dynamic, Path: a.Path, Cap: a.Cap,
		LoadTimeout: time.Duration(a.LoadTimeout), Known: pool.NewAdapters()}
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
		if ok && m.Adapters != nil && gateway.ValidAdapterName(ad) && (m.Adapters.Dynamic || slices.Contains(m.Adapters.Names, ad)) {
			return true
		}
	}
	return false
}
