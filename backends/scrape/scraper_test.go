package scrape

import (
	"compress/gzip"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// serve starts a test server answering every request with h.
func serve(t *testing.T, h http.HandlerFunc) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

// body answers with a fixed exposition text.
func body(text string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		_, _ = io.WriteString(w, text)
	}
}

// hang answers nothing until the client gives up or the test ends.
func hang(t *testing.T, entered chan<- struct{}) http.HandlerFunc {
	done := make(chan struct{})
	t.Cleanup(func() { close(done) })
	return func(w http.ResponseWriter, r *http.Request) {
		if entered != nil {
			entered <- struct{}{}
		}
		select {
		case <-r.Context().Done():
		case <-done:
		}
	}
}

// settle waits until the goroutine count is back to base, or fails with
// every goroutine's stack.
func settle(t *testing.T, base int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > base {
		if time.Now().After(deadline) {
			var sb strings.Builder
			_ = pprof.Lookup("goroutine").WriteTo(&sb, 1)
			t.Fatalf("%d goroutines, %d before: leaked?\n%s", runtime.NumGoroutine(), base, sb.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestScrape(t *testing.T) {
	const tgiBody = "tgi_queue_size 4\ntgi_batch_current_size 11\n"
	var hits atomic.Int32
	counted := serve(t, func(w http.ResponseWriter, r *http.Request) { hits.Add(1) })
	closed := httptest.NewServer(body(tgiBody))
	closed.Close()

	tests := []struct {
		name    string
		h       http.HandlerFunc // nil: use url
		url     string
		dialect string
		want    Load
		check   func(t *testing.T, err error)
		maxTime time.Duration
	}{
		{name: "ok, and asks for the classic text format", dialect: TGI, want: figures(11, 4, -1),
			h: func(w http.ResponseWriter, r *http.Request) {
				if a := r.Header.Get("Accept"); !strings.HasPrefix(a, "text/plain;version=0.0.4") {
					http.Error(w, "Accept: "+a, http.StatusNotAcceptable)
					return
				}
				body(tgiBody)(w, r)
			}},
		{name: "gzip", dialect: TGI, want: figures(11, 4, -1),
			h: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Encoding", "gzip")
				z := gzip.NewWriter(w)
				_, _ = io.WriteString(z, tgiBody)
				_ = z.Close()
			}},
		{name: "HTTP 500", dialect: TGI,
			h: func(w http.ResponseWriter, r *http.Request) { http.Error(w, "boom", http.StatusInternalServerError) },
			check: func(t *testing.T, err error) {
				var se *StatusError
				if !errors.As(err, &se) || se.StatusCode != 500 {
					t.Errorf("error %v is not a StatusError 500", err)
				}
			}},
		{name: "HTTP 404: no --metrics", dialect: LlamaCPP, h: http.NotFound,
			check: func(t *testing.T, err error) {
				var se *StatusError
				if !errors.As(err, &se) || se.StatusCode != 404 {
					t.Errorf("error %v is not a StatusError 404", err)
				}
			}},
		{name: "hanging endpoint: the deadline fires", dialect: TGI, h: hang(t, nil), maxTime: 2 * time.Second,
			check: func(t *testing.T, err error) {
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("error %v is not a deadline", err)
				}
			}},
		{name: "body that stops halfway: the deadline fires", dialect: TGI, maxTime: 2 * time.Second,
			h: func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.WriteString(w, "tgi_queue_size 4\n")
				w.(http.Flusher).Flush()
				hang(t, nil)(w, r)
			},
			check: func(t *testing.T, err error) {
				if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "reading the body") {
					t.Errorf("error %v is not a deadline while reading", err)
				}
			}},
		{name: "connection cut before the announced length", dialect: TGI,
			h: func(w http.ResponseWriter, r *http.Request) {
				conn, buf, err := w.(http.Hijacker).Hijack()
				if err != nil {
					return
				}
				defer conn.Close()
				_, _ = buf.WriteString("HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\ntgi_queue_size 4\ntgi_batch_cu")
				_ = buf.Flush()
			},
			check: func(t *testing.T, err error) {
				if !errors.Is(err, io.ErrUnexpectedEOF) {
					t.Errorf("error %v is not an unexpected EOF", err)
				}
			}},
		{name: "body over the bound, announced", dialect: TGI,
			h: func(w http.ResponseWriter, r *http.Request) {
				text := tgiBody + strings.Repeat("# padding padding padding padding\n", 100)
				w.Header().Set("Content-Length", strconv.Itoa(len(text)))
				_, _ = io.WriteString(w, text)
			},
			check: func(t *testing.T, err error) {
				if !errors.Is(err, ErrBodyTooLarge) || !strings.Contains(err.Error(), "announced") {
					t.Errorf("error %v is not an announced ErrBodyTooLarge", err)
				}
			}},
		{name: "body over the bound, streamed", dialect: TGI,
			h: func(w http.ResponseWriter, r *http.Request) {
				for range 100 {
					_, _ = io.WriteString(w, "# padding padding padding padding\n")
					w.(http.Flusher).Flush()
				}
			},
			check: func(t *testing.T, err error) {
				if !errors.Is(err, ErrBodyTooLarge) {
					t.Errorf("error %v is not ErrBodyTooLarge", err)
				}
			}},
		{name: "garbage", dialect: VLLM, h: body("<html>upstream connect error</html>"),
			check: func(t *testing.T, err error) {
				if !errors.Is(err, ErrNoFigures) {
					t.Errorf("error %v is not ErrNoFigures", err)
				}
			}},
		{name: "unknown dialect: nothing fetched", url: counted.URL, dialect: "ollama",
			check: func(t *testing.T, err error) {
				if !errors.Is(err, ErrUnknownDialect) || hits.Load() != 0 {
					t.Errorf("error %v, %d requests", err, hits.Load())
				}
			}},
		{name: "connection refused", url: closed.URL, dialect: TGI,
			check: func(t *testing.T, err error) {
				if err == nil || !strings.HasPrefix(err.Error(), "scrape "+closed.URL+": ") || strings.Contains(err.Error(), "Get ") {
					t.Errorf("error %v", err)
				}
			}},
		{name: "bad URL", url: "http://[::1", dialect: TGI,
			check: func(t *testing.T, err error) {
				if err == nil {
					t.Error("no error")
				}
			}},
	}
	s := &Scraper{Timeout: 300 * time.Millisecond, MaxBodyBytes: 1024}
	defer s.Stop()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			u := tc.url
			if tc.h != nil {
				u = serve(t, tc.h).URL + "/metrics"
			}
			start := time.Now()
			l, err := s.Scrape(context.Background(), Target{URL: u, Dialect: tc.dialect})
			if tc.maxTime > 0 && time.Since(start) > tc.maxTime {
				t.Errorf("took %v", time.Since(start))
			}
			if tc.check != nil {
				if err == nil {
					t.Fatalf("Scrape = %+v, want an error", l)
				}
				if l != (Load{}) {
					t.Errorf("Load with an error = %+v", l)
				}
				tc.check(t, err)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !l.Fresh(time.Second) || l.Time.After(time.Now()) || l.Time.Before(start) {
				t.Errorf("Time %v not between %v and now", l.Time, start)
			}
			tc.want.Time = l.Time
			if !sameLoad(l, tc.want) {
				t.Errorf("Scrape = %+v, want %+v", l, tc.want)
			}
		})
	}
}

