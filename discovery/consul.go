package discovery

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/consul/api"
	"go.uber.org/zap"
	"golang.org/x/time/rate"
)

// ConsulConfig says how to reach Consul. Empty fields take the environment
// variables every Consul tool reads (CONSUL_HTTP_ADDR, CONSUL_HTTP_TOKEN,
// CONSUL_HTTP_TOKEN_FILE, CONSUL_HTTP_AUTH, CONSUL_HTTP_SSL,
// CONSUL_HTTP_SSL_VERIFY, CONSUL_CACERT, CONSUL_CAPATH, CONSUL_CLIENT_CERT,
// CONSUL_CLIENT_KEY, CONSUL_TLS_SERVER_NAME, CONSUL_NAMESPACE,
// CONSUL_PARTITION), then Consul's defaults (http://127.0.0.1:8500).
type ConsulConfig struct {
	// Address is host:port, or a URL with scheme http, https or unix.
	Address string `json:"address,omitempty"`
	// Scheme is http or https.
	Scheme string `json:"scheme,omitempty"`
	// Token is the ACL token; TokenFile a file holding it.
	Token     string `json:"token,omitempty"`
	TokenFile string `json:"token_file,omitempty"`
	// Datacenter to query; empty is the agent's.
	Datacenter string `json:"datacenter,omitempty"`
	// Namespace and Partition (Consul Enterprise).
	Namespace string `json:"namespace,omitempty"`
	Partition string `json:"partition,omitempty"`
	// HTTPAuth is "user:password" for HTTP basic auth in front of Consul.
	HTTPAuth string `json:"http_auth,omitempty"`
	// TLS towards Consul.
	CAFile             string `json:"ca_file,omitempty"`
	CAPath             string `json:"ca_path,omitempty"`
	CertFile           string `json:"cert_file,omitempty"`
	KeyFile            string `json:"key_file,omitempty"`
	TLSServerName      string `json:"tls_server_name,omitempty"`
	InsecureSkipVerify bool   `json:"insecure_skip_verify,omitempty"`
}

// Resolve returns c with the environment and Consul's defaults filled in
// where c is empty. Two resolved configs that are equal reach the same
// Consul the same way.
func (c ConsulConfig) Resolve() ConsulConfig {
	env := api.DefaultConfig()
	pick := func(v *string, def string) {
		if *v == "" {
			*v = def
		}
	}
	pick(&c.Address, env.Address)
	pick(&c.Scheme, env.Scheme)
	pick(&c.TokenFile, env.TokenFile)
	if c.Token == "" && c.TokenFile == "" {
		c.Token = env.Token
	}
	pick(&c.Datacenter, env.Datacenter)
	pick(&c.Namespace, env.Namespace)
	pick(&c.Partition, env.Partition)
	if c.HTTPAuth == "" && env.HttpAuth != nil {
		c.HTTPAuth = env.HttpAuth.Username + ":" + env.HttpAuth.Password
	}
	pick(&c.CAFile, env.TLSConfig.CAFile)
	pick(&c.CAPath, env.TLSConfig.CAPath)
	pick(&c.CertFile, env.TLSConfig.CertFile)
	pick(&c.KeyFile, env.TLSConfig.KeyFile)
	pick(&c.TLSServerName, env.TLSConfig.Address)
	c.InsecureSkipVerify = c.InsecureSkipVerify || env.TLSConfig.InsecureSkipVerify
	return c
}

// NewClient returns a Consul client for the resolved c and its transport,
// whose idle connections the caller closes when done. The client has no
// timeout of its own: give every call a context deadline.
func NewClient(c ConsulConfig) (*api.Client, *http.Transport, error) {
	c = c.Resolve()
	transport := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:          16,
		MaxIdleConnsPerHost:   4,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
	ac := &api.Config{
		Address:    c.Address,
		Scheme:     c.Scheme,
		Datacenter: c.Datacenter,
		Namespace:  c.Namespace,
		Partition:  c.Partition,
		Token:      c.Token,
		TokenFile:  c.TokenFile,
		Transport:  transport,
		TLSConfig: api.TLSConfig{
			Address:            c.TLSServerName,
			CAFile:             c.CAFile,
			CAPath:             c.CAPath,
			CertFile:           c.CertFile,
			KeyFile:            c.KeyFile,
			InsecureSkipVerify: c.InsecureSkipVerify,
		},
	}
	if c.HTTPAuth != "" {
		user, pass, _ := strings.Cut(c.HTTPAuth, ":")
		ac.HttpAuth = &api.HttpBasicAuth{Username: user, Password: pass}
	}
	client, err := api.NewClient(ac)
	if err != nil {
		return nil, nil, fmt.Errorf("consul client: %w", err)
	}
	return client, transport, nil
}

