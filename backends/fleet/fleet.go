// Package fleet runs the replicas of every model a configuration serves:
// it feeds each model's pool from its replica source, probes the replicas
// that nobody else health-checks, reads their engines' own load off the
// request path, and reports on all of them (the metrics' gauges, the
// status page's rows). The llmedge app resolves each model's guest
// modules (policy, protocols, source) and hands the result over as a
// Spec; from there the Fleet is plain Go with a Start and a Stop.
package fleet

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/llmedge/llmedge/backends/adapters"
	"github.com/llmedge/llmedge/backends/health"
	"github.com/llmedge/llmedge/backends/pool"
	"github.com/llmedge/llmedge/backends/scrape"
	"github.com/llmedge/llmedge/discovery"
	"github.com/llmedge/llmedge/gateway"
)

// Spec is one model with its guests resolved.
type Spec struct {
	// Model is what the gateway serves; its Pool is made by New.
	Model *gateway.Model
	// Policy picks a replica per request; PoolOptions configure the
	// breakers and the wait queue.
	Policy      pool.Policy
	PoolOptions pool.Options
	// Source says where the replicas come from; Close ends its watch.
	Source discovery.Source
	Close  func()
	// MaxConcurrency caps each replica, unless its instance says
	// otherwise.
	MaxConcurrency int
	// Probe, when set, health-checks the replicas actively.
	Probe *Probe
	// Load configures reading the replicas' own load; nil reads none.
	Load *Load
}

// Probe configures active health checks of a model's replicas.
type Probe struct {
	Interval, Timeout time.Duration
	// OutOnly probes only the replicas out of rotation (an open breaker),
	// every second, for a source that checks their health itself: a
	// replica restarted faster than its source noticed is readmitted
	// as soon as it answers.
	OutOnly bool
}

// Syncer is a source that answers its first time later (Consul): a
// configuration about to serve waits a little for it.
type Syncer interface {
	WaitSynced(ctx context.Context) bool
	Status() discovery.Status
}

// Options configure a Fleet.
type Options struct {
	// Client probes the replicas' health.
	Client *http.Client
	Logger *zap.Logger
	// OnScrapeError hears each failed scrape of a replica's metrics.
	OnScrapeError func(model string)
	// SyncTimeout bounds the wait for the sources' first answers.
	SyncTimeout time.Duration
	// Dialects name the engines' load metrics, by dialect name; nil means
	// scrape.DefaultDialects().
	Dialects map[string]scrape.Dialect
}

// Fleet is the models of one configuration, with what watches their
// replicas.
type Fleet struct {
	models    []*model
	prober    *health.Prober
	logger    *zap.Logger
	closeOnce sync.Once
}

// model is one model and what the fleet runs for it.
type model struct {
	*gateway.Model
	scraper *scraper
	lister  *adapters.Lister // nil for a model without adapters
	close   []func()
}

// New builds every model: its pool, fed from its source from now on. A
// failure closes what was built.
func New(specs []Spec, o Options) (_ *Fleet, err error) {
	logger := o.Logger
	if logger == nil {
		logger = zap.NewNop()
	}
	f := &Fleet{logger: logger, prober: &health.Prober{Client: o.Client, Logger: logger}}
	defer func() {
		if err != nil {
			f.Close()
		}
	}()
	var syncers []Syncer
	for i := range specs {
		m, err := f.build(&specs[i], o)
		if err != nil {
			return nil, fmt.Errorf("model %q: %w", specs[i].Model.Name, err)
		}
		f.models = append(f.models, m)
		if s, ok := specs[i].Source.(Syncer); ok {
			syncers = append(syncers, s)
		}
	}
	WaitSynced(syncers, o.SyncTimeout, f.logger)
	return f, nil
}

