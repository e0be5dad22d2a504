package discovery

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
)

// DNSConfig selects the replicas of a model in DNS: a name's A/AAAA
// records with a configured port (a Kubernetes headless Service, Consul
// DNS's <service>.service.consul), or its SRV records, which carry each
// replica's port and target (Consul's _<service>._tcp.service.consul,
// Nomad through Consul, any zone).
type DNSConfig struct {
	// Name is the name to resolve (required).
	Name string `json:"name"`
	// Type is DNSTypeA (A and AAAA records) or DNSTypeSRV; default SRV for
	// a name whose first label starts with "_", else A.
	Type string `json:"type,omitempty"`
	// Port is the replicas' port with A/AAAA records (required there);
	// SRV records carry their own.
	Port int `json:"port,omitempty"`
	// Scheme is "http" (default) or "https".
	Scheme string `json:"scheme,omitempty"`
	// Protocol is the replicas' API dialect; empty is the model's.
	Protocol string `json:"protocol,omitempty"`
	// Family is DNSFamilyAny (default: A and AAAA), DNSFamilyIPv4 or
	// DNSFamilyIPv6.
	Family string `json:"family,omitempty"`
	// Resolvers are the DNS servers asked, ip:port (or ip, port 53), in
	// order; default the nameservers of /etc/resolv.conf, whose search
	// list then applies to a relative name.
	Resolvers []string `json:"resolvers,omitempty"`
	// MinRefresh and MaxRefresh bound the pause before the next lookup,
	// which is the answer's TTL: a TTL of 0 (Consul DNS's default) is not
	// a reason to ask without pause, nor a day's TTL to miss changes for a
	// day. Defaults 1s and 60s. After a failed lookup the pause starts at
	// MinRefresh and doubles up to MaxRefresh.
	MinRefresh time.Duration `json:"min_refresh,omitempty"`
	MaxRefresh time.Duration `json:"max_refresh,omitempty"`
	// Timeout bounds each query to one server; default 2s.
	Timeout time.Duration `json:"timeout,omitempty"`
}

// Values and defaults of DNSConfig.
const (
	DNSTypeA          = "A"
	DNSTypeSRV        = "SRV"
	DNSFamilyAny      = "any"
	DNSFamilyIPv4     = "ipv4"
	DNSFamilyIPv6     = "ipv6"
	DefaultMinRefresh = time.Second
	DefaultMaxRefresh = time.Minute
	DefaultDNSTimeout = 2 * time.Second
)

// WithDefaults returns c with its defaults filled in, or an error naming
// what is wrong.
func (c DNSConfig) WithDefaults() (DNSConfig, error) {
	c.Name = strings.TrimSpace(c.Name)
	if c.Name == "" || c.Name == "." {
		return c, errors.New("dns source: no name to resolve")
	}
	c.Type = strings.ToUpper(c.Type)
	switch c.Type {
	case "":
		c.Type = DNSTypeA
		if strings.HasPrefix(c.Name, "_") {
			c.Type = DNSTypeSRV
		}
	case "AAAA": // A with only the IPv6 family
		c.Type = DNSTypeA
		if c.Family == "" {
			c.Family = DNSFamilyIPv6
		}
	case DNSTypeA, DNSTypeSRV:
	default:
		return c, fmt.Errorf("dns source %s: type %q: want A or SRV", c.Name, c.Type)
	}
	switch {
	case c.Type == DNSTypeA && c.Port == 0:
		return c, fmt.Errorf("dns source %s: A/AAAA records carry no port: set port", c.Name)
	case c.Type == DNSTypeSRV && c.Port != 0:
		return c, fmt.Errorf("dns source %s: SRV records carry their port: drop port", c.Name)
	case c.Port < 0 || c.Port > 65535:
		return c, fmt.Errorf("dns source %s: port %d out of range", c.Name, c.Port)
	}
	c.Scheme = strings.ToLower(c.Scheme)
	switch c.Scheme {
	case "":
		c.Scheme = "http"
	case "http", "https":
	default:
		return c, fmt.Errorf("dns source %s: scheme %q: want http or https", c.Name, c.Scheme)
	}
	c.Family = strings.ToLower(c.Family)
	switch c.Family {
	case "":
		c.Family = DNSFamilyAny
	case DNSFamilyAny, DNSFamilyIPv4, DNSFamilyIPv6:
	default:
		return c, fmt.Errorf("dns source %s: family %q: want any, ipv4 or ipv6", c.Name, c.Family)
	}
	if c.MinRefresh <= 0 {
		c.MinRefresh = DefaultMinRefresh
	}
	if c.MaxRefresh <= 0 {
		c.MaxRefresh = max(DefaultMaxRefresh, c.MinRefresh)
	}
	if c.MaxRefresh < c.MinRefresh {
		return c, fmt.Errorf("dns source %s: max_refresh %s is below min_refresh %s", c.Name, c.MaxRefresh, c.MinRefresh)
	}
	if c.Timeout <= 0 {
		c.Timeout = DefaultDNSTimeout
	}
	for _, s := range c.Resolvers {
		if _, err := resolverAddr(s); err != nil {
			return c, err
		}
	}
	return c, nil
}

