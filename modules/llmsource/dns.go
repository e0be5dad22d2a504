package llmsource

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/llmedge/llmedge/discovery"
	"github.com/llmedge/llmedge/keep"
)

func init() {
	caddy.RegisterModule(DNS{})
}

// DNS is the replicas a name resolves to (llmedge.sources.dns): its A/AAAA
// records with a port (a Kubernetes headless Service, Consul DNS), or its
// SRV records with theirs (Consul's and Nomad's _service._tcp names),
// resolved again when the answer's TTL runs out.
type DNS struct {
	// Name is the name to resolve; placeholders such as {env.LLM_DNS}
	// work.
	Name string `json:"name"`
	// Type is A (A and AAAA records) or SRV; default SRV for a name
	// starting with "_", else A.
	Type string `json:"type,omitempty"`
	// Port is the replicas' port with A/AAAA records.
	Port int `json:"port,omitempty"`
	// Scheme is http (default) or https.
	Scheme string `json:"scheme,omitempty"`
	// Protocol is the replicas' API dialect (an llmedge.protocols module);
	// default the model's.
	Protocol string `json:"protocol,omitempty"`
	// Family is any (default), ipv4 or ipv6.
	Family string `json:"family,omitempty"`
	// Resolvers are the DNS servers asked in order (ip:port, or ip);
	// default the nameservers of /etc/resolv.conf (and its search list).
	Resolvers []string `json:"resolvers,omitempty"`
	// MinRefresh and MaxRefresh bound the pause between lookups, which is
	// the answer's TTL; defaults 1s and 1m.
	MinRefresh caddy.Duration `json:"min_refresh,omitempty"`
	MaxRefresh caddy.Duration `json:"max_refresh,omitempty"`
	// Timeout bounds each query; default 2s.
	Timeout caddy.Duration `json:"timeout,omitempty"`
}

// CaddyModule returns the Caddy module information.
func (DNS) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: Namespace + ".dns", New: func() caddy.Module { return new(DNS) }}
}

// config is the watcher's configuration, placeholders replaced.
func (s *DNS) config() discovery.DNSConfig {
	repl := caddy.NewReplacer()
	cfg := discovery.DNSConfig{
		Name: repl.ReplaceAll(s.Name, ""), Type: s.Type, Port: s.Port, Scheme: s.Scheme, Protocol: s.Protocol,
		Family: s.Family, MinRefresh: time.Duration(s.MinRefresh), MaxRefresh: time.Duration(s.MaxRefresh),
		Timeout: time.Duration(s.Timeout),
	}
	for _, r := range s.Resolvers {
		cfg.Resolvers = append(cfg.Resolvers, repl.ReplaceAll(r, ""))
	}
	return cfg
}

// Validate checks the settings as the watcher will take them.
func (s *DNS) Validate() error {
	if _, err := s.config().WithDefaults(); err != nil {
		return err
	}
	if s.Protocol != "" {
		if _, err := caddy.GetModule("llmedge.protocols." + s.Protocol); err != nil {
			return fmt.Errorf("dns source %s: unknown protocol %q (want one of %s)", s.Name, s.Protocol,
				strings.Join(moduleNames("llmedge.protocols"), ", "))
		}
	}
	return nil
}

// Open implements Source: it joins the running watcher of these
// settings, or starts one.
func (s *DNS) Open(env Env) (discovery.Source, func(), error) {
	w, release, err := AcquireDNSWatcher(env.Kept, s.config())
	if err != nil {
		return nil, nil, err
	}
	return w, release, nil
}

// ActiveHealthChecks implements ActiveChecked: a DNS record says nothing
// of its replica's health (and a cached one may outlive it), so the app
// probes the replicas itself.
func (*DNS) ActiveHealthChecks() bool { return true }

// UnmarshalCaddyfile parses
//
//	source dns <name> {
//		type        A|SRV
//		port        <port>
//		scheme      http|https
//		protocol    <protocol>
//		family      any|ipv4|ipv6
//		resolver    <ip[:port]>...
//		min_refresh <duration>
//		max_refresh <duration>
//		timeout     <duration>
//	}
func (s *DNS) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // the source's name
	if d.NextArg() {
		s.Name = d.Val()
	}
	if d.NextArg() {
		return d.ArgErr()
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		opt := d.Val()
		switch opt {
		case "resolver", "resolvers":
			args := d.RemainingArgs()
			if len(args) == 0 {
				return d.ArgErr()
			}
			s.Resolvers = append(s.Resolvers, args...)
			continue
		case "name", "type", "port", "scheme", "protocol", "family", "min_refresh", "max_refresh", "timeout":
		default:
			return d.Errf("unrecognized dns source option %q", opt)
		}
		if !d.NextArg() {
			return d.ArgErr()
		}
		val := d.Val()
		if d.NextArg() {
			return d.ArgErr()
		}
		switch opt {
		case "name":
			s.Name = val
		case "type":
			s.Type = val
		case "scheme":
			s.Scheme = val
		case "protocol":
			s.Protocol = val
		case "family":
			s.Family = val
		case "port":
			n, err := strconv.Atoi(val)
			if err != nil || n < 1 || n > 65535 {
				return d.Errf("dns source port %q: want a port number", val)
			}
			s.Port = n
		default: // the durations
			dur, err := caddy.ParseDuration(val)
			if err != nil || dur <= 0 {
				return d.Errf("dns source %s %q: want a positive duration", opt, val)
			}
			*map[string]*caddy.Duration{"min_refresh": &s.MinRefresh, "max_refresh": &s.MaxRefresh, "timeout": &s.Timeout}[opt] = caddy.Duration(dur)
		}
	}
	if s.Name == "" {
		return d.Err("dns source: want a name to resolve")
	}
	// Mistakes such as a port on an SRV name are reported at their line,
	// not when the configuration loads.
	if !strings.Contains(s.Name, "{") {
		if _, err := s.config().WithDefaults(); err != nil {
			return d.WrapErr(err)
		}
	}
	return nil
}

// sharedDNSWatcher is a running DNS watcher kept across config reloads,
// keyed by its complete settings (as the Consul watchers are).
type sharedDNSWatcher struct{ *discovery.DNSWatcher }

func (s sharedDNSWatcher) Destruct() error {
	s.Stop()
	return nil
}

// AcquireDNSWatcher returns the running watcher for cfg in kept, starting
// one if none runs, and the function that releases it (the last release
// stops it). A nil kept shares the watcher with nobody.
func AcquireDNSWatcher(kept *keep.Store, cfg discovery.DNSConfig) (*discovery.DNSWatcher, func(), error) {
	if kept == nil {
		kept = keep.New()
	}
	cfg, err := cfg.WithDefaults()
	if err != nil {
		return nil, nil, err
	}
	key, err := json.Marshal(cfg)
	if err != nil {
		return nil, nil, err
	}
	k := "llmsource.dns " + string(key)
	v, _, err := kept.LoadOrNew(k, func() (any, error) {
		// Not the config's logger: the watcher outlives the config.
		w, err := discovery.NewDNSWatcher(cfg, caddy.Log().Named("llmedge.dns"))
		if err != nil {
			return nil, err
		}
		w.Start()
		return sharedDNSWatcher{w}, nil
	})
	if err != nil {
		return nil, nil, err
	}
	return v.(sharedDNSWatcher).DNSWatcher, func() { _, _ = kept.Delete(k) }, nil
}

// Interface guards.
var (
	_ Source                = (*DNS)(nil)
	_ ActiveChecked         = (*DNS)(nil)
	_ caddy.Validator       = (*DNS)(nil)
	_ caddyfile.Unmarshaler = (*DNS)(nil)
)
