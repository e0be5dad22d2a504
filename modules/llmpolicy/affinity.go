package llmpolicy

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/llmedge/llmedge/backends/pool"
	"github.com/llmedge/llmedge/routing"
)

func init() { caddy.RegisterModule(Affinity{}) }

// Affinity keeps a session on one replica (rendezvous hashing with bounded
// loads, package routing) and leaves requests without a session key to
// the policy it wraps. A model block's `affinity` line is this policy
// around the model's lb_policy.
type Affinity struct {
	// By is what keys a session: "user" (the credential's subject),
	// "header" or "cookie".
	By string `json:"by"`
	// Name is the header's or cookie's name.
	Name string `json:"name,omitempty"`
	// LoadFactor bounds a session replica's load relative to the mean
	// (default 1.25).
	LoadFactor float64 `json:"load_factor,omitempty"`
	// InnerRaw places requests without a session key: a module of
	// llmedge.policies. Default: prefix_cache.
	InnerRaw json.RawMessage `json:"inner,omitempty" caddy:"namespace=llmedge.policies inline_key=policy"`

	routing.Affinity `json:"-"`
}

// CaddyModule returns the Caddy module information.
func (Affinity) CaddyModule() caddy.ModuleInfo {
	return info("affinity", func() caddy.Module { return new(Affinity) })
}

// Provision loads the inner policy.
func (a *Affinity) Provision(ctx caddy.Context) error {
	if err := a.Validate(); err != nil {
		return err
	}
	if a.InnerRaw == nil {
		a.InnerRaw = caddyconfig.JSONModuleObject(struct{}{}, "policy", DefaultInner, nil)
	}
	mod, err := ctx.LoadModule(a, "InnerRaw")
	if err != nil {
		return fmt.Errorf("affinity: inner policy: %w", err)
	}
	inner, ok := mod.(pool.Policy)
	if !ok {
		return fmt.Errorf("affinity: inner module %T is not a pool.Policy", mod)
	}
	a.Affinity = routing.Affinity{Key: key(a.By, a.Name), Inner: inner, LoadFactor: a.LoadFactor}
	return nil
}

// DefaultInner is the policy an affinity wraps when it names none.
const DefaultInner = "prefix_cache"

// key is the session key of a request: the one switch over the kinds of
// key, kept in the module that owns them.
func key(by, name string) func(*pool.Request) string {
	switch by {
	case "header":
		return routing.ByHeader(name)
	case "cookie":
		return routing.ByCookie(name)
	}
	return routing.ByUser
}

// Validate checks the options.
func (a *Affinity) Validate() error {
	switch {
	case a.By == "user" && a.Name != "":
		return fmt.Errorf("affinity user takes no name")
	case (a.By == "header" || a.By == "cookie") && a.Name == "":
		return fmt.Errorf("affinity %s: want the %s's name", a.By, a.By)
	case a.By != "user" && a.By != "header" && a.By != "cookie":
		return fmt.Errorf("affinity: want user, header <name> or cookie <name>, got %q", a.By)
	case a.LoadFactor != 0 && a.LoadFactor < 1:
		return fmt.Errorf("affinity load_factor must be at least 1, got %v", a.LoadFactor)
	}
	return nil
}

// Bind implements Bound: the inner policy learns its model.
func (a *Affinity) Bind(env Env) error {
	if b, ok := a.Inner.(Bound); ok {
		return b.Bind(env)
	}
	return nil
}

// UnmarshalCaddyfile parses
//
//	lb_policy affinity user|header <name>|cookie <name> {
//		load_factor <x ≥ 1>
//		inner       <policy> [{ ... }]
//	}
func (a *Affinity) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // the policy's name
	args := d.RemainingArgs()
	switch {
	case len(args) == 1 && args[0] == "user":
		a.By = "user"
	case len(args) == 2 && (args[0] == "header" || args[0] == "cookie"):
		a.By, a.Name = args[0], args[1]
	default:
		return d.Errf("affinity: want user, header <name> or cookie <name>")
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		switch d.Val() {
		case "load_factor":
			if !d.NextArg() {
				return d.ArgErr()
			}
			f, err := strconv.ParseFloat(d.Val(), 64)
			if err != nil || f < 1 || d.NextArg() {
				return d.Errf("affinity load_factor: want a number ≥ 1, got %q", d.Val())
			}
			a.LoadFactor = f
		case "inner":
			if !d.NextArg() {
				return d.Errf("affinity inner: want a policy")
			}
			name := d.Val()
			mod, err := caddyfile.UnmarshalModule(d, Namespace+"."+name)
			if err != nil {
				return err
			}
			a.InnerRaw = caddyconfig.JSONModuleObject(mod, "policy", name, nil)
		default:
			return d.Errf("unrecognized affinity option %q", d.Val())
		}
	}
	return nil
}

// Interface guards.
var (
	_ Policy                = (*Affinity)(nil)
	_ Bound                 = (*Affinity)(nil)
	_ caddy.Provisioner     = (*Affinity)(nil)
	_ caddy.Validator       = (*Affinity)(nil)
	_ caddyfile.Unmarshaler = (*Affinity)(nil)
)
