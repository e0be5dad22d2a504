package fleet

import (
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/llmedge/llmedge/backends/pool"
	"github.com/llmedge/llmedge/backends/scrape"
)

// Load configures reading a model's replicas' own load from their
// engines' Prometheus endpoint.
type Load struct {
	// Interval between scrapes of a replica; Timeout bounds one.
	Interval, Timeout time.Duration
	// Path of the endpoint, e.g. /metrics.
	Path string
	// Dialect names the engine's metrics, overriding what each replica's
	// protocol says; "" takes the protocol's.
	Dialect string
}

// Defaults of Load.
const (
	DefaultLoadInterval = time.Second
	DefaultLoadPath     = "/metrics"
)

// staleAfter is how many scrape intervals a replica's figures count for:
// a figure older than that is unknown, and the gateway's own in-flight
// count stands in for it.
const staleAfter = 3

// scraper reads a model's replicas' load from their engines' metrics
// endpoints, off the request path, and keeps it on the replicas.
type scraper struct {
	*scrape.Scraper
	model   *model
	cfg     Load
	logger  *zap.Logger
	onError func(model string)

	mu     sync.Mutex
	failed map[string]bool // replicas whose last scrape failed, for one log line per change
}

func newScraper(m *model, cfg Load, dialects map[string]scrape.Dialect, logger *zap.Logger, onError func(string)) *scraper {
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultLoadInterval
	}
	if cfg.Path == "" {
		cfg.Path = DefaultLoadPath
	}
	if onError == nil {
		onError = func(string) {}
	}
	l := &scraper{model: m, cfg: cfg, logger: logger, onError: onError, failed: map[string]bool{}}
	l.Scraper = &scrape.Scraper{
		Targets:  l.targets,
		Report:   l.report,
		Dialects: dialects,
		Interval: cfg.Interval,
		Timeout:  cfg.Timeout,
		Jitter:   cfg.Interval / 4,
	}
	if cfg.Timeout <= 0 {
		l.Scraper.Timeout = cfg.Interval
	}
	return l
}

// targets are the model's replicas whose engine has a metrics dialect.
func (l *scraper) targets() []scrape.Target {
	var out []scrape.Target
	for _, r := range l.model.Pool.Replicas() {
		dialect := l.cfg.Dialect
		if dialect == "" {
			dialect = l.model.Engine(r).Metrics
		}
		if dialect == "" {
			continue
		}
		out = append(out, scrape.Target{URL: r.URL + l.cfg.Path, Dialect: dialect})
	}
	return out
}

// report keeps a fresh figure on its replica, or drops the replica's
// figure when the scrape failed, so its in-flight count stands in.
func (l *scraper) report(t scrape.Target, load scrape.Load, err error) {
	url := strings.TrimSuffix(t.URL, l.cfg.Path)
	var rep *pool.Replica
	for _, r := range l.model.Pool.Replicas() {
		if r.URL == url {
			rep = r
			break
		}
	}
	if rep == nil {
		return // it left meanwhile
	}
	if err != nil {
		rep.ClearEngineLoad()
		l.onError(l.model.Name)
		if l.changed(url, true) {
			l.logger.Warn("replica load metrics unusable; using the gateway's in-flight count for it",
				zap.String("model_type", l.model.Name), zap.String("replica", url), zap.Error(err))
		}
		return
	}
	kv := -1.0
	if load.HasKV {
		kv = load.KVUsage
	}
	rep.SetEngineLoad(pool.EngineLoad{
		Running: float64(load.Running), Waiting: float64(load.Waiting), KVUsage: kv, Own: float64(rep.Outstanding()),
		OwnSheddable: float64(rep.OutstandingSheddable()),
		At:           load.Time, Until: load.Time.Add(staleAfter * l.cfg.Interval),
	})
	if a := l.model.Adapters; a != nil && load.LoRA != nil {
		a.Known.SetRunning(url, load.LoRA.Running, load.LoRA.Waiting, load.LoRA.MaxLoRA, load.Time.Add(staleAfter*l.cfg.Interval))
	}
	if l.changed(url, false) {
		l.logger.Info("replica load metrics readable again",
			zap.String("model_type", l.model.Name), zap.String("replica", url))
	}
}

// changed records whether url's last scrape failed and reports whether
// that differs from before (a first success is no change).
func (l *scraper) changed(url string, failed bool) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	was, seen := l.failed[url]
	l.failed[url] = failed
	return was != failed && (seen || failed)
}
