// Package llmpolicy holds the guest modules of namespace llmedge.policies:
// how a model's replica is chosen for each request. A third party adds a
// policy by registering a module in this namespace that implements
// pool.Policy (and caddyfile.Unmarshaler for its options); a model selects
// it with `lb_policy <name> { ... }`, resolved when the config loads.
package llmpolicy

import (
	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/llmedge/llmedge/backends/pool"
	"github.com/llmedge/llmedge/keep"
	"github.com/llmedge/llmedge/routing"
	"github.com/llmedge/llmedge/routing/share"
)

// Namespace of the policy modules.
const Namespace = "llmedge.policies"

// Policy is a guest module in llmedge.policies.
type Policy interface {
	caddy.Module
	pool.Policy
}

// Bound is implemented by policies that keep state per model (an index):
// the app binds them to their model right after loading them.
type Bound interface {
	Bind(env Env) error
}

// Env is what the app tells a policy about the model it serves.
type Env struct {
	// Model is the model type.
	Model string
	// Kept holds what outlives a configuration (shared with the next
	// configuration's policy of the same model and settings); nil keeps
	// state in the policy alone.
	Kept *keep.Store
	// Share, when set, shares routing decisions with the other gateway
	// instances (share_routing); policies with an index attach it.
	Share *share.Hub
}

func init() {
	for _, m := range []caddy.Module{P2C{}, new(RoundRobin), Random{}, LeastRequests{}} {
		caddy.RegisterModule(m)
	}
}

func info(name string, New func() caddy.Module) caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: caddy.ModuleID(Namespace + "." + name), New: New}
}

// P2C is power of two choices on load per unit of weight.
type P2C struct{ routing.P2C }

// RoundRobin takes the replicas in turn, weighted.
type RoundRobin struct{ routing.RoundRobin }

// Random picks by weight.
type Random struct{ routing.Random }

// LeastRequests takes the least loaded replica per unit of weight.
type LeastRequests struct{ routing.LeastRequests }

// CaddyModule returns the Caddy module information.
func (P2C) CaddyModule() caddy.ModuleInfo {
	return info("p2c", func() caddy.Module { return new(P2C) })
}

// CaddyModule returns the Caddy module information. (A pointer receiver:
// the policy's turn counter must not be copied.)
func (*RoundRobin) CaddyModule() caddy.ModuleInfo {
	return info("round_robin", func() caddy.Module { return new(RoundRobin) })
}

// CaddyModule returns the Caddy module information.
func (Random) CaddyModule() caddy.ModuleInfo {
	return info("random", func() caddy.Module { return new(Random) })
}

// CaddyModule returns the Caddy module information.
func (LeastRequests) CaddyModule() caddy.ModuleInfo {
	return info("least_requests", func() caddy.Module { return new(LeastRequests) })
}

// UnmarshalCaddyfile parses `lb_policy p2c` (no options).
func (*P2C) UnmarshalCaddyfile(d *caddyfile.Dispenser) error { return noOptions(d) }

// UnmarshalCaddyfile parses `lb_policy round_robin` (no options).
func (*RoundRobin) UnmarshalCaddyfile(d *caddyfile.Dispenser) error { return noOptions(d) }

// UnmarshalCaddyfile parses `lb_policy random` (no options).
func (*Random) UnmarshalCaddyfile(d *caddyfile.Dispenser) error { return noOptions(d) }

// UnmarshalCaddyfile parses `lb_policy least_requests` (no options).
func (*LeastRequests) UnmarshalCaddyfile(d *caddyfile.Dispenser) error { return noOptions(d) }

// noOptions parses a policy that takes neither arguments nor a block.
func noOptions(d *caddyfile.Dispenser) error {
	d.Next() // the policy's name
	name := d.Val()
	if d.NextArg() || d.NextBlock(d.Nesting()) {
		return d.Errf("lb_policy %s takes no options", name)
	}
	return nil
}

// Interface guards.
var (
	_ Policy = (*P2C)(nil)
	_ Policy = (*RoundRobin)(nil)
	_ Policy = (*Random)(nil)
	_ Policy = (*LeastRequests)(nil)

	_ caddyfile.Unmarshaler = (*P2C)(nil)
	_ caddyfile.Unmarshaler = (*RoundRobin)(nil)
	_ caddyfile.Unmarshaler = (*Random)(nil)
	_ caddyfile.Unmarshaler = (*LeastRequests)(nil)
)
