package llmapp

import (
	"strings"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/llmedge/llmedge/pool"
	"github.com/llmedge/llmedge/scrape"
)

// staleAfter is how many scrape intervals a replica's figures count for:
// a figure older than that is unknown, and the gateway's own in-flight
// count stands in for it.
const staleAfter = 3

// loadScraper reads a model's replicas' load from their engines' metrics
// endpoints, off the request path, and keeps it on the replicas.
type loadScraper struct {
	*scrape.Scraper
	model   *builtModel
	cfg     LoadMetricsConfig
	logger  *zap.Logger
	onError func(model string)

	mu     sync.Mutex
	failed map[string]bool // replicas whose last scrape failed, for one log line per change
}

// newLoadScraper returns the model's scraper, or nil when it has none to
// scrape (turned off, or no engine with metrics).
func (mc *ModelConfig) newLoadScraper(b *builtModel, logger *zap.Logger, onError func(string)) *loadScraper {
	cfg := LoadMetricsConfig{}
	if mc.LoadMetrics != nil {
		cfg = *mc.LoadMetrics
	}
	if cfg.Disabled {
		return nil
	}
	if cfg.Interval <= 0 {
		cfg.Interval = caddy.Duration(DefaultLoadInterval)
	}
	if cfg.Path == "" {
		cfg.Path = DefaultLoadPath
	}
	l := &loadScraper{model: b, cfg: cfg, logger: logger, onError: onError, failed: map[string]bool{}}
	l.Scraper = &scrape.Scraper{
		Targets:  l.targets,
		Report:   l.report,
		Interval: time.Duration(cfg.Interval),
		Timeout:  time.Duration(cfg.Timeout),
		Jitter:   time.Duration(cfg.Interval) / 4,
	}
	if cfg.Timeout <= 0 {
		l.Scraper.Timeout = time.Duration(cfg.Interval)
	}
	return l
}

// targets are the model's replicas whose engine has a metrics dialect.
func (l *loadScraper) targets() []scrape.Target {
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
func (l *loadScraper) report(t scrape.Target, load scrape.Load, err error) {
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
		At: load.Time, Until: load.Time.Add(staleAfter * time.Duration(l.cfg.Interval)),
	})
	if l.changed(url, false) {
		l.logger.Info("replica load metrics readable again",
			zap.String("model_type", l.model.Name), zap.String("replica", url))
	}
}

// changed records whether url's last scrape failed and reports whether
// that differs from before (a first success is no change).
func (l *loadScraper) changed(url string, failed bool) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	was, seen := l.failed[url]
	l.failed[url] = failed
	return was != failed && (seen || failed)
}
