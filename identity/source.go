package identity

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// Defaults of the key cache.
const (
	// DefaultRefresh is how often an issuer's keys are fetched again in
	// the background (sooner when its Cache-Control max-age says so): a
	// key the provider removed stops verifying within it.
	DefaultRefresh = 10 * time.Minute
	// DefaultMinRefresh is the least time between two fetches: a token
	// naming an unknown kid fetches the keys at most this often, so a
	// flood of forged kids cannot hammer the provider.
	DefaultMinRefresh = 30 * time.Second
	// FetchTimeout bounds one discovery or JWKS request.
	FetchTimeout = 10 * time.Second
	// maxDocumentBytes bounds what a provider's answer may make us read.
	maxDocumentBytes = 1 << 20
	// firstRetry is the first wait after a failed fetch; it doubles up to
	// the minimum refresh interval.
	firstRetry = time.Second
)

// sourceConfig is what a key source fetches and how often.
type sourceConfig struct {
	issuer  string
	jwksURI string // fixed by the configuration: no discovery
	algs    []string
	refresh time.Duration
	minimum time.Duration
	client  *http.Client
	logger  *zap.Logger
}

// source keeps one issuer's verifying keys: discovered, fetched,
// refreshed by its loop and on demand, and kept as they were when a fetch
// fails (last known good).
type source struct {
	cfg sourceConfig
	set atomic.Pointer[keySet]

	fetches, failures atomic.Uint64

	mu          sync.Mutex
	jwksURI     string // discovered (or configured)
	lastAttempt time.Time
	lastSuccess time.Time
	failingFrom time.Time // first failure of the current run of them
	lastErr     string
	keyCount    int
	next        time.Duration // until the loop's next fetch, after a success
	inflight    chan struct{} // closed when the fetch under way ends

	started sync.Once
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

func newSource(cfg sourceConfig) *source {
	s := &source{cfg: cfg, jwksURI: cfg.jwksURI, next: cfg.refresh}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	return s
}

// startOnce starts the source unless another configuration did.
func (s *source) startOnce(ctx context.Context) { s.started.Do(func() { s.start(ctx) }) }

// start fetches the keys once, waiting at most until ctx ends (a provider
// down at start does not stop the gateway: the loop keeps trying), then
// runs the refresh loop.
func (s *source) start(ctx context.Context) {
	done := make(chan struct{})
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.fetch(false)
		close(done)
		s.loop()
	}()
	select {
	case <-done:
	case <-ctx.Done():
	}
}

// Destruct stops the loop and waits for it (keep.Destructor).
func (s *source) Destruct() error {
	s.cancel()
	s.wg.Wait()
	return nil
}