// recorder collects reports by target URL.
type recorder struct {
	mu      sync.Mutex
	loads   map[string][]Load
	errs    map[string][]error
	stopped atomic.Bool
	t       *testing.T
}

func newRecorder(t *testing.T) *recorder {
	return &recorder{loads: map[string][]Load{}, errs: map[string][]error{}, t: t}
}

func (r *recorder) report(t Target, l Load, err error) {
	if r.stopped.Load() {
		r.t.Errorf("Report(%s) after Stop returned", t.URL)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		r.errs[t.URL] = append(r.errs[t.URL], err)
	} else {
		r.loads[t.URL] = append(r.loads[t.URL], l)
	}
}

func (r *recorder) counts(url string) (loads, errs int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.loads[url]), len(r.errs[url])
}

// waitFor polls cond for up to d.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func fixedTargets(ts ...Target) func() []Target {
	return func() []Target { return ts }
}

func TestScraperReportsEveryEngine(t *testing.T) {
	want := map[string]Load{}
	var targets []Target
	for _, c := range []struct{ dialect, file, model string }{
		{VLLM, "vllm.prom", "Qwen/Qwen2.5-7B-Instruct"},
		{SGLang, "sglang.prom", ""},
		{TGI, "tgi.prom", ""},
		{LlamaCPP, "llamacpp.prom", ""},
	} {
		text := sampleFile(t, c.file)
		srv := serve(t, body(text))
		tg := Target{URL: srv.URL + "/metrics", Dialect: c.dialect, Model: c.model}
		targets = append(targets, tg)
		l, err := Parse([]byte(text), DefaultDialects()[c.dialect], c.model)
		if err != nil {
			t.Fatal(err)
		}
		want[tg.URL] = l
	}
	base := runtime.NumGoroutine() // the servers' own goroutines are not ours
	rec := newRecorder(t)
	// Each target listed twice: still scraped once at a time.
	s := &Scraper{Targets: fixedTargets(append(targets, targets...)...), Report: rec.report, Interval: 20 * time.Millisecond}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	for _, tg := range targets {
		waitFor(t, 5*time.Second, "three rounds of "+tg.Dialect, func() bool { n, _ := rec.counts(tg.URL); return n >= 3 })
	}
	s.Stop()
	rec.stopped.Store(true)
	for _, tg := range targets {
		rec.mu.Lock()
		loads, errs := rec.loads[tg.URL], rec.errs[tg.URL]
		rec.mu.Unlock()
		if len(errs) > 0 {
			t.Errorf("%s: errors %v", tg.Dialect, errs)
		}
		for _, l := range loads {
			w := want[tg.URL]
			w.Time = l.Time
			if !sameLoad(l, w) || l.Time.IsZero() {
				t.Errorf("%s: reported %+v, want %+v", tg.Dialect, l, w)
			}
		}
	}
	settle(t, base)
}

