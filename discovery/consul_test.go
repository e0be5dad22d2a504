package discovery

import (
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"
)

// fakeConsul answers /v1/health/service/<svc> from a script, and records
// every query. It lets the tests check the watch rules precisely, which a
// real agent would not let them provoke (an index going backwards, an
// index of 0, a hung connection).
type fakeConsul struct {
	t   *testing.T
	srv *httptest.Server

	mu      sync.Mutex
	queries []fakeQuery
	// answer is called per query (under mu); it returns the status, the
	// X-Consul-Index and the entries, or hang=true to never answer.
	answer func(n int, q fakeQuery) (status int, index uint64, entries []*api.ServiceEntry, hang bool)
}

type fakeQuery struct {
	At      time.Time
	Index   string // the index parameter as sent ("" when absent)
	Wait    string
	Passing bool
	Tag     string
	Filter  string
	DC      string
	Token   string
}

func newFakeConsul(t *testing.T) *fakeConsul {
	f := &fakeConsul{t: t}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeConsul) serve(w http.ResponseWriter, r *http.Request) {
	if !strings.HasPrefix(r.URL.Path, "/v1/health/service/") {
		http.NotFound(w, r)
		return
	}
	q := r.URL.Query()
	fq := fakeQuery{At: time.Now(), Index: q.Get("index"), Wait: q.Get("wait"), Passing: q.Has("passing"),
		Tag: q.Get("tag"), Filter: q.Get("filter"), DC: q.Get("dc"), Token: r.Header.Get("X-Consul-Token")}
	f.mu.Lock()
	f.queries = append(f.queries, fq)
	n := len(f.queries)
	status, index, entries, hang := f.answer(n, fq)
	f.mu.Unlock()
	if hang {
		<-r.Context().Done()
		return
	}
	w.Header().Set("X-Consul-Index", strconv.FormatUint(index, 10))
	w.WriteHeader(status)
	if status == 200 {
		_ = json.NewEncoder(w).Encode(entries)
	}
}

func (f *fakeConsul) Queries() []fakeQuery {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]fakeQuery(nil), f.queries...)
}

func (f *fakeConsul) config() ConsulConfig {
	return ConsulConfig{Address: strings.TrimPrefix(f.srv.URL, "http://"), Scheme: "http", Token: "secret-token"}
}

func entry(id string, port int, meta map[string]string) *api.ServiceEntry {
	return &api.ServiceEntry{
		Node:    &api.Node{Node: "n1", Address: "10.0.0.1"},
		Service: &api.AgentService{ID: id, Service: "llm", Address: "127.0.0.1", Port: port, Meta: meta, Weights: api.AgentWeights{Passing: 1, Warning: 1}},
	}
}

// collector records every set delivered to a subscriber.
type collector struct {
	mu   sync.Mutex
	sets [][]Instance
}

func (c *collector) add(l []Instance) {
	c.mu.Lock()
	c.sets = append(c.sets, l)
	c.mu.Unlock()
}

func (c *collector) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.sets)
}

func (c *collector) last() []Instance {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.sets) == 0 {
		return nil
	}
	return c.sets[len(c.sets)-1]
}

func startWatcher(t *testing.T, c ConsulConfig, wc WatchConfig) (*Watcher, *collector) {
	t.Helper()
	w, err := NewConsulWatcher(c, wc, nil)
	if err != nil {
		t.Fatal(err)
	}
	col := &collector{}
	w.Subscribe(col.add)
	w.Start()
	t.Cleanup(w.Stop)
	return w, col
}

