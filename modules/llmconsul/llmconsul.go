// Package llmconsul is the `consul` dynamic upstream source of Caddy's
// reverse_proxy (http.reverse_proxy.upstreams.consul): the passing
// instances of a Consul service, followed with blocking queries by the
// same shared watchers as the llmedge app's models. Any route can then be
// sent to a Consul service with stock reverse_proxy:
//
//	reverse_proxy {
//		dynamic consul llm-qwen {
//			tag    gpu
//			filter "Service.Meta.zone == \"a\""
//		}
//	}
//
// Consul is reached as the llmedge app's `consul` option says, or, without
// the app, through the CONSUL_* environment variables.
package llmconsul

import (
	"net/http"
	"sync/atomic"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"

	"github.com/llmedge/llmedge/backends/fleet"
	"github.com/llmedge/llmedge/discovery"
	"github.com/llmedge/llmedge/modules/llmapp"
	"github.com/llmedge/llmedge/modules/llmsource"
)

func init() {
	caddy.RegisterModule(Upstreams{})
}

// Upstreams is the upstream source. Each request gets the current set
// (fresh Upstream values over a snapshot swapped atomically by the
// watcher), so the request path never waits on Consul. Instance Meta
// `max_concurrency` becomes the upstream's max_requests. The instance's
// `scheme` is not used: reverse_proxy's transport decides (`transport
// http { tls }` for https replicas).
type Upstreams struct {
	// Service is the Consul service name.
	Service string `json:"service"`
	// Tag keeps the instances with this tag.
	Tag string `json:"tag,omitempty"`
	// Filter is a Consul filter expression on the health entries.
	Filter string `json:"filter,omitempty"`
	// Datacenter overrides the datacenter of the Consul settings.
	Datacenter string `json:"datacenter,omitempty"`
	// Token overrides the ACL token of the Consul settings (placeholders
	// such as {env.CONSUL_TOKEN_EMBED} work).
	Token string `json:"token,omitempty"`

	current *atomic.Pointer[[]target]
	release func()
}

type target struct {
	dial        string
	maxRequests int
}

// CaddyModule returns the Caddy module information.
func (Upstreams) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.reverse_proxy.upstreams.consul",
		New: func() caddy.Module { return new(Upstreams) },
	}
}

// Provision starts (or joins) the watcher of the service.
func (u *Upstreams) Provision(ctx caddy.Context) error {
	u.current = new(atomic.Pointer[[]target])
	u.current.Store(&[]target{})
	client, syncTimeout, err := llmapp.ConsulClient(ctx)
	if err != nil {
		return err
	}
	if u.Token != "" {
		client.Token, client.TokenFile = caddy.NewReplacer().ReplaceAll(u.Token, ""), ""
	}
	w, release, err := llmsource.AcquireConsulWatcher(llmapp.Kept(), client, discovery.WatchConfig{
		Service: u.Service, Tag: u.Tag, Filter: u.Filter, Datacenter: u.Datacenter,
	})
	if err != nil {
		return err
	}
	unsubscribe := w.Subscribe(func(list []discovery.Instance) {
		next := make([]target, len(list))
		for i, in := range list {
			next[i] = target{dial: in.Address, maxRequests: in.MaxConcurrency}
		}
		u.current.Store(&next)
	})
	u.release = func() { unsubscribe(); release() }
	fleet.WaitSynced([]fleet.Syncer{w}, syncTimeout, ctx.Logger())
	return nil
}

// Validate checks that a service is named.
func (u *Upstreams) Validate() error {
	if u.Service == "" {
		return errNoService
	}
	return nil
}

// Cleanup releases the watcher; it stops when no config uses it.
func (u *Upstreams) Cleanup() error {
	if u.release != nil {
		u.release()
		u.release = nil
	}
	return nil
}

// GetUpstreams returns the service's passing instances; none (so 503 from
// reverse_proxy) before the first answer or when none passes.
func (u *Upstreams) GetUpstreams(*http.Request) ([]*reverseproxy.Upstream, error) {
	cur := *u.current.Load()
	out := make([]*reverseproxy.Upstream, len(cur))
	for i, t := range cur {
		out[i] = &reverseproxy.Upstream{Dial: t.dial, MaxRequests: t.maxRequests}
	}
	return out, nil
}

// UnmarshalCaddyfile parses
//
//	dynamic consul [<service>] {
//		service    <service>
//		tag        <tag>
//		filter     <expression>
//		datacenter <dc>
//		token      <acl-token>
//	}
func (u *Upstreams) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // the source's name
	args := d.RemainingArgs()
	if len(args) > 1 {
		return d.ArgErr()
	}
	if len(args) == 1 {
		u.Service = args[0]
	}
	for d.NextBlock(0) {
		var dst *string
		switch d.Val() {
		case "service":
			dst = &u.Service
		case "tag":
			dst = &u.Tag
		case "filter":
			dst = &u.Filter
		case "datacenter":
			dst = &u.Datacenter
		case "token":
			dst = &u.Token
		default:
			return d.Errf("unrecognized consul upstreams option %q", d.Val())
		}
		if !d.NextArg() {
			return d.ArgErr()
		}
		*dst = d.Val()
		if d.NextArg() {
			return d.ArgErr()
		}
	}
	if u.Service == "" {
		return d.Err("dynamic consul: want a service name")
	}
	return nil
}

type constError string

func (e constError) Error() string { return string(e) }

const errNoService = constError("consul upstreams: no service name")

// Interface guards.
var (
	_ caddy.Provisioner           = (*Upstreams)(nil)
	_ caddy.Validator             = (*Upstreams)(nil)
	_ caddy.CleanerUpper          = (*Upstreams)(nil)
	_ reverseproxy.UpstreamSource = (*Upstreams)(nil)
	_ caddyfile.Unmarshaler       = (*Upstreams)(nil)
)