func (f *Fleet) build(s *Spec, o Options) (*model, error) {
	m := &model{Model: s.Model}
	if s.Close != nil {
		m.close = append(m.close, s.Close)
	}
	name := s.Model.Name
	logger := f.logger.With(zap.String("model_type", name))
	opts := s.PoolOptions
	opts.OnBreakerChange = func(replica string, from, to pool.BreakerState) {
		log := f.logger.Info
		if to == pool.StateOpen {
			log = f.logger.Warn
		}
		log("replica circuit breaker "+to.String(), zap.String("model_type", name),
			zap.String("replica", replica), zap.String("from", from.String()))
	}
	m.Pool = pool.NewWithOptions(name, s.Policy, opts)
	m.close = append(m.close, m.Pool.Close)
	unsubscribe := s.Source.Subscribe(func(list []discovery.Instance) {
		m.Pool.Set(replicas(list, s, logger))
	})
	m.close = append(m.close, unsubscribe)
	m.Discovery = s.Source.Status
	if s.Probe != nil {
		f.prober.Targets = append(f.prober.Targets, health.Target{
			Pool: m.Pool, Path: func(r *pool.Replica) string { return m.Engine(r).HealthPath },
			Interval: s.Probe.Interval, Timeout: s.Probe.Timeout, OutOnly: s.Probe.OutOnly,
		})
	}
	if s.Load != nil {
		m.scraper = newScraper(m, *s.Load, o.Dialects, f.logger, o.OnScrapeError)
	}
	if s.Model.Adapters != nil {
		var every time.Duration
		if s.Load != nil {
			every = s.Load.Interval
		}
		replicas := func() []*pool.Replica { return m.Pool.Replicas() }
		m.lister = adapters.NewLister(m.Name, replicas, m.ReplicaKey, s.Model.Adapters.Known, o.Client, every, f.logger)
	}
	return m, nil
}

// replicas converts instances to pool replicas: instance settings
// (protocol, upstream model, weight, max_concurrency) override the
// model's. An instance naming an unknown protocol is left out, logged.
func replicas(list []discovery.Instance, s *Spec, logger *zap.Logger) []*pool.Replica {
	out := make([]*pool.Replica, 0, len(list))
	for _, in := range list {
		r, err := pool.NewReplica(in.URL)
		if err != nil {
			logger.Warn("replica skipped", zap.String("id", in.ID), zap.Error(err))
			continue
		}
		if _, ok := s.Model.Protocols[in.Protocol]; in.Protocol != "" && !ok {
			logger.Warn("replica skipped: unknown protocol", zap.String("id", in.ID), zap.String("protocol", in.Protocol))
			continue
		}
		r.Model, r.Protocol, r.Weight = in.Model, in.Protocol, in.Weight
		r.MaxConcurrency = s.MaxConcurrency
		if in.MaxConcurrency > 0 {
			r.MaxConcurrency = in.MaxConcurrency
		}
		out = append(out, r)
	}
	return out
}

// WaitSynced waits, up to timeout in all, for each source's first answer
// (a reused watcher has it already). Sources that have not synced by then
// keep trying in the background; readiness reports them.
func WaitSynced(ss []Syncer, timeout time.Duration, logger *zap.Logger) {
	if len(ss) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for _, s := range ss {
		if !s.WaitSynced(ctx) {
			st := s.Status()
			logger.Warn("replica source not synced yet; serving without its replicas until it is",
				zap.String("source", st.Source), zap.String("service", st.Service), zap.String("error", st.LastError))
		}
	}
}

// Models are the models by name, for the gateway.
func (f *Fleet) Models() map[string]*gateway.Model {
	out := make(map[string]*gateway.Model, len(f.models))
	for _, m := range f.models {
		out[m.Name] = m.Model
	}
	return out
}

// Start begins the health probes and the load scrapes.
func (f *Fleet) Start() error {
	f.prober.Start()
	for _, m := range f.models {
		if m.lister != nil {
			m.lister.Start()
		}
		if m.scraper != nil {
			if err := m.scraper.Start(); err != nil {
				return fmt.Errorf("model %q: load metrics: %w", m.Name, err)
			}
		}
	}
	return nil
}

// Stop ends the probes and scrapes and waits for them.
func (f *Fleet) Stop() {
	f.prober.Stop()
	for _, m := range f.models {
		if m.scraper != nil {
			m.scraper.Stop()
		}
		if m.lister != nil {
			m.lister.Stop()
		}
	}
}

// Close ends the watch of every model's replicas and lets go of their
// pools' breakers and connections; requests in flight may still finish,
// and the fleet may still be read (its replicas as they were).
func (f *Fleet) Close() {
	f.closeOnce.Do(func() {
		for _, m := range f.models {
			for i := len(m.close) - 1; i >= 0; i-- {
				m.close[i]()
			}
			if m.Client != nil {
				m.Client.CloseIdleConnections()
			}
		}
	})
}