func waitUntil(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func instanceURLs(l []Instance) string {
	var s []string
	for _, in := range l {
		s = append(s, in.URL)
	}
	return strings.Join(s, " ")
}

// The query is a blocking, passing-only health query carrying the tag,
// filter, datacenter and token; the first query never sends index 0, and
// later ones wait on the last X-Consul-Index.
func TestConsulQueryShape(t *testing.T) {
	f := newFakeConsul(t)
	f.answer = func(n int, q fakeQuery) (int, uint64, []*api.ServiceEntry, bool) {
		if n >= 3 {
			return 0, 0, nil, true
		}
		return 200, uint64(100 + n), []*api.ServiceEntry{entry("a", 9001, nil)}, false
	}
	_, col := startWatcher(t, f.config(), WatchConfig{Service: "llm", Tag: "gpu", Filter: `Service.Meta.zone == "a"`, Datacenter: "dc9", Wait: 30 * time.Second})
	waitUntil(t, 5*time.Second, "three queries", func() bool { return len(f.Queries()) >= 3 })
	qs := f.Queries()
	for i, q := range qs[:3] {
		if !q.Passing || q.Tag != "gpu" || q.Filter != `Service.Meta.zone == "a"` || q.DC != "dc9" || q.Token != "secret-token" || q.Wait != "30000ms" {
			t.Errorf("query %d: %+v", i, q)
		}
	}
	if qs[0].Index != "1" {
		t.Errorf("first index = %q, want 1 (never 0)", qs[0].Index)
	}
	if qs[1].Index != "101" || qs[2].Index != "102" {
		t.Errorf("indexes = %q, %q; want 101, 102", qs[1].Index, qs[2].Index)
	}
	if col.count() != 1 {
		t.Errorf("%d deliveries of an unchanged set, want 1", col.count())
	}
}

// An index that goes backwards resets the watch (the next query is sent
// with index 1, answering at once); an index of 0 is waited on as 1.
func TestConsulIndexResetAndZero(t *testing.T) {
	f := newFakeConsul(t)
	indexes := []uint64{50, 60, 7, 8, 0, 0}
	f.answer = func(n int, q fakeQuery) (int, uint64, []*api.ServiceEntry, bool) {
		if n > len(indexes) {
			return 0, 0, nil, true
		}
		return 200, indexes[n-1], []*api.ServiceEntry{entry("a", 9000+n, nil)}, false
	}
	_, col := startWatcher(t, f.config(), WatchConfig{Service: "llm", Rate: 100})
	waitUntil(t, 5*time.Second, "all scripted answers", func() bool { return len(f.Queries()) > len(indexes) })
	var got []string
	for _, q := range f.Queries()[:len(indexes)+1] {
		got = append(got, q.Index)
	}
	// 50 -> 60 -> (7 < 60: reset) 1 -> 8 -> (0: sent as 1) 1 -> 1
	want := "1 50 60 1 8 1 1"
	if strings.Join(got, " ") != want {
		t.Errorf("indexes sent = %v, want %s", got, want)
	}
	if got := col.last(); len(got) != 1 || got[0].URL != "http://127.0.0.1:9006" {
		t.Errorf("last set = %v, want the last answer's", instanceURLs(got))
	}
}

// Identical answers (a blocking query may return without a change) are not
// passed on; changed ones are, sorted and deduplicated by URL.
func TestConsulDedupe(t *testing.T) {
	f := newFakeConsul(t)
	same := []*api.ServiceEntry{entry("b", 9002, nil), entry("a", 9001, nil)}
	f.answer = func(n int, q fakeQuery) (int, uint64, []*api.ServiceEntry, bool) {
		switch {
		case n <= 5:
			return 200, uint64(10 + n), same, false
		case n == 6: // a change, with a duplicate address under another ID
			return 200, 20, append(same, entry("c", 9003, nil), entry("c-dup", 9003, nil)), false
		}
		return 0, 0, nil, true
	}
	w, col := startWatcher(t, f.config(), WatchConfig{Service: "llm", Rate: 100})
	waitUntil(t, 5*time.Second, "seven queries", func() bool { return len(f.Queries()) >= 7 })
	waitUntil(t, 2*time.Second, "two deliveries", func() bool { return col.count() >= 2 })
	if n := col.count(); n != 2 {
		t.Fatalf("%d deliveries, want 2 (five identical answers, then a change)", n)
	}
	if got := instanceURLs(col.last()); got != "http://127.0.0.1:9001 http://127.0.0.1:9002 http://127.0.0.1:9003" {
		t.Errorf("set = %s", got)
	}
	if st := w.Status(); !st.Synced || st.Instances != 3 || st.Source != "consul" || st.Service != "llm" {
		t.Errorf("status = %+v", st)
	}
}

// The token bucket bounds the query rate even when Consul answers every
// query at once with a new index (flapping checks).
func TestConsulRateLimit(t *testing.T) {
	f := newFakeConsul(t)
	f.answer = func(n int, q fakeQuery) (int, uint64, []*api.ServiceEntry, bool) {
		return 200, uint64(n + 1), []*api.ServiceEntry{entry(fmt.Sprint(n), 9000+n%2, nil)}, false
	}
	startWatcher(t, f.config(), WatchConfig{Service: "llm", Rate: 10})
	time.Sleep(time.Second)
	// 10/s with a burst of 2: at most 2 + 10*elapsed (plus scheduling slack).
	if n := len(f.Queries()); n > 2+10*2 || n < 3 {
		t.Errorf("%d queries in about 1 s at rate 10/s", n)
	}
}

// While Consul fails, the last-known-good set stays, the error is reported,
// and queries back off; the next success clears the error.
func TestConsulKeepsLastKnownGoodAndBacksOff(t *testing.T) {
	f := newFakeConsul(t)
	var failing = true
	f.answer = func(n int, q fakeQuery) (int, uint64, []*api.ServiceEntry, bool) {
		switch {
		case n == 1:
			return 200, 10, []*api.ServiceEntry{entry("a", 9001, nil)}, false
		case failing:
			return 500, 0, nil, false
		}
		return 200, 11, []*api.ServiceEntry{entry("a", 9001, nil), entry("b", 9002, nil)}, false
	}
	w, col := startWatcher(t, f.config(), WatchConfig{Service: "llm", Rate: 1000, MinBackoff: 50 * time.Millisecond, MaxBackoff: 400 * time.Millisecond})
	waitUntil(t, 5*time.Second, "six failed queries", func() bool { return len(f.Queries()) >= 7 })
	st := w.Status()
	if !st.Synced || st.Instances != 1 || !strings.Contains(st.LastError, "500") {
		t.Errorf("status while failing = %+v", st)
	}
	if got := instanceURLs(col.last()); got != "http://127.0.0.1:9001" || col.count() != 1 {
		t.Errorf("deliveries while failing: %d, last %s", col.count(), got)
	}
	// Backoff: the gaps between failed queries grow (50, 100, 200, 400 ms
	// with jitter in [b/2, b)); with rate 1000/s they would be ~1 ms.
	qs := f.Queries()
	// After an error the index starts over: the agent that answers next
	// may be a restarted one with a lower index.
	if qs[1].Index != "10" || qs[2].Index != "1" {
		t.Errorf("indexes around the first failure = %q, %q; want 10, 1", qs[1].Index, qs[2].Index)
	}
	if gap := qs[6].At.Sub(qs[5].At); gap < 100*time.Millisecond {
		t.Errorf("gap after the 5th failure = %s, want >= 100ms (backoff)", gap)
	}
	f.mu.Lock()
	failing = false
	f.mu.Unlock()
	waitUntil(t, 5*time.Second, "recovery", func() bool { return w.Status().LastError == "" && w.Status().Instances == 2 })
}

// Every call has a deadline: a query Consul never answers is abandoned
// after wait + wait/16 + slack, and the loop goes on.
func TestConsulCallDeadline(t *testing.T) {
	old := callSlack
	callSlack = 200 * time.Millisecond
	defer func() { callSlack = old }()
	f := newFakeConsul(t)
	f.answer = func(n int, q fakeQuery) (int, uint64, []*api.ServiceEntry, bool) {
		switch n {
		case 1:
			return 200, 10, []*api.ServiceEntry{entry("a", 9001, nil)}, false
		case 2:
			return 0, 0, nil, true // a dead connection
		}
		return 200, 30, []*api.ServiceEntry{entry("a", 9003, nil)}, false
	}
	w, _ := startWatcher(t, f.config(), WatchConfig{Service: "llm", Wait: time.Second, Rate: 100, MinBackoff: 10 * time.Millisecond})
	waitUntil(t, 10*time.Second, "a query after the hung one", func() bool { return len(f.Queries()) >= 3 })
	waitUntil(t, 5*time.Second, "the new set", func() bool {
		l, _ := w.Instances()
		return len(l) == 1 && l[0].URL == "http://127.0.0.1:9003"
	})
	qs := f.Queries()
	if gap := qs[2].At.Sub(qs[1].At); gap < time.Second {
		t.Errorf("hung query abandoned after %s, before its wait", gap)
	}
}

// Stop aborts a blocking query in flight and returns promptly; subscribers
// hear nothing more.
func TestConsulStopAbortsQuery(t *testing.T) {
	f := newFakeConsul(t)
	f.answer = func(n int, q fakeQuery) (int, uint64, []*api.ServiceEntry, bool) {
		if n == 1 {
			return 200, 10, []*api.ServiceEntry{entry("a", 9001, nil)}, false
		}
		return 0, 0, nil, true
	}
	w, _ := startWatcher(t, f.config(), WatchConfig{Service: "llm"})
	waitUntil(t, 5*time.Second, "the blocking query", func() bool { return len(f.Queries()) >= 2 })
	done := make(chan struct{})
	go func() { w.Stop(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Stop did not return while a query was blocked")
	}
}

func TestConsulMetaOverrides(t *testing.T) {
	inst, problems := fromMeta("id1", "10.0.0.5", 8000, map[string]string{
		"protocol": "ollama", "model": "Qwen/Qwen2.5-7B-Instruct", "weight": "3", "max_concurrency": "8", "scheme": "HTTPS",
	}, 1)
	want := Instance{ID: "id1", URL: "https://10.0.0.5:8000", Address: "10.0.0.5:8000", Scheme: "https",
		Model: "Qwen/Qwen2.5-7B-Instruct", Protocol: "ollama", Weight: 3, MaxConcurrency: 8}
	if inst != want || len(problems) != 0 {
		t.Errorf("got %+v %v, want %+v", inst, problems, want)
	}
	inst, problems = fromMeta("id2", "::1", 8000, map[string]string{"weight": "-1", "max_concurrency": "x", "scheme": "gopher"}, 2)
	if inst.URL != "http://[::1]:8000" || inst.Weight != 0 || inst.MaxConcurrency != 0 || len(problems) != 3 {
		t.Errorf("bad meta: %+v %v", inst, problems)
	}
	inst, _ = fromMeta("id3", "h", 1, nil, 4)
	if inst.Weight != 4 {
		t.Errorf("weight from Weights.Passing = %d, want 4", inst.Weight)
	}
}

func TestStatic(t *testing.T) {
	s, err := NewStatic([]string{"http://10.0.0.5:8000/", "https://gpu.example/v"})
	if err != nil {
		t.Fatal(err)
	}
	var got []Instance
	s.Subscribe(func(l []Instance) { got = l })
	if len(got) != 2 || got[0].URL != "http://10.0.0.5:8000" || got[1].Address != "gpu.example:443" || got[1].URL != "https://gpu.example/v" {
		t.Errorf("static = %+v", got)
	}
	if st := s.Status(); !st.Synced || st.Instances != 2 || st.Source != "static" {
		t.Errorf("status = %+v", st)
	}
	for _, bad := range []string{"10.0.0.5:8000", "ftp://x", "http://x?y=1"} {
		if _, err := NewStatic([]string{bad}); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestConsulResolveTakesEnvironment(t *testing.T) {
	t.Setenv("CONSUL_HTTP_ADDR", "consul.internal:8501")
	t.Setenv("CONSUL_HTTP_TOKEN", "env-token")
	t.Setenv("CONSUL_HTTP_SSL", "true")
	t.Setenv("CONSUL_CACERT", "/etc/consul/ca.pem")
	r := ConsulConfig{}.Resolve()
	if r.Address != "consul.internal:8501" || r.Token != "env-token" || r.Scheme != "https" || r.CAFile != "/etc/consul/ca.pem" {
		t.Errorf("resolved = %+v", r)
	}
	r = ConsulConfig{Address: "127.0.0.1:8500", Token: "mine", Scheme: "http"}.Resolve()
	if r.Address != "127.0.0.1:8500" || r.Token != "mine" || r.Scheme != "http" {
		t.Errorf("explicit settings lost: %+v", r)
	}
}

// TLS towards Consul: with the CA file the watcher syncs; without it the
// certificate is refused and reported.
func TestConsulTLS(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Consul-Index", "5")
		_ = json.NewEncoder(w).Encode([]*api.ServiceEntry{entry("a", 9001, nil)})
	}))
	defer srv.Close()
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := strings.TrimPrefix(srv.URL, "https://")
	w, _ := startWatcher(t, ConsulConfig{Address: addr, Scheme: "https", CAFile: ca}, WatchConfig{Service: "llm"})
	waitUntil(t, 5*time.Second, "sync over TLS", func() bool { return w.Status().Synced })

	bad, _ := startWatcher(t, ConsulConfig{Address: addr, Scheme: "https"}, WatchConfig{Service: "llm"})
	waitUntil(t, 5*time.Second, "a certificate error", func() bool { return strings.Contains(bad.Status().LastError, "certificate") })
	if bad.Status().Synced {
		t.Error("synced without trusting the server's certificate")
	}
}