func (s *source) loop() {
	retry := firstRetry
	for {
		s.mu.Lock()
		ok, wait := s.lastErr == "", s.next
		s.mu.Unlock()
		if !ok {
			wait = retry
			retry = min(2*retry, s.cfg.minimum)
		} else {
			retry = firstRetry
		}
		t := time.NewTimer(wait)
		select {
		case <-s.ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		s.fetch(false)
	}
}

// next is set by each successful fetch: the refresh period, or the
// provider's max-age when shorter (never under the minimum).
func (s *source) nextFrom(maxAge time.Duration, has bool) time.Duration {
	next := s.cfg.refresh
	if has && maxAge < next {
		next = max(maxAge, s.cfg.minimum)
	}
	return next
}

// refreshUnknown fetches the keys for a token naming a kid the set lacks,
// unless a fetch began less than the minimum interval ago; concurrent
// callers share one fetch. It reports whether a fetch ended meanwhile
// (and so whether a lookup is worth trying again).
func (s *source) refreshUnknown() bool { return s.fetch(true) }

// fetch discovers the JWKS URI when it is not known (or the last fetch
// failed), then reads the keys. A failure keeps the current keys. Only one
// fetch runs at a time: a caller that finds one under way waits for it.
// A gated fetch does not run when the last one began less than the
// minimum interval ago. It reports whether a fetch ran or was waited for.
func (s *source) fetch(gated bool) bool {
	s.mu.Lock()
	if ch := s.inflight; ch != nil {
		s.mu.Unlock()
		<-ch
		return true
	}
	if gated && time.Since(s.lastAttempt) < s.cfg.minimum {
		s.mu.Unlock()
		return false
	}
	ch := make(chan struct{})
	s.inflight = ch
	s.lastAttempt = time.Now()
	rediscover := s.cfg.jwksURI == "" && (s.jwksURI == "" || s.lastErr != "")
	jwksURI := s.jwksURI
	s.mu.Unlock()

	ctx, cancel := context.WithTimeout(s.ctx, FetchTimeout)
	set, skipped, maxAge, hasMaxAge, err := func() (*keySet, int, time.Duration, bool, error) {
		if rediscover {
			u, err := s.discover(ctx)
			if err != nil {
				return nil, 0, 0, false, err
			}
			jwksURI = u
		}
		return s.fetchJWKS(ctx, jwksURI)
	}()
	cancel()
	s.fetches.Add(1)

	s.mu.Lock()
	defer func() {
		s.inflight = nil
		s.mu.Unlock()
		close(ch)
	}()
	s.jwksURI = jwksURI
	now := time.Now()
	if err != nil {
		s.failures.Add(1)
		if s.lastErr == "" {
			s.failingFrom = now
		}
		s.lastErr = err.Error()
		switch {
		case s.ctx.Err() != nil:
		case s.keyCount == 0:
			s.cfg.logger.Warn("identity provider keys could not be fetched; its tokens are refused until they are",
				zap.String("issuer", s.cfg.issuer), zap.Error(err))
		default:
			s.cfg.logger.Warn("identity provider keys could not be refreshed; the last ones fetched stay in use",
				zap.String("issuer", s.cfg.issuer), zap.Int("keys", s.keyCount), zap.Error(err))
		}
		return true
	}
	if s.lastErr != "" && !s.lastSuccess.IsZero() {
		s.cfg.logger.Info("identity provider keys refreshed again", zap.String("issuer", s.cfg.issuer))
	}
	s.set.Store(set)
	s.lastErr, s.lastSuccess, s.failingFrom, s.keyCount = "", now, time.Time{}, len(set.keys)
	s.next = s.nextFrom(maxAge, hasMaxAge)
	if skipped > 0 {
		s.cfg.logger.Debug("identity provider keys skipped", zap.String("issuer", s.cfg.issuer), zap.Int("skipped", skipped))
	}
	return true
}

// checkURL accepts an https URL, or an http one on a loopback host when
// the issuer itself is http (a provider run beside the gateway, in
// tests).
func checkURL(raw, issuer string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return fmt.Errorf("%q is not an absolute URL", raw)
	}
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		if strings.HasPrefix(issuer, "http://") && IsLoopback(u.Hostname()) {
			return nil
		}
	}
	return fmt.Errorf("%q: want https (http only on a loopback host)", raw)
}

