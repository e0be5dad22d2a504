package scrape

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"sync"
	"time"
)

// Defaults for zero fields of a Scraper.
const (
	// DefaultInterval between the starts of two rounds: load moves fast,
	// but every scrape costs the engine's API server a render of all its
	// metrics (a few hundred kilobytes for vLLM).
	DefaultInterval = 2 * time.Second
	// DefaultTimeout of one scrape. A busy engine answers /metrics slowly,
	// and busy is when the figure matters, so it is not much shorter than
	// the interval.
	DefaultTimeout = 2 * time.Second
	// DefaultConcurrency bounds the scrapes in flight at once.
	DefaultConcurrency = 8
	// DefaultMaxBodyBytes bounds one metrics body, after decompression.
	DefaultMaxBodyBytes = 4 << 20
)

// Errors a Scraper reports besides transport failures (which wrap the
// net/http error: errors.Is(err, context.DeadlineExceeded) for a timeout)
// and ErrNoFigures.
var (
	// ErrUnknownDialect: the Target names a dialect the Scraper does not
	// know (Ollama has none); nothing was fetched.
	ErrUnknownDialect = errors.New("unknown metrics dialect")
	// ErrBodyTooLarge: the body exceeds MaxBodyBytes.
	ErrBodyTooLarge = errors.New("metrics body too large")
	// ErrStopped: Start after Stop.
	ErrStopped = errors.New("scraper stopped")
)

// StatusError is a metrics endpoint's answer other than 2xx (404: the
// engine runs without --metrics or --enable-metrics).
type StatusError struct {
	StatusCode int
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("metrics endpoint answered HTTP %d", e.StatusCode)
}

// Target is one metrics endpoint to scrape. It is comparable, so callers
// can key their stored Loads by it.
type Target struct {
	// URL of the endpoint, e.g. "http://10.0.0.7:8000/metrics": the
	// engines serve it on their API port at /metrics.
	URL string
	// Dialect is a key of the Scraper's Dialects: VLLM, SGLang, TGI or
	// LlamaCPP by default.
	Dialect string
	// Model, when set, selects the series of this served model (see the
	// package doc); "" takes every series.
	Model string
}

// Scraper scrapes its targets every Interval until stopped and reports
// every outcome to Report. It runs one goroutine, plus one per target
// while that target's scrape waits for a slot or is under way. Set the
// fields before Start and leave them alone afterwards; Start, Stop and
// Scrape may be called from any goroutine.
type Scraper struct {
	// Targets returns the targets of a round; it is called at the start of
	// each round, so targets may come and go (discovery). It runs on the
	// scraper's goroutine and should return quickly. Required.
	Targets func() []Target
	// Report receives each scrape's outcome: a Load with Time set, or an
	// error (with a zero Load). It is called from several goroutines at
	// once, must be safe for that, and should return quickly: until it
	// does, its target is not scraped again. A target dropped from Targets
	// may still be reported once, by a scrape already under way. Scrapes
	// cut short by Stop are not reported, and no call starts after Stop
	// returns. Required.
	Report func(Target, Load, error)

	// Client makes the requests. Nil means a client of the Scraper's own,
	// whose idle connections Stop closes, so nothing of the Scraper
	// outlives it; a Client given here stays the caller's to manage.
	Client *http.Client
	// Dialects by name; nil means DefaultDialects().
	Dialects map[string]Dialect
	// Interval between the starts of two rounds; 0 means DefaultInterval.
	// A round starts a scrape of every target whose previous scrape has
	// ended; it does not wait for them.
	Interval time.Duration
	// Timeout of one scrape, from connecting to the body's last byte; 0
	// means DefaultTimeout.
	Timeout time.Duration
	// Jitter, when positive, delays each round (the first included) by a
	// random duration below it, so that gateways started together do not
	// scrape a replica in step.
	Jitter time.Duration
	// Concurrency bounds the scrapes in flight at any time; 0 means
	// DefaultConcurrency. Targets beyond it wait for a slot, and a target
	// that hangs holds its slot until Timeout: keep it above the number of
	// replicas that may hang at once.
	Concurrency int
	// MaxBodyBytes bounds one body; 0 means DefaultMaxBodyBytes.
	MaxBodyBytes int64

	mu      sync.Mutex
	state   int // stateNew, stateRunning or stateStopped
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	own     *http.Client // the client made when Client is nil
	dialect map[string]Dialect
}

const (
	stateNew = iota
	stateRunning
	stateStopped
)

// Start checks the configuration and starts scraping in the background;
// the first round begins at once (after any Jitter). It fails when Targets
// or Report is missing, when already started, or after Stop.
func (s *Scraper) Start() error {
	if s.Targets == nil || s.Report == nil {
		return errors.New("scrape: Scraper needs Targets and Report")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch s.state {
	case stateRunning:
		return errors.New("scrape: Scraper already started")
	case stateStopped:
		return fmt.Errorf("scrape: %w", ErrStopped)
	}
	s.setup()
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	s.state = stateRunning
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.run(ctx)
	}()
	return nil
}

