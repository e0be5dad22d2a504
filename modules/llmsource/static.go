package llmsource

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/llmedge/llmedge/discovery"
)

func init() {
	caddy.RegisterModule(Static{})
}

// Static is a fixed list of replicas (llmedge.sources.static).
type Static struct {
	// Replicas are base URLs, "http://host:port[/prefix]"; a "<protocol>+"
	// prefix ("ollama+http://10.0.0.7:11434") sets that replica's protocol.
	Replicas []string `json:"replicas,omitempty"`
	// Weights scale replicas' shares of traffic, by URL (without the
	// protocol prefix); default 1.
	Weights map[string]int `json:"weights,omitempty"`

	instances []discovery.Instance
}

// CaddyModule returns the Caddy module information.
func (Static) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: Namespace + ".static", New: func() caddy.Module { return new(Static) }}
}

// Provision parses the replica list.
func (s *Static) Provision(caddy.Context) error {
	var urls, protos []string
	for _, addr := range s.Replicas {
		proto, u, err := SplitProtocol(addr)
		if err != nil {
			return err
		}
		urls, protos = append(urls, u), append(protos, proto)
	}
	list, err := discovery.NewStatic(urls)
	if err != nil {
		return err
	}
	s.instances = list.Instances()
	for i := range s.instances {
		s.instances[i].Protocol = protos[i]
		if w, ok := s.Weights[urls[i]]; ok {
			s.instances[i].Weight = w
		}
	}
	for u, w := range s.Weights {
		if !slices.Contains(urls, u) {
			return fmt.Errorf("weight for %q, which is not a static replica", u)
		}
		if w < 1 {
			return fmt.Errorf("weight for %q: want a whole number ≥ 1, got %d", u, w)
		}
	}
	return nil
}

// Open implements Source.
func (s *Static) Open(Env) (discovery.Source, func(), error) {
	return discovery.NewStaticInstances(s.instances), func() {}, nil
}

// ActiveHealthChecks implements ActiveChecked: nobody else checks a
// static list.
func (*Static) ActiveHealthChecks() bool { return true }

// UnmarshalCaddyfile parses
//
//	source static <url>... {
//		weight <url> <n>
//	}
func (s *Static) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // the source's name
	if err := s.ParseReplicas(d); err != nil {
		return err
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		switch d.Val() {
		case "replicas":
			if err := s.ParseReplicas(d); err != nil {
				return err
			}
		case "weight":
			if err := s.ParseWeight(d); err != nil {
				return err
			}
		default:
			return d.Errf("unrecognized static source option %q", d.Val())
		}
	}
	return nil
}

// CheckAddress checks a replica address as the Caddyfile gives it, so
// that a mistake (a URL without its scheme) is reported at its line
// rather than when the configuration loads; one with a placeholder is
// checked once it is replaced, at load.
func CheckAddress(addr string) error {
	if strings.Contains(addr, "{") {
		return nil
	}
	_, u, err := SplitProtocol(addr)
	if err != nil {
		return err
	}
	_, err = discovery.NewStatic([]string{u})
	return err
}

// parseAddresses takes the remaining arguments as replica addresses.
func parseAddresses(d *caddyfile.Dispenser) ([]string, error) {
	args := d.RemainingArgs()
	for _, a := range args {
		if err := CheckAddress(a); err != nil {
			return nil, d.WrapErr(err)
		}
	}
	return args, nil
}

// ParseReplicas parses the replica addresses of a `static` line.
func (s *Static) ParseReplicas(d *caddyfile.Dispenser) error {
	args, err := parseAddresses(d)
	s.Replicas = append(s.Replicas, args...)
	return err
}

// ParseWeight parses the arguments of `weight <url> <n>`.
func (s *Static) ParseWeight(d *caddyfile.Dispenser) error {
	args := d.RemainingArgs()
	if len(args) != 2 {
		return d.Errf("weight: want <url> <n>")
	}
	n, err := strconv.Atoi(args[1])
	if err != nil || n < 1 {
		return d.Errf("weight %s: want a whole number ≥ 1, got %q", args[0], args[1])
	}
	if s.Weights == nil {
		s.Weights = map[string]int{}
	}
	s.Weights[args[0]] = n
	return nil
}

// SplitProtocol splits a replica address "<protocol>+http://..." into its
// protocol and URL; a plain URL has no protocol. The protocol must be a
// registered llmedge.protocols module.
func SplitProtocol(addr string) (string, string, error) {
	i := strings.Index(addr, "://")
	j := strings.IndexByte(addr, '+')
	if i < 0 || j < 0 || j > i {
		return "", addr, nil
	}
	proto := addr[:j]
	if _, err := caddy.GetModule("llmedge.protocols." + proto); err != nil {
		return "", "", fmt.Errorf("replica %q: unknown protocol %q (want one of %s)", addr, proto,
			strings.Join(moduleNames("llmedge.protocols"), ", "))
	}
	return proto, addr[j+1:], nil
}

// Interface guards.
var (
	_ Source                = (*Static)(nil)
	_ ActiveChecked         = (*Static)(nil)
	_ caddy.Provisioner     = (*Static)(nil)
	_ caddyfile.Unmarshaler = (*Static)(nil)
)