// IsLoopback reports whether host is localhost or a loopback address.
func IsLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// discover reads the issuer's OpenID configuration and returns its
// jwks_uri. The document's issuer must be the configured one, exactly.
func (s *source) discover(ctx context.Context) (string, error) {
	u := strings.TrimSuffix(s.cfg.issuer, "/") + "/.well-known/openid-configuration"
	b, _, err := s.get(ctx, u)
	if err != nil {
		return "", fmt.Errorf("discovery: %w", err)
	}
	var doc struct {
		Issuer  string `json:"issuer"`
		JWKSURI string `json:"jwks_uri"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return "", fmt.Errorf("discovery: the document is not JSON")
	}
	if doc.Issuer != s.cfg.issuer {
		return "", fmt.Errorf("discovery: the document names issuer %q, not %q", doc.Issuer, s.cfg.issuer)
	}
	if err := checkURL(doc.JWKSURI, s.cfg.issuer); err != nil {
		return "", fmt.Errorf("discovery: jwks_uri: %w", err)
	}
	return doc.JWKSURI, nil
}

func (s *source) fetchJWKS(ctx context.Context, u string) (*keySet, int, time.Duration, bool, error) {
	b, h, err := s.get(ctx, u)
	if err != nil {
		return nil, 0, 0, false, fmt.Errorf("JWKS: %w", err)
	}
	set, skipped, err := parseJWKS(b, s.cfg.algs)
	if err != nil {
		return nil, skipped, 0, false, err
	}
	maxAge, ok := parseMaxAge(h.Get("Cache-Control"))
	return set, skipped, maxAge, ok, nil
}

// get reads a JSON document, at most maxDocumentBytes of it.
func (s *source) get(ctx context.Context, u string) ([]byte, http.Header, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := s.cfg.client.Do(req)
	if err != nil {
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err // the URL is in the message already
		}
		return nil, nil, fmt.Errorf("GET %s: %w", u, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
		return nil, nil, fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "" {
		mt, _, _ := mime.ParseMediaType(ct)
		if mt != "application/json" && mt != "application/jwk-set+json" && !strings.HasSuffix(mt, "+json") {
			return nil, nil, fmt.Errorf("GET %s: content type %q, want JSON", u, mt)
		}
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxDocumentBytes+1))
	if err != nil {
		return nil, nil, fmt.Errorf("GET %s: %w", u, err)
	}
	if len(b) > maxDocumentBytes {
		return nil, nil, fmt.Errorf("GET %s: the document is over %d bytes", u, maxDocumentBytes)
	}
	return b, resp.Header, nil
}

// parseMaxAge reads Cache-Control's max-age; no-store and no-cache count
// as 0 (refresh as often as allowed).
func parseMaxAge(cc string) (time.Duration, bool) {
	for part := range strings.SplitSeq(cc, ",") {
		part = strings.ToLower(strings.TrimSpace(part))
		switch {
		case part == "no-store" || part == "no-cache":
			return 0, true
		case strings.HasPrefix(part, "max-age="):
			n, err := strconv.ParseInt(strings.Trim(part[len("max-age="):], `"`), 10, 64)
			if err != nil || n < 0 {
				return 0, false
			}
			return time.Duration(min(n, int64(365*24*3600))) * time.Second, true
		}
	}
	return 0, false
}

// SourceStatus is what operators see of an issuer's keys.
type SourceStatus struct {
	Issuer  string `json:"issuer"`
	JWKSURI string `json:"jwks_uri,omitempty"`
	// Keys is the number of keys in use.
	Keys int `json:"keys"`
	// LastRefresh is when the keys were last fetched; zero before the
	// first success.
	LastRefresh time.Time `json:"last_refresh"`
	// Error is the last fetch's failure, "" when it succeeded; the keys in
	// use are then the last good ones (Stale) or none.
	Error string `json:"error,omitempty"`
	// FailingSince is when the current run of failures began.
	FailingSince time.Time `json:"failing_since,omitempty"`
	// Stale: the provider cannot be reached and the last known good keys
	// are in use.
	Stale bool `json:"stale"`
	// Fetches and Failures count the fetches tried and those that failed.
	Fetches  uint64 `json:"fetches"`
	Failures uint64 `json:"failures"`
}

func (s *source) status() SourceStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	return SourceStatus{
		Issuer: s.cfg.issuer, JWKSURI: s.jwksURI, Keys: s.keyCount, LastRefresh: s.lastSuccess,
		Error: s.lastErr, FailingSince: s.failingFrom, Stale: s.lastErr != "" && s.keyCount > 0,
		Fetches: s.fetches.Load(), Failures: s.failures.Load(),
	}
}