// WatchConfig selects the Consul service instances of a model.
type WatchConfig struct {
	// Service is the Consul service name (required).
	Service string `json:"service"`
	// Tag keeps only instances with this tag.
	Tag string `json:"tag,omitempty"`
	// Filter is a Consul filter expression over the health entries, e.g.
	// `Service.Meta.gpu == "a100"`.
	Filter string `json:"filter,omitempty"`
	// Datacenter overrides the client's datacenter.
	Datacenter string `json:"datacenter,omitempty"`
	// Wait is the blocking query's wait time; default 5m (Consul's), at
	// most 10m.
	Wait time.Duration `json:"wait,omitempty"`
	// Rate bounds queries per second (a token bucket of burst 2, so that
	// flapping checks cannot make the loop spin); default 5.
	Rate float64 `json:"rate,omitempty"`
	// MinBackoff and MaxBackoff bound the pause after a failed query, which
	// doubles on each failure; defaults 250ms and 10s.
	MinBackoff time.Duration `json:"min_backoff,omitempty"`
	MaxBackoff time.Duration `json:"max_backoff,omitempty"`
}

// Defaults of WatchConfig.
const (
	DefaultWait       = 5 * time.Minute
	MaxWait           = 10 * time.Minute
	DefaultRate       = 5
	RateBurst         = 2
	DefaultMinBackoff = 250 * time.Millisecond
	DefaultMaxBackoff = 10 * time.Second
)

// callSlack is added to every call's deadline beyond wait + wait/16 (the
// most Consul may hold a blocking query); a variable for tests.
var callSlack = 10 * time.Second

func (wc WatchConfig) withDefaults() WatchConfig {
	if wc.Wait <= 0 {
		wc.Wait = DefaultWait
	}
	wc.Wait = min(wc.Wait, MaxWait)
	if wc.Rate <= 0 {
		wc.Rate = DefaultRate
	}
	if wc.MinBackoff <= 0 {
		wc.MinBackoff = DefaultMinBackoff
	}
	if wc.MaxBackoff <= 0 {
		wc.MaxBackoff = DefaultMaxBackoff
	}
	wc.MaxBackoff = max(wc.MaxBackoff, wc.MinBackoff)
	return wc
}

// Watcher follows the passing instances of one Consul service with
// blocking queries on the health API and hands complete sets to its
// subscribers. The rules it keeps (see docs/engines.md): every call has a
// deadline; the index is reset when it goes backwards (and after an error)
// and a zero index is never sent; a token bucket bounds the query rate; identical answers are
// not passed on; after an error it backs off exponentially and keeps the
// last-known-good set.
type Watcher struct {
	client    *api.Client
	transport *http.Transport
	cfg       WatchConfig
	logger    *zap.Logger
	limiter   *rate.Limiter
	slack     time.Duration

	ctx      context.Context
	cancel   context.CancelFunc
	done     chan struct{}
	started  bool
	stopOnce sync.Once

	published // the set found, its subscribers; its mu guards the fields below too
	failures  int
}

// NewConsulWatcher returns a watcher of wc's service through a client for
// c; Start runs it. logger may be nil.
func NewConsulWatcher(c ConsulConfig, wc WatchConfig, logger *zap.Logger) (*Watcher, error) {
	if wc.Service == "" {
		return nil, errors.New("consul watcher: no service name")
	}
	wc = wc.withDefaults()
	client, transport, err := NewClient(c)
	if err != nil {
		return nil, err
	}
	if logger == nil {
		logger = zap.NewNop()
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Watcher{
		client:    client,
		transport: transport,
		cfg:       wc,
		logger:    logger.With(zap.String("consul_service", wc.Service)),
		limiter:   rate.NewLimiter(rate.Limit(wc.Rate), RateBurst),
		slack:     callSlack,
		ctx:       ctx,
		cancel:    cancel,
		done:      make(chan struct{}),
		published: newPublished(),
	}, nil
}

// Start runs the watch loop in its own goroutine. Call it once.
func (w *Watcher) Start() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.started {
		return
	}
	w.started = true
	go w.run()
}

// Stop ends the watch loop, aborting a query in flight, and waits for it.
// Subscribers get no more calls. It is safe to call more than once.
func (w *Watcher) Stop() {
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
		w.transport.CloseIdleConnections()
	})
}

