package discovery

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/miekg/dns"
)

// This file asks DNS servers and reads their answers into replica sets.
// It talks DNS itself (github.com/miekg/dns) rather than through
// net.Resolver, which hides the records' TTLs: the re-resolve interval is
// the answer's TTL.

// resolvConfPath is the system's resolver configuration; a variable for
// tests.
var resolvConfPath = "/etc/resolv.conf"

// ednsSize is the UDP payload size advertised (DNS Flag Day 2020's value,
// which passes every path without fragmentation); a bigger answer comes
// truncated and is asked again over TCP.
const ednsSize = 1232

// resolver asks one name's records of the configured servers, the first
// that answers.
type resolver struct {
	servers []string // host:port
	// names are the names tried in order: the configured name, or with
	// the system's resolver the search list's expansions of it.
	names   []string
	timeout time.Duration
	udp     *dns.Client
	tcp     *dns.Client
}

func newResolver(cfg DNSConfig) (*resolver, error) {
	r := &resolver{timeout: cfg.Timeout}
	if len(cfg.Resolvers) > 0 {
		for _, s := range cfg.Resolvers {
			addr, err := resolverAddr(s)
			if err != nil {
				return nil, err
			}
			r.servers = append(r.servers, addr)
		}
		r.names = []string{dns.Fqdn(cfg.Name)}
	} else {
		conf, err := dns.ClientConfigFromFile(resolvConfPath)
		if err != nil {
			return nil, fmt.Errorf("dns source: no resolver configured and the system's unreadable: %w", err)
		}
		if len(conf.Servers) == 0 {
			return nil, fmt.Errorf("dns source: %s names no nameserver; configure a resolver", resolvConfPath)
		}
		for _, s := range conf.Servers {
			r.servers = append(r.servers, net.JoinHostPort(s, conf.Port))
		}
		// A relative name (a Service's short name in a Kubernetes pod) is
		// expanded through the search list, as the system's resolver does.
		r.names = conf.NameList(cfg.Name)
	}
	r.udp = &dns.Client{Net: "udp", Timeout: cfg.Timeout, UDPSize: ednsSize}
	r.tcp = &dns.Client{Net: "tcp", Timeout: cfg.Timeout}
	return r, nil
}

// resolverAddr checks a resolver address: host:port, or an IP alone
// (port 53).
func resolverAddr(s string) (string, error) {
	if ip, err := netip.ParseAddr(strings.Trim(s, "[]")); err == nil {
		return net.JoinHostPort(ip.String(), "53"), nil
	}
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return "", fmt.Errorf("dns source: resolver %q: want ip:port or ip", s)
	}
	if _, err := netip.ParseAddr(host); err != nil {
		return "", fmt.Errorf("dns source: resolver %q: want an IP address, not a name", s)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "", fmt.Errorf("dns source: resolver %q: bad port", s)
	}
	return s, nil
}