// refresh is the pause before the next lookup after an answer whose TTL
// is ttl: the TTL within [lo, hi]; an answer without one waits lo.
func refresh(ttl, lo, hi time.Duration) time.Duration {
	if ttl < 0 {
		return lo
	}
	return min(max(ttl, lo), hi)
}

// DNSWatcher resolves a name again each time its answer's TTL runs out
// and hands complete sets to its subscribers. What it keeps to:
//   - a failed lookup (no server answers, SERVFAIL, REFUSED) keeps the
//     last known good set, and is retried after MinRefresh, doubling up
//     to MaxRefresh; the failure is logged when it starts or changes, and
//     the recovery when it ends, not at every lookup;
//   - an empty answer (NXDOMAIN, or no records) empties a non-empty set
//     only once a second lookup, MinRefresh later, confirms it: a zone
//     being rewritten or one resolver of several lagging behind must not
//     take every replica out at once;
//   - identical answers are not passed on.
type DNSWatcher struct {
	cfg      DNSConfig
	resolver *resolver
	logger   *zap.Logger

	ctx      context.Context
	cancel   context.CancelFunc
	done     chan struct{}
	started  bool
	stopOnce sync.Once

	published // the set found, its subscribers; its mu guards the fields below too
	// emptySeen is true while an empty answer awaits its confirmation.
	emptySeen bool
}

// NewDNSWatcher returns a watcher of cfg's name; Start runs it. logger
// may be nil.
func NewDNSWatcher(cfg DNSConfig, logger *zap.Logger) (*DNSWatcher, error) {
	cfg, err := cfg.WithDefaults()
	if err != nil {
		return nil, err
	}
	r, err := newResolver(cfg)
	if err != nil {
		return nil, err
	}
	if logger == nil {
		logger = zap.NewNop()
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &DNSWatcher{
		cfg:       cfg,
		resolver:  r,
		logger:    logger.With(zap.String("dns_name", cfg.Name), zap.String("dns_type", cfg.Type)),
		ctx:       ctx,
		cancel:    cancel,
		done:      make(chan struct{}),
		published: newPublished(),
	}, nil
}

// Start runs the lookup loop in its own goroutine. Call it once.
func (w *DNSWatcher) Start() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.started {
		return
	}
	w.started = true
	go w.run()
}

// Stop ends the loop, aborting a lookup in flight, and waits for it.
// Subscribers get no more calls. It is safe to call more than once.
func (w *DNSWatcher) Stop() {
	w.stopOnce.Do(func() {
		w.cancel()
		w.mu.Lock()
		started := w.started
		w.started = true // a Start after Stop does nothing
		w.subs = map[uint64]func([]Instance){}
		w.mu.Unlock()
		if started {
			<-w.done
		}
	})
}

// Status implements Source.
func (w *DNSWatcher) Status() Status { return w.status("dns", w.cfg.Name) }

func (w *DNSWatcher) run() {
	defer close(w.done)
	var backoff time.Duration
	for {
		ctx, cancel := context.WithTimeout(w.ctx, w.lookupDeadline())
		a, err := w.resolver.resolve(ctx, w.cfg)
		cancel()
		if w.ctx.Err() != nil {
			return
		}
		var pause time.Duration
		if err != nil {
			backoff = min(max(2*backoff, w.cfg.MinRefresh), w.cfg.MaxRefresh)
			w.failed(err)
			pause = backoff
		} else {
			backoff = 0
			pause = w.answered(a)
		}
		t := time.NewTimer(pause)
		select {
		case <-w.ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// lookupDeadline bounds one resolution: every server asked for every
// record type of every name tried, plus the SRV targets' addresses.
func (w *DNSWatcher) lookupDeadline() time.Duration {
	return time.Duration(4*len(w.resolver.servers)*len(w.resolver.names))*w.cfg.Timeout + w.cfg.MaxRefresh
}

// failed records a failed lookup; the set stays as it was.
func (w *DNSWatcher) failed(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.lastErr == nil || w.lastErr.Error() != err.Error() {
		w.logger.Warn("dns lookup failed; keeping the last known good replicas",
			zap.Error(err), zap.Int("replicas", len(w.current)))
	}
	w.lastErr = err
}

// answered takes a successful lookup's answer and returns the pause
// before the next.
func (w *DNSWatcher) answered(a answer) time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.lastErr != nil {
		w.logger.Info("dns lookups answered again", zap.Int("replicas", len(a.instances)))
		w.lastErr = nil
	}
	w.lastSync = time.Now()
	if len(a.instances) == 0 && len(w.current) > 0 && !w.emptySeen {
		w.emptySeen = true
		w.logger.Warn("dns answer is empty; keeping the replicas until a second lookup confirms it",
			zap.Int("replicas", len(w.current)), zap.Duration("confirm_in", w.cfg.MinRefresh))
		return w.cfg.MinRefresh
	}
	w.emptySeen = false
	w.deliver(a.instances, w.logger, "dns")
	return refresh(a.ttl, w.cfg.MinRefresh, w.cfg.MaxRefresh)
}

var _ Source = (*DNSWatcher)(nil)