// Synced is closed once the first answer has been delivered to the
// subscribers.
func (w *Watcher) Synced() <-chan struct{} { return w.syncedCh }

// Status implements Source.
func (w *Watcher) Status() Status { return w.status("consul", w.cfg.Service) }

func (w *Watcher) run() {
	defer close(w.done)
	var index uint64
	var backoff time.Duration
	for {
		if err := w.limiter.Wait(w.ctx); err != nil {
			return // stopped
		}
		entries, meta, err := w.query(index)
		if w.ctx.Err() != nil {
			return
		}
		if err != nil {
			// The next answer may come from another agent or a restarted
			// one, whose index can be lower than ours: a query waiting on
			// our index would then block until its wait runs out. Start
			// over with a query that answers at once.
			index = 0
			backoff = min(max(2*backoff, w.cfg.MinBackoff), w.cfg.MaxBackoff)
			w.failed(err, backoff)
			// Jitter, a pause in [backoff/2, backoff]: watchers of many
			// gateways do not come back in step.
			pause := backoff/2 + rand.N(backoff/2+1)
			t := time.NewTimer(pause)
			select {
			case <-w.ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			continue
		}
		backoff = 0
		index = nextIndex(index, meta.LastIndex)
		w.update(w.instances(entries))
	}
}

// nextIndex is the index to wait on after an answer carrying got, when the
// previous one was prev: an index that goes backwards (a restarted agent, a
// restored snapshot) resets the watch, so the next query answers at once.
func nextIndex(prev, got uint64) uint64 {
	if got < prev {
		return 0
	}
	return got
}

// waitIndex is the index sent: never 0, which would make every query
// return at once and the loop spin (Consul's own advice: treat 0 as 1).
func waitIndex(index uint64) uint64 { return max(index, 1) }

func (w *Watcher) query(index uint64) ([]*api.ServiceEntry, *api.QueryMeta, error) {
	wait := w.cfg.Wait
	ctx, cancel := context.WithTimeout(w.ctx, wait+wait/16+w.slack)
	defer cancel()
	q := (&api.QueryOptions{
		Datacenter: w.cfg.Datacenter,
		Filter:     w.cfg.Filter,
		WaitIndex:  waitIndex(index),
		WaitTime:   wait,
	}).WithContext(ctx)
	return w.client.Health().Service(w.cfg.Service, w.cfg.Tag, true, q)
}

// instances converts the health entries, reporting Meta problems.
func (w *Watcher) instances(entries []*api.ServiceEntry) []Instance {
	out := make([]Instance, 0, len(entries))
	for _, e := range entries {
		if e == nil || e.Service == nil {
			continue
		}
		host := e.Service.Address
		if host == "" && e.Node != nil {
			host = e.Node.Address
		}
		if host == "" || e.Service.Port <= 0 {
			w.logger.Warn("consul instance has no address or port; skipped", zap.String("id", e.Service.ID))
			continue
		}
		inst, problems := fromMeta(e.Service.ID, host, e.Service.Port, e.Service.Meta, e.Service.Weights.Passing)
		for _, p := range problems {
			w.logger.Debug("consul instance meta", zap.String("id", e.Service.ID), zap.String("problem", p))
		}
		out = append(out, inst)
	}
	return normalize(out)
}

func (w *Watcher) failed(err error, backoff time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.lastErr = err
	w.failures++
	// Log the first failure and then every 10th, not every retry.
	if w.failures == 1 || w.failures%10 == 0 {
		w.logger.Warn("consul query failed; keeping the last-known-good replicas",
			zap.Error(err), zap.Int("failures", w.failures), zap.Int("replicas", len(w.current)),
			zap.Duration("retry_in", backoff))
	}
}

func (w *Watcher) update(list []Instance) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.failures > 0 {
		w.logger.Info("consul reachable again", zap.Int("failed_queries", w.failures))
	}
	w.lastErr, w.failures, w.lastSync = nil, 0, time.Now()
	w.deliver(list, w.logger, "consul")
}

func equalInstances(a, b []Instance) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func urls(list []Instance) []string {
	const most = 20 // keep log lines short with big services
	out := make([]string, 0, min(len(list), most+1))
	for i, in := range list {
		if i == most {
			out = append(out, "... "+strconv.Itoa(len(list)-most)+" more")
			break
		}
		out = append(out, in.URL)
	}
	return out
}

var _ Source = (*Watcher)(nil)
var _ Source = (*Static)(nil)
