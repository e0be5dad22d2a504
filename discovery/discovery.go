// Package discovery finds the replicas of a model type: from a static list
// of URLs, or from a Consul service watched with blocking queries on
// Consul's health API. It hands out complete, deduplicated replica sets to
// subscribers (the pools of the gateway, the consul upstream source), so
// that the request path only ever reads an atomically swapped snapshot and
// never waits on Consul.
//
// The package does not depend on Caddy; the Caddy modules share watchers
// across config reloads and convert instances into pool replicas.
package discovery

import (
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Instance is one replica as a source describes it. Empty or zero override
// fields mean "the model's default".
type Instance struct {
	// ID identifies the instance in its source: the Consul service ID, or
	// the URL of a static entry.
	ID string
	// URL is the replica's base URL, scheme://host:port (a static entry may
	// carry a path prefix).
	URL string
	// Address is host:port, what a plain reverse proxy dials.
	Address string
	// Scheme is "http" or "https".
	Scheme string
	// Model is the model name to send upstream (Consul Meta "model").
	Model string
	// Protocol is the replica's API dialect (Consul Meta "protocol").
	Protocol string
	// Weight scales the replica's share of traffic (Consul Meta "weight",
	// else the service's passing weight).
	Weight int
	// MaxConcurrency caps outstanding requests (Consul Meta "max_concurrency").
	MaxConcurrency int
	// Zone is where the replica runs (a Kubernetes endpoint's zone), for
	// status and logs; empty when the source does not say.
	Zone string
}

// Status is a source's state, for readiness reports and logs.
type Status struct {
	// Source is "consul", "kubernetes" or "static".
	Source string `json:"source"`
	// Service names what is watched (the Consul service), if anything.
	Service string `json:"service,omitempty"`
	// Synced is true once the source has produced a replica set: at once
	// for a static list, after the first successful query for Consul.
	// It stays true while Consul is unreachable: the last-known-good set is
	// kept.
	Synced bool `json:"synced"`
	// Instances is the size of the current set.
	Instances int `json:"instances"`
	// LastError is the error of the last query, cleared by the next success.
	LastError string `json:"last_error,omitempty"`
	// LastSync is when the last successful query answered.
	LastSync time.Time `json:"last_sync,omitzero"`
}

// Source produces replica sets.
type Source interface {
	// Subscribe registers fn to receive every new set, and calls it at once
	// with the current set when the source has synced. Calls to fn are
	// serialized and come from the source's goroutine (or from Subscribe);
	// fn must be quick, must not modify the slice and must not call back
	// into the source. The returned function unsubscribes: once it has
	// returned, fn is not called again.
	Subscribe(fn func([]Instance)) (cancel func())
	// Status reports the source's state.
	Status() Status
}

// Static is a fixed list of replica URLs; it is synced from the start.
type Static struct {
	instances []Instance
}

// NewStatic parses base URLs ("http://host:port[/prefix]").
func NewStatic(urls []string) (*Static, error) {
	s := &Static{}
	for _, raw := range urls {
		if !strings.Contains(raw, "://") {
			return nil, fmt.Errorf("replica address %q has no scheme: want http://%s or https://%s", raw, raw, raw)
		}
		u, err := url.Parse(raw)
		if err != nil {
			return nil, fmt.Errorf("replica address %q: %w", raw, err)
		}
		if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("replica address %q: want http://host:port or https://host:port", raw)
		}
		if u.RawQuery != "" || u.Fragment != "" {
			return nil, fmt.Errorf("replica address %q: no query or fragment allowed", raw)
		}
		base := strings.TrimRight(u.String(), "/")
		s.instances = append(s.instances, Instance{ID: base, URL: base, Address: hostPort(u), Scheme: u.Scheme})
	}
	return s, nil
}

// NewStaticInstances is a Static source of ready-made instances.
func NewStaticInstances(list []Instance) *Static { return &Static{instances: slices.Clone(list)} }

// Instances returns the list.
func (s *Static) Instances() []Instance { return slices.Clone(s.instances) }

// Subscribe calls fn once with the list; there are no updates.
func (s *Static) Subscribe(fn func([]Instance)) func() {
	fn(s.Instances())
	return func() {}
}

// Status reports a synced static list.
func (s *Static) Status() Status {
	return Status{Source: "static", Synced: true, Instances: len(s.instances)}
}

func hostPort(u *url.URL) string {
	if u.Port() != "" {
		return u.Host
	}
	if u.Scheme == "https" {
		return net.JoinHostPort(u.Hostname(), "443")
	}
	return net.JoinHostPort(u.Hostname(), "80")
}

// Meta keys a Consul instance may carry to override the model's defaults.
const (
	MetaProtocol       = "protocol"
	MetaModel          = "model"
	MetaWeight         = "weight"
	MetaMaxConcurrency = "max_concurrency"
	MetaScheme         = "scheme"
)

// fromMeta builds an instance from a Consul service entry's parts. Bad
// Meta values are reported and ignored (the model's default applies).
func fromMeta(id, host string, port int, meta map[string]string, passingWeight int) (Instance, []string) {
	var problems []string
	inst := Instance{ID: id, Scheme: "http", Model: meta[MetaModel], Protocol: meta[MetaProtocol]}
	if s := strings.ToLower(strings.TrimSpace(meta[MetaScheme])); s != "" {
		if s == "http" || s == "https" {
			inst.Scheme = s
		} else {
			problems = append(problems, fmt.Sprintf("Meta scheme %q is neither http nor https; using http", meta[MetaScheme]))
		}
	}
	if v, ok := meta[MetaWeight]; ok {
		if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && n > 0 {
			inst.Weight = n
		} else {
			problems = append(problems, fmt.Sprintf("Meta weight %q is not a positive whole number; ignored", v))
		}
	} else if passingWeight > 0 {
		inst.Weight = passingWeight
	}
	if v, ok := meta[MetaMaxConcurrency]; ok {
		if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && n >= 0 {
			inst.MaxConcurrency = n
		} else {
			problems = append(problems, fmt.Sprintf("Meta max_concurrency %q is not a non-negative whole number; ignored", v))
		}
	}
	inst.Address = net.JoinHostPort(host, strconv.Itoa(port))
	inst.URL = inst.Scheme + "://" + inst.Address
	return inst, problems
}

// normalize sorts instances by URL (then ID) and keeps one per URL, so
// that two registrations of the same address count once and equal sets
// compare equal.
func normalize(list []Instance) []Instance {
	slices.SortFunc(list, func(a, b Instance) int {
		if c := strings.Compare(a.URL, b.URL); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return slices.CompactFunc(list, func(a, b Instance) bool { return a.URL == b.URL })
}
