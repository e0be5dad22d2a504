package llmsource

import (
	"encoding/json"
	"fmt"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/llmedge/llmedge/discovery"
	"github.com/llmedge/llmedge/keep"
)

func init() {
	caddy.RegisterModule(Consul{})
}

// Consul is the passing instances of a Consul service
// (llmedge.sources.consul), reached as the llmedge app's `consul` option
// says. Instance Meta protocol, model, weight, max_concurrency and scheme
// override the model's settings.
type Consul struct {
	// Service is the Consul service name.
	Service string `json:"service"`
	// Tag keeps the instances with this tag.
	Tag string `json:"tag,omitempty"`
	// Filter is a Consul filter expression on the health entries.
	Filter string `json:"filter,omitempty"`
	// Datacenter overrides the datacenter of the `consul` option.
	Datacenter string `json:"datacenter,omitempty"`
	// Token overrides the ACL token of the `consul` option (placeholders
	// such as {env.QWEN_CONSUL_TOKEN} work).
	Token string `json:"token,omitempty"`
}

// CaddyModule returns the Caddy module information.
func (Consul) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: Namespace + ".consul", New: func() caddy.Module { return new(Consul) }}
}

// Validate checks that a service is named.
func (c *Consul) Validate() error {
	if c.Service == "" {
		return fmt.Errorf("consul source: no service named")
	}
	return nil
}

// Open implements Source: it joins the running watcher of the service,
// or starts one.
func (c *Consul) Open(env Env) (discovery.Source, func(), error) {
	client := env.Consul
	if c.Token != "" {
		client.Token, client.TokenFile = caddy.NewReplacer().ReplaceAll(c.Token, ""), ""
	}
	w, release, err := AcquireConsulWatcher(env.Kept, client, discovery.WatchConfig{
		Service: c.Service, Tag: c.Tag, Filter: c.Filter, Datacenter: c.Datacenter,
	})
	if err != nil {
		return nil, nil, err
	}
	return w, release, nil
}

// UnmarshalCaddyfile parses
//
//	source consul <service> {
//		tag        <tag>
//		filter     <expression>
//		datacenter <dc>
//		token      <acl-token>
//	}
func (c *Consul) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // the source's name
	if d.NextArg() {
		c.Service = d.Val()
	}
	if d.NextArg() {
		return d.ArgErr()
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		var dst *string
		switch d.Val() {
		case "service":
			dst = &c.Service
		case "tag":
			dst = &c.Tag
		case "filter":
			dst = &c.Filter
		case "datacenter":
			dst = &c.Datacenter
		case "token":
			dst = &c.Token
		default:
			return d.Errf("unrecognized consul source option %q", d.Val())
		}
		if !d.NextArg() {
			return d.ArgErr()
		}
		*dst = d.Val()
		if d.NextArg() {
			return d.ArgErr()
		}
	}
	return nil
}

// sharedWatcher is a running Consul watcher kept across config reloads,
// keyed by its complete settings: a reload with the same settings reuses
// the running watcher (no gap, no duplicate); one with other settings
// starts a new watcher, and the old one stops when the last config using
// it is cleaned up.
type sharedWatcher struct{ *discovery.Watcher }

func (s sharedWatcher) Destruct() error {
	s.Stop()
	return nil
}

// AcquireConsulWatcher returns the running watcher for these settings in
// kept, starting one if none runs, and the function that releases it (the
// last release stops it). A nil kept shares the watcher with nobody.
func AcquireConsulWatcher(kept *keep.Store, client discovery.ConsulConfig, wc discovery.WatchConfig) (*discovery.Watcher, func(), error) {
	if kept == nil {
		kept = keep.New()
	}
	key, err := json.Marshal(struct {
		Client discovery.ConsulConfig
		Watch  discovery.WatchConfig
	}{client, wc})
	if err != nil {
		return nil, nil, err
	}
	k := "llmsource.consul " + string(key)
	v, _, err := kept.LoadOrNew(k, func() (any, error) {
		// Not the config's logger: the watcher outlives the config.
		w, err := discovery.NewConsulWatcher(client, wc, caddy.Log().Named("llmedge.consul"))
		if err != nil {
			return nil, err
		}
		w.Start()
		return sharedWatcher{w}, nil
	})
	if err != nil {
		return nil, nil, err
	}
	return v.(sharedWatcher).Watcher, func() { _, _ = kept.Delete(k) }, nil
}

// Interface guards.
var (
	_ Source                = (*Consul)(nil)
	_ caddy.Validator       = (*Consul)(nil)
	_ caddyfile.Unmarshaler = (*Consul)(nil)
)
