// Package llmdialect holds the guest modules of namespace
// llmedge.dialects: the metric names by which an engine tells its own
// load on its Prometheus endpoint (requests running and waiting, KV-cache
// use, prefix-cache counters). `vllm`, `sglang`, `tgi` and `llamacpp` are
// the engines', `auto` reads whichever of them an endpoint carries. The
// llmedge app loads every registered dialect, so that a protocol or a
// model's `load_metrics { dialect <name> }` may name any. A third party
// adds an engine by registering a module in this namespace that
// implements Dialect.
package llmdialect

import (
	"fmt"
	"sort"
	"strings"

	"github.com/caddyserver/caddy/v2"

	"github.com/llmedge/llmedge/backends/scrape"
)

// Namespace of the dialect modules.
const Namespace = "llmedge.dialects"

// Dialect is a guest module in llmedge.dialects.
type Dialect interface {
	caddy.Module
	// Dialect returns the engine's metric names.
	Dialect() scrape.Dialect
}

func init() {
	for name := range scrape.DefaultDialects() {
		caddy.RegisterModule(Builtin{name: name})
	}
}

// Builtin is one of the dialects package scrape knows, by name.
type Builtin struct{ name string }

// CaddyModule returns the Caddy module information.
func (b Builtin) CaddyModule() caddy.ModuleInfo {
	name := b.name
	return caddy.ModuleInfo{ID: caddy.ModuleID(Namespace + "." + name), New: func() caddy.Module { return &Builtin{name: name} }}
}

// Dialect implements Dialect.
func (b *Builtin) Dialect() scrape.Dialect { return scrape.DefaultDialects()[b.name] }

// All loads every registered dialect, by name.
func All(ctx caddy.Context) (map[string]scrape.Dialect, error) {
	out := map[string]scrape.Dialect{}
	for _, info := range caddy.GetModules(Namespace) {
		mod, err := ctx.LoadModuleByID(string(info.ID), nil)
		if err != nil {
			return nil, fmt.Errorf("dialect %s: %w", info.ID.Name(), err)
		}
		d, ok := mod.(Dialect)
		if !ok {
			return nil, fmt.Errorf("dialect %s: the module is not an llmdialect.Dialect", info.ID.Name())
		}
		out[info.ID.Name()] = d.Dialect()
	}
	return out, nil
}

// Names lists the dialects in m, sorted, for error messages.
func Names(m map[string]scrape.Dialect) string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

var _ Dialect = (*Builtin)(nil)