func TestScraperSlowTargetDoesNotDelayOthers(t *testing.T) {
	fast := serve(t, body("tgi_queue_size 1\n"))
	slow := serve(t, hang(t, nil))
	rec := newRecorder(t)
	fastT := Target{URL: fast.URL, Dialect: TGI}
	slowT := Target{URL: slow.URL, Dialect: TGI}
	s := &Scraper{
		Targets:  fixedTargets(slowT, fastT),
		Report:   rec.report,
		Interval: 20 * time.Millisecond,
		Timeout:  time.Second,
	}
	start := time.Now()
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	// Within the slow target's first timeout, the fast one keeps its pace.
	waitFor(t, 5*time.Second, "five reports of the fast target", func() bool { n, _ := rec.counts(fastT.URL); return n >= 5 })
	if took := time.Since(start); took > 700*time.Millisecond {
		t.Errorf("five fast reports took %v: the slow target held them up", took)
	}
	if n, e := rec.counts(slowT.URL); n+e != 0 {
		t.Errorf("slow target reported before its timeout: %d loads, %d errors", n, e)
	}
	waitFor(t, 5*time.Second, "the slow target's timeout", func() bool { _, e := rec.counts(slowT.URL); return e >= 1 })
	if took := time.Since(start); took < time.Second {
		t.Errorf("slow target failed after %v, before its timeout", took)
	}
	rec.mu.Lock()
	err := rec.errs[slowT.URL][0]
	rec.mu.Unlock()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("slow target's error %v is not a deadline", err)
	}
}

func TestScraperTargetsComeAndGo(t *testing.T) {
	a := Target{URL: serve(t, body("tgi_queue_size 1\n")).URL, Dialect: TGI}
	b := Target{URL: serve(t, body("tgi_queue_size 2\n")).URL, Dialect: TGI}
	var mu sync.Mutex
	current := []Target{a}
	rec := newRecorder(t)
	s := &Scraper{
		Targets: func() []Target {
			mu.Lock()
			defer mu.Unlock()
			return current
		},
		Report:   rec.report,
		Interval: 10 * time.Millisecond,
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	waitFor(t, 5*time.Second, "a", func() bool { n, _ := rec.counts(a.URL); return n >= 2 })
	mu.Lock()
	current = []Target{b}
	mu.Unlock()
	waitFor(t, 5*time.Second, "b", func() bool { n, _ := rec.counts(b.URL); return n >= 2 })
	// A scrape of a already under way when it left may still report once.
	na, _ := rec.counts(a.URL)
	time.Sleep(100 * time.Millisecond)
	if later, _ := rec.counts(a.URL); later > na+1 {
		t.Errorf("a, gone, reported %d more times", later-na)
	}
	mu.Lock()
	current = nil
	mu.Unlock()
	nb, _ := rec.counts(b.URL)
	time.Sleep(100 * time.Millisecond)
	if later, _ := rec.counts(b.URL); later > nb+1 {
		t.Errorf("b, gone, reported %d more times", later-nb)
	}
}

func TestScraperStopWithScrapesInFlight(t *testing.T) {
	entered := make(chan struct{}, 100)
	var targets []Target
	for range 5 {
		targets = append(targets, Target{URL: serve(t, hang(t, entered)).URL, Dialect: VLLM})
	}
	base := runtime.NumGoroutine()
	rec := newRecorder(t)
	s := &Scraper{
		Targets:     fixedTargets(targets...),
		Report:      rec.report,
		Interval:    5 * time.Millisecond,
		Timeout:     time.Minute, // only Stop ends the hanging scrapes
		Concurrency: 3,           // three scrapes hang, two wait for a slot
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		select {
		case <-entered:
		case <-time.After(5 * time.Second):
			t.Fatal("the hanging endpoints were not reached")
		}
	}
	time.Sleep(20 * time.Millisecond) // a few more rounds find every target busy
	start := time.Now()
	s.Stop()
	rec.stopped.Store(true)
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("Stop took %v", took)
	}
	if len(entered) != 0 {
		t.Errorf("%d more scrapes began than the concurrency allows", len(entered))
	}
	for _, tg := range targets {
		if n, e := rec.counts(tg.URL); n+e != 0 {
			t.Errorf("a scrape cut by Stop was reported: %d loads, %d errors", n, e)
		}
	}
	s.Stop() // again: harmless
	settle(t, base)
}