// Stop ends scraping, cancels the scrapes in flight, waits until every
// goroutine of the Scraper has returned and closes the idle connections of
// its own client. It may be called more than once, and before Start.
func (s *Scraper) Stop() {
	s.mu.Lock()
	if s.cancel != nil {
		s.cancel()
	}
	s.state = stateStopped
	own := s.own
	s.mu.Unlock()
	s.wg.Wait()
	if own != nil {
		// Kept-alive connections have goroutines of their own.
		own.CloseIdleConnections()
	}
}

// setup resolves the defaults that need state; called under s.mu.
func (s *Scraper) setup() {
	if s.dialect == nil {
		s.dialect = s.Dialects
		if s.dialect == nil {
			s.dialect = DefaultDialects()
		}
	}
	if s.Client == nil && s.own == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		// One kept-alive connection per replica is enough: a replica is
		// scraped once per round.
		t.MaxIdleConnsPerHost = 1
		s.own = &http.Client{Transport: t}
	}
}

// run starts a round every Interval (plus jitter) until ctx ends. Rounds
// do not wait for their scrapes: a target whose previous scrape is still
// under way is skipped, so a hanging replica costs one slot and its own
// figures, never the cadence of the others.
func (s *Scraper) run(ctx context.Context) {
	slots := make(chan struct{}, s.concurrency())
	inflight := make(map[Target]bool)
	var mu sync.Mutex // guards inflight
	timer := time.NewTimer(s.jitter())
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		for _, t := range s.Targets() {
			mu.Lock()
			busy := inflight[t]
			inflight[t] = true
			mu.Unlock()
			if busy {
				continue // also drops a target listed twice
			}
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				defer func() {
					mu.Lock()
					delete(inflight, t)
					mu.Unlock()
				}()
				s.scrapeAndReport(ctx, slots, t)
			}()
		}
		timer.Reset(s.interval() + s.jitter())
	}
}

// scrapeAndReport waits for a slot, scrapes t and reports the outcome,
// unless the Scraper is stopping.
func (s *Scraper) scrapeAndReport(ctx context.Context, slots chan struct{}, t Target) {
	select {
	case slots <- struct{}{}:
	case <-ctx.Done():
		return
	}
	l, err := s.Scrape(ctx, t)
	<-slots
	if ctx.Err() != nil {
		return // stopping: a cancelled scrape is no news
	}
	s.Report(t, l, err)
}

// Scrape fetches and parses one target now, with the Scraper's client,
// dialects, timeout and body bound; it needs no Start. The Load's Time is
// when the body had been read.
func (s *Scraper) Scrape(ctx context.Context, t Target) (Load, error) {
	l, err := s.scrape(ctx, t)
	if err != nil {
		return Load{}, fmt.Errorf("scrape %s: %w", t.URL, err)
	}
	return l, nil
}

func (s *Scraper) scrape(ctx context.Context, t Target) (Load, error) {
	d, ok := s.dialects()[t.Dialect]
	if !ok {
		return Load{}, fmt.Errorf("%w %q", ErrUnknownDialect, t.Dialect)
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, t.URL, nil)
	if err != nil {
		return Load{}, err
	}
	// The classic text format: what this package parses, and what the
	// Python client sends unless asked for OpenMetrics.
	req.Header.Set("Accept", "text/plain;version=0.0.4;q=1, */*;q=0.1")
	resp, err := s.client().Do(req)
	if err != nil {
		return Load{}, unwrapURL(err)
	}
	defer func() {
		// Drain a little so the connection can be reused, not more.
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
		_ = resp.Body.Close()
	}()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return Load{}, &StatusError{StatusCode: resp.StatusCode}
	}
	limit := s.maxBody()
	if resp.ContentLength > limit {
		return Load{}, fmt.Errorf("%w: %d bytes announced, limit %d", ErrBodyTooLarge, resp.ContentLength, limit)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return Load{}, fmt.Errorf("reading the body: %w", err)
	}
	if int64(len(body)) > limit {
		return Load{}, fmt.Errorf("%w: over %d bytes", ErrBodyTooLarge, limit)
	}
	read := time.Now()
	l, err := Parse(body, d, t.Model)
	if err != nil {
		return Load{}, err
	}
	l.Time = read
	return l, nil
}

// unwrapURL drops net/http's *url.Error wrapper, whose message repeats the
// method and URL that Scrape already names.
func unwrapURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

func (s *Scraper) dialects() map[string]Dialect {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dialect == nil {
		s.setup()
	}
	return s.dialect
}

func (s *Scraper) client() *http.Client {
	if s.Client != nil {
		return s.Client
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.setup()
	return s.own
}

func (s *Scraper) concurrency() int {
	if s.Concurrency > 0 {
		return s.Concurrency
	}
	return DefaultConcurrency
}

func (s *Scraper) interval() time.Duration {
	if s.Interval > 0 {
		return s.Interval
	}
	return DefaultInterval
}

func (s *Scraper) timeout() time.Duration {
	if s.Timeout > 0 {
		return s.Timeout
	}
	return DefaultTimeout
}

func (s *Scraper) maxBody() int64 {
	if s.MaxBodyBytes > 0 {
		return s.MaxBodyBytes
	}
	return DefaultMaxBodyBytes
}

func (s *Scraper) jitter() time.Duration {
	if s.Jitter <= 0 {
		return 0
	}
	return rand.N(s.Jitter)
}
