// Package health actively probes static replicas: every interval it GETs
// each replica's engine-specific health path and marks the replica
// unusable (pool.Replica.SetHealthy) on a connection failure, a timeout or
// a non-2xx answer — vLLM refuses connections while it loads a model,
// llama.cpp and SGLang answer 503 — and usable again on a 2xx. A 404 or
// 405 counts as usable: the server is up but has no such health endpoint
// (e.g. Ollama's /v1 behind protocol openai), and taking it out of
// rotation forever would be worse than not knowing.
//
// The package imports nothing from Caddy.
package health

import (
	"context"
	"io"
	"net/http"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/llmedge/llmedge/backends/pool"
)

// Defaults for zero fields of a Target.
const (
	DefaultInterval = 5 * time.Second
	DefaultTimeout  = 2 * time.Second
)

// Target is one pool to probe.
type Target struct {
	Pool *pool.Pool
	// Path returns the health path of a replica's engine ("" when it has
	// none: it is not probed); nil means "/health" for every replica.
	Path func(*pool.Replica) string
	// Interval between probes of a replica; 0 means DefaultInterval.
	Interval time.Duration
	// Timeout of one probe; 0 means DefaultTimeout.
	Timeout time.Duration
}

// Prober probes targets until stopped. Start and Stop may each be called
// once; Stop waits until every probing goroutine has returned.
type Prober struct {
	Client  *http.Client
	Targets []Target
	Logger  *zap.Logger

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// Start probes every target at once, then every interval, in the
// background.
func (p *Prober) Start() {
	ctx, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	for _, t := range p.Targets {
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.run(ctx, t)
		}()
	}
}

// Stop ends probing and waits for it to finish. Replicas keep their last
// health state.
func (p *Prober) Stop() {
	if p.cancel != nil {
		p.cancel()
	}
	p.wg.Wait()
}

func (p *Prober) run(ctx context.Context, t Target) {
	interval := t.Interval
	if interval <= 0 {
		interval = DefaultInterval
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		p.round(ctx, t)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// round probes every replica of t concurrently and records the outcomes.
func (p *Prober) round(ctx context.Context, t Target) {
	timeout := t.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	var wg sync.WaitGroup
	for _, r := range t.Pool.Replicas() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			path := "/health"
			if t.Path != nil {
				path = t.Path(r)
			}
			if path == "" {
				return
			}
			ok := p.probe(ctx, r.URL+path, timeout)
			if ctx.Err() != nil {
				return
			}
			if ok != r.Healthy() && p.Logger != nil {
				p.Logger.Info("replica health changed", zap.String("model_type", t.Pool.Name()),
					zap.String("replica", r.URL), zap.Bool("healthy", ok))
			}
			r.SetHealthy(ok)
		}()
	}
	wg.Wait()
}

// probe reports whether GET url answers 2xx (or 404/405, no health
// endpoint) within timeout.
func (p *Prober) probe(ctx context.Context, url string, timeout time.Duration) bool {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	client := p.Client
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		return false
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
	_ = resp.Body.Close()
	switch c := resp.StatusCode; {
	case c >= 200 && c <= 299, c == http.StatusNotFound, c == http.StatusMethodNotAllowed:
		return true
	}
	return false
}