func TestScraperConcurrencyBound(t *testing.T) {
	var cur, peak atomic.Int32
	h := func(w http.ResponseWriter, r *http.Request) {
		n := cur.Add(1)
		defer cur.Add(-1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		time.Sleep(30 * time.Millisecond)
		_, _ = io.WriteString(w, "tgi_queue_size 0\n")
	}
	var targets []Target
	for range 8 {
		targets = append(targets, Target{URL: serve(t, h).URL, Dialect: TGI})
	}
	rec := newRecorder(t)
	s := &Scraper{Targets: fixedTargets(targets...), Report: rec.report, Interval: 10 * time.Millisecond, Concurrency: 2}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	for _, tg := range targets {
		waitFor(t, 10*time.Second, "every target", func() bool { n, _ := rec.counts(tg.URL); return n >= 1 })
	}
	if p := peak.Load(); p != 2 {
		t.Errorf("peak concurrency %d, want 2", p)
	}
}

func TestScraperJitter(t *testing.T) {
	tg := Target{URL: serve(t, body("tgi_queue_size 0\n")).URL, Dialect: TGI}
	rec := newRecorder(t)
	s := &Scraper{Targets: fixedTargets(tg), Report: rec.report, Interval: 5 * time.Millisecond, Jitter: 20 * time.Millisecond}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	waitFor(t, 5*time.Second, "reports with jitter", func() bool { n, _ := rec.counts(tg.URL); return n >= 3 })
}

func TestScraperStartStop(t *testing.T) {
	if err := (&Scraper{Report: func(Target, Load, error) {}}).Start(); err == nil {
		t.Error("Start without Targets succeeded")
	}
	if err := (&Scraper{Targets: fixedTargets()}).Start(); err == nil {
		t.Error("Start without Report succeeded")
	}
	(&Scraper{}).Stop() // before Start: harmless

	s := &Scraper{Targets: fixedTargets(), Report: func(Target, Load, error) {}}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err == nil {
		t.Error("second Start succeeded")
	}
	s.Stop()
	if err := s.Start(); !errors.Is(err, ErrStopped) {
		t.Errorf("Start after Stop: %v", err)
	}
}

// TestScraperGivenClient checks that a caller's client is used as is.
func TestScraperGivenClient(t *testing.T) {
	var sawUA atomic.Bool
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		sawUA.Store(r.Header.Get("User-Agent") == "llmedge-test")
		_, _ = io.WriteString(w, "tgi_queue_size 3\n")
	})
	client := &http.Client{Transport: uaTransport{http.DefaultTransport}}
	s := &Scraper{Client: client}
	l, err := s.Scrape(context.Background(), Target{URL: srv.URL, Dialect: TGI})
	if err != nil || l.Waiting != 3 || !sawUA.Load() {
		t.Errorf("Scrape = %+v, %v; custom client used: %v", l, err, sawUA.Load())
	}
}

type uaTransport struct{ next http.RoundTripper }

func (u uaTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("User-Agent", "llmedge-test")
	return u.next.RoundTrip(r)
}
