// Package health actively probes the replicas nobody else checks (static
// ones; those from Consul only while their breaker is open: OutOnly).
// Every interval it GETs each replica's engine-specific health path and
// marks the replica unusable (pool.Replica.SetHealthy) on a connection
// failure, a timeout or a non-2xx answer — vLLM refuses connections while
// it loads a model, llama.cpp and SGLang answer 503 — and usable again on
// a 2xx. A 404 or 405 counts as usable: the server is up but has no such
// health endpoint (e.g. Ollama's /v1 behind protocol openai), and taking
// it out of rotation forever would be worse than not knowing.
//
// A replica that passes after failing (or after a request found it
// unreachable) was restarted: its circuit breaker, which its death may
// have opened, is closed at once (see round), and a replica out of
// rotation is probed every second, so that a restart is seen within a
// second of it.
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
	// Recheck is how often a replica out of rotation (a failed probe, an
	// open breaker) is probed between full rounds; 0 means
	// DefaultRecheck, and never more than Interval.
	Recheck time.Duration
	// OutOnly probes the replicas out of rotation alone, never in full
	// rounds: their source checks their health (Consul), and the probes
	// are there to readmit a restarted one at once.
	OutOnly bool
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
	// Replicas out of rotation (a failed probe, an open breaker) are
	// probed more often, so that a restarted replica is seen down and
	// then back within a second, rather than at the next full round.
	recheck := t.Recheck
	if recheck <= 0 {
		recheck = DefaultRecheck
	}
	recheck = min(recheck, interval)
	tick := time.NewTicker(recheck)
	defer tick.Stop()
	next := time.Now()
	for {
		all := !t.OutOnly && !time.Now().Before(next)
		if all {
			next = time.Now().Add(interval)
		}
		p.round(ctx, t, all)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// DefaultRecheck is how often a replica out of rotation is probed, when
// the target's interval is longer.
const DefaultRecheck = time.Second

// out reports whether r is out of rotation, as far as a probe can tell
// whether it came back.
func out(r *pool.Replica) bool {
	return !r.Healthy() || r.BreakerState() == pool.StateOpen
}

// round probes the replicas of t concurrently (every one when all, else
// those out of rotation) and records the outcomes. A replica that passes
// after failing, or after a request found it unreachable, was restarted
// (or recovered by itself): it is readmitted (pool.Replica.Readmit)
// rather than kept out by its breaker's open timeout. One whose probe
// never failed and that no request found unreachable (it fails requests
// while its health path answers) waits out its breaker.
func (p *Prober) round(ctx context.Context, t Target, all bool) {
	timeout := t.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	var wg sync.WaitGroup
	for _, r := range t.Pool.Replicas() {
		if !all && !out(r) {
			continue
		}
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
			was := r.Healthy()
			if ok != was && p.Logger != nil {
				p.Logger.Info("replica health changed", zap.String("model_type", t.Pool.Name()),
					zap.String("replica", r.URL), zap.Bool("healthy", ok))
			}
			r.SetHealthy(ok)
			if ok && (!was || r.Unreachable()) && r.Readmit() && p.Logger != nil {
				p.Logger.Info("replica readmitted: its health probe passes again, its circuit breaker is closed",
					zap.String("model_type", t.Pool.Name()), zap.String("replica", r.URL))
			}
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