// exchange asks the servers in turn for name's records of type qtype and
// returns the first real answer: NOERROR or NXDOMAIN. A server that
// fails (no answer, SERVFAIL, REFUSED) passes the question on to the
// next; when all fail, the error says how the last did.
func (r *resolver) exchange(ctx context.Context, name string, qtype uint16) (*dns.Msg, error) {
	q := new(dns.Msg)
	q.SetQuestion(name, qtype)
	q.SetEdns0(ednsSize, false)
	var last error
	for _, server := range r.servers {
		resp, _, err := r.udp.ExchangeContext(ctx, q, server)
		if err == nil && resp.Truncated {
			resp, _, err = r.tcp.ExchangeContext(ctx, q, server)
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if err != nil {
			last = fmt.Errorf("%s %s at %s: %s", dns.TypeToString[qtype], name, server, describe(err))
			continue
		}
		if resp.Rcode != dns.RcodeSuccess && resp.Rcode != dns.RcodeNameError {
			last = fmt.Errorf("%s %s at %s: %s", dns.TypeToString[qtype], name, server, dns.RcodeToString[resp.Rcode])
			continue
		}
		return resp, nil
	}
	return nil, last
}

// describe says how an exchange failed in words that stay the same from
// one lookup to the next (not the random local port of a timeout), so
// that a lasting failure is logged once.
func describe(err error) string {
	var ne net.Error
	switch {
	case errors.As(err, &ne) && ne.Timeout():
		return "no answer (timed out)"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	default:
		return err.Error()
	}
}

// answer is what one resolution found.
type answer struct {
	instances []Instance
	// ttl is the least TTL of the records used (for an empty answer, the
	// zone's negative TTL); noTTL when the answer gave none.
	ttl time.Duration
}

// resolve finds the replicas: the name's addresses with the configured
// port, or its SRV records' targets and ports.
func (r *resolver) resolve(ctx context.Context, cfg DNSConfig) (answer, error) {
	last := answer{ttl: noTTL}
	for _, name := range r.names {
		var a answer
		var err error
		if cfg.Type == DNSTypeSRV {
			a, err = r.resolveSRV(ctx, name, cfg)
		} else {
			a, err = r.resolveAddrs(ctx, name, cfg)
		}
		if err != nil {
			return answer{}, err
		}
		if len(a.instances) > 0 {
			return a, nil
		}
		last = a // an empty answer: the search list's next name
	}
	return last, nil
}

func (r *resolver) resolveAddrs(ctx context.Context, name string, cfg DNSConfig) (answer, error) {
	ips, ttl, err := r.addrs(ctx, name, cfg.Family, nil)
	if err != nil {
		return answer{}, err
	}
	out := answer{ttl: ttl}
	for _, ip := range ips {
		out.instances = append(out.instances, dnsInstance(name, ip, cfg.Port, 0, cfg))
	}
	out.instances = normalize(out.instances)
	return out, nil
}

// addrs returns name's addresses of the family's types and their least
// TTL (the negative TTL when there are none). Records already at hand (an
// SRV answer's additional section) are used without asking.
func (r *resolver) addrs(ctx context.Context, name, family string, extra []dns.RR) ([]netip.Addr, time.Duration, error) {
	var ips []netip.Addr
	ttl := noTTL
	for _, qtype := range familyTypes(family) {
		rrs := matching(extra, name, qtype)
		if len(rrs) == 0 {
			resp, err := r.exchange(ctx, name, qtype)
			if err != nil {
				return nil, 0, err
			}
			rrs = resp.Answer
			if !hasType(rrs, qtype) {
				ttl = minTTL(ttl, negativeTTL(resp))
			}
		}
		for _, rr := range rrs {
			switch rr := rr.(type) {
			case *dns.A:
				if ip, ok := netip.AddrFromSlice(rr.A.To4()); ok && qtype == dns.TypeA {
					ips = append(ips, ip)
					ttl = minTTL(ttl, rrTTL(rr))
				}
			case *dns.AAAA:
				if ip, ok := netip.AddrFromSlice(rr.AAAA.To16()); ok && qtype == dns.TypeAAAA {
					ips = append(ips, ip)
					ttl = minTTL(ttl, rrTTL(rr))
				}
			case *dns.CNAME:
				ttl = minTTL(ttl, rrTTL(rr)) // the chain's links expire too
			}
		}
	}
	return ips, ttl, nil
}

func (r *resolver) resolveSRV(ctx context.Context, name string, cfg DNSConfig) (answer, error) {
	resp, err := r.exchange(ctx, name, dns.TypeSRV)
	if err != nil {
		return answer{}, err
	}
	srvs, ttl := preferredSRV(resp.Answer)
	if len(srvs) == 0 {
		return answer{ttl: minTTL(ttl, negativeTTL(resp))}, nil
	}
	out := answer{ttl: ttl}
	for _, srv := range srvs {
		ips, ipTTL, err := r.addrs(ctx, srv.Target, cfg.Family, resp.Extra)
		if err != nil {
			return answer{}, fmt.Errorf("SRV target %s: %w", srv.Target, err)
		}
		out.ttl = minTTL(out.ttl, ipTTL)
		for _, ip := range ips {
			out.instances = append(out.instances, dnsInstance(srv.Target, ip, int(srv.Port), int(srv.Weight), cfg))
		}
	}
	out.instances = normalize(out.instances)
	return out, nil
}

// preferredSRV keeps the SRV records of the lowest priority value, the
// ones RFC 2782 says to use while any is listed, and returns the least
// TTL of all SRV records read. A target of "." (the service is decidedly
// not available) counts for nothing.
func preferredSRV(rrs []dns.RR) ([]*dns.SRV, time.Duration) {
	var out []*dns.SRV
	ttl := noTTL
	for _, rr := range rrs {
		switch rr := rr.(type) {
		case *dns.SRV:
			ttl = minTTL(ttl, rrTTL(rr))
			if rr.Target == "." || rr.Port == 0 {
				continue
			}
			if len(out) > 0 && rr.Priority > out[0].Priority {
				continue
			}
			if len(out) > 0 && rr.Priority < out[0].Priority {
				out = out[:0]
			}
			out = append(out, rr)
		case *dns.CNAME:
			ttl = minTTL(ttl, rrTTL(rr))
		}
	}
	return out, ttl
}

func dnsInstance(owner string, ip netip.Addr, port, weight int, cfg DNSConfig) Instance {
	addr := net.JoinHostPort(ip.String(), strconv.Itoa(port))
	url := cfg.Scheme + "://" + addr
	return Instance{
		ID:       strings.TrimSuffix(owner, ".") + " " + addr,
		URL:      url,
		Address:  addr,
		Scheme:   cfg.Scheme,
		Protocol: cfg.Protocol,
		Weight:   weight, // 0: the model's default (an A record has none)
	}
}

func familyTypes(family string) []uint16 {
	switch family {
	case DNSFamilyIPv4:
		return []uint16{dns.TypeA}
	case DNSFamilyIPv6:
		return []uint16{dns.TypeAAAA}
	default:
		return []uint16{dns.TypeA, dns.TypeAAAA}
	}
}

// matching returns the records of rrs owned by name of type qtype.
func matching(rrs []dns.RR, name string, qtype uint16) []dns.RR {
	var out []dns.RR
	for _, rr := range rrs {
		if h := rr.Header(); h.Rrtype == qtype && strings.EqualFold(h.Name, name) {
			out = append(out, rr)
		}
	}
	return out
}

func hasType(rrs []dns.RR, qtype uint16) bool {
	return slices.ContainsFunc(rrs, func(rr dns.RR) bool { return rr.Header().Rrtype == qtype })
}

// negativeTTL is how long an empty answer may be cached (RFC 2308: the
// least of the SOA record's TTL and its minimum field); noTTL when the
// answer carries no SOA.
func negativeTTL(resp *dns.Msg) time.Duration {
	for _, rr := range resp.Ns {
		if soa, ok := rr.(*dns.SOA); ok {
			return time.Duration(min(soa.Hdr.Ttl, soa.Minttl)) * time.Second
		}
	}
	return noTTL
}

func rrTTL(rr dns.RR) time.Duration { return time.Duration(rr.Header().Ttl) * time.Second }

// noTTL marks a TTL not known yet (0 is a record's real TTL: do not
// cache).
const noTTL time.Duration = -1

// minTTL is the lesser of two TTLs, either of which may be noTTL.
func minTTL(a, b time.Duration) time.Duration {
	switch {
	case a < 0:
		return b
	case b < 0:
		return a
	default:
		return min(a, b)
	}
}
