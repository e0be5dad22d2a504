package discovery_test

import (
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/llmedge/llmedge/discovery"
	"github.com/llmedge/llmedge/internal/consultest"
)

// These tests run a real `consul agent -dev` (see internal/consultest).

// recorder keeps the sets a subscriber received and when.
type recorder struct {
	mu   sync.Mutex
	last []discovery.Instance
	at   time.Time
	n    int
}

func (r *recorder) add(l []discovery.Instance) {
	r.mu.Lock()
	r.last, r.at, r.n = l, time.Now(), r.n+1
	r.mu.Unlock()
}

func (r *recorder) get() ([]discovery.Instance, time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last, r.at
}

func (r *recorder) has(id string) bool {
	l, _ := r.get()
	for _, in := range l {
		if in.ID == id {
			return true
		}
	}
	return false
}

func (r *recorder) ids() string {
	l, _ := r.get()
	var s []string
	for _, in := range l {
		s = append(s, in.ID)
	}
	return strings.Join(s, ",")
}

func watch(t *testing.T, agent *consultest.Agent, wc discovery.WatchConfig) (*discovery.Watcher, *recorder) {
	t.Helper()
	w, err := discovery.NewConsulWatcher(agent.Config(), wc, nil)
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	w.Subscribe(rec.add)
	w.Start()
	t.Cleanup(w.Stop)
	waitFor(t, 10*time.Second, "the first sync", func() bool { return w.Status().Synced })
	return w, rec
}

func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A registration reaches subscribers within 1 s, with its Meta overrides;
// a deregistration leaves within 1 s; tag and filter select instances.
func TestConsulAgentRegisterDeregister(t *testing.T) {
	agent := consultest.Start(t)
	_, all := watch(t, agent, discovery.WatchConfig{Service: "llm-a"})
	_, tagged := watch(t, agent, discovery.WatchConfig{Service: "llm-a", Tag: "gpu"})
	_, filtered := watch(t, agent, discovery.WatchConfig{Service: "llm-a", Filter: `Service.Meta.zone == "b"`})

	reg := consultest.Instance("llm-a", "a1", 9101, map[string]string{
		"model": "Qwen/Qwen2.5-7B-Instruct", "protocol": "openai", "weight": "3", "max_concurrency": "4", "zone": "b",
	})
	reg.Tags = []string{"gpu"}
	start := time.Now()
	agent.Register(t, reg)
	waitFor(t, time.Second, "a1 in the set", func() bool { return all.has("a1") })
	_, at := all.get()
	t.Logf("registration -> subscriber: %s", at.Sub(start))
	l, _ := all.get()
	want := discovery.Instance{ID: "a1", URL: "http://127.0.0.1:9101", Address: "127.0.0.1:9101", Scheme: "http",
		Model: "Qwen/Qwen2.5-7B-Instruct", Protocol: "openai", Weight: 3, MaxConcurrency: 4}
	if len(l) != 1 || l[0] != want {
		t.Errorf("set = %+v, want [%+v]", l, want)
	}
	waitFor(t, time.Second, "a1 in the tagged and filtered sets", func() bool { return tagged.has("a1") && filtered.has("a1") })

	agent.Register(t, consultest.Instance("llm-a", "a2", 9102, map[string]string{"zone": "c"}))
	waitFor(t, time.Second, "a2 in the set", func() bool { return all.has("a2") })
	// Another service's instance, then a3: once a3 is seen, the watcher
	// has queried since o1 was registered, and o1 must not be there.
	agent.Register(t, consultest.Instance("llm-other", "o1", 9201, nil))
	agent.Register(t, consultest.Instance("llm-a", "a3", 9103, map[string]string{"zone": "c"}))
	waitFor(t, time.Second, "a3 in the set", func() bool { return all.has("a3") })
	if got := all.ids(); got != "a1,a2,a3" {
		t.Errorf("set = %s, want a1,a2,a3 (another service's instance must not appear)", got)
	}
	if tagged.has("a2") || filtered.has("a2") {
		t.Errorf("a2 has neither the tag nor the meta: tagged %s, filtered %s", tagged.ids(), filtered.ids())
	}

	start = time.Now()
	agent.Deregister(t, "a1")
	waitFor(t, time.Second, "a1 gone", func() bool { return !all.has("a1") && all.has("a2") })
	t.Logf("deregistration -> subscriber: %s", time.Since(start))
}

// A failing check takes the instance out within its interval + 1 s, and a
// passing one brings it back.
func TestConsulAgentFailingCheck(t *testing.T) {
	agent := consultest.Start(t)
	var healthy atomic.Bool
	healthy.Store(true)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !healthy.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	host, port := splitURL(t, srv.URL)
	_, rec := watch(t, agent, discovery.WatchConfig{Service: "llm-c"})
	interval := time.Second
	agent.Register(t, &api.AgentServiceRegistration{ID: "c1", Name: "llm-c", Address: host, Port: port,
		Check: &api.AgentServiceCheck{HTTP: srv.URL + "/health", Interval: interval.String(), Timeout: "1s",
			DeregisterCriticalServiceAfter: "1m", Status: api.HealthPassing}})
	agent.Register(t, consultest.Instance("llm-c", "c2", 9302, nil))
	waitFor(t, time.Second, "c1 and c2", func() bool { return rec.has("c1") && rec.has("c2") })

	start := time.Now()
	healthy.Store(false)
	waitFor(t, interval+time.Second, "c1 removed after its check failed", func() bool { return !rec.has("c1") })
	t.Logf("check failing -> removed: %s (interval %s)", time.Since(start), interval)
	if !rec.has("c2") {
		t.Errorf("c2 was removed too: %s", rec.ids())
	}
	healthy.Store(true)
	waitFor(t, interval+time.Second, "c1 back after its check passed", func() bool { return rec.has("c1") })
}

// Consul going away keeps the last-known-good set and reports the error;
// once it is back (a dev agent comes back empty), new registrations are seen.
func TestConsulAgentOutage(t *testing.T) {
	agent := consultest.Start(t)
	w, rec := watch(t, agent, discovery.WatchConfig{Service: "llm-o", MaxBackoff: 2 * time.Second})
	agent.Register(t, consultest.Instance("llm-o", "o1", 9401, nil))
	waitFor(t, time.Second, "o1", func() bool { return rec.has("o1") })

	agent.Kill()
	waitFor(t, 10*time.Second, "the error to be reported", func() bool { return w.Status().LastError != "" })
	// Time passing on purpose: a few failed retries (nothing counts them).
	time.Sleep(time.Second)
	if st := w.Status(); !st.Synced || st.Instances != 1 || !rec.has("o1") {
		t.Fatalf("while Consul is down: status %+v, set %s; want the last-known-good o1", st, rec.ids())
	}

	agent.Restart(t)
	agent.Register(t, consultest.Instance("llm-o", "o2", 9402, nil))
	waitFor(t, 15*time.Second, "o2 after Consul came back", func() bool { return rec.has("o2") })
	if rec.has("o1") {
		t.Errorf("o1 is still listed, but the restarted agent does not know it: %s", rec.ids())
	}
	if st := w.Status(); st.LastError != "" {
		t.Errorf("error still reported after recovery: %+v", st)
	}
}

// Stopping watchers ends every goroutine they started, including the HTTP
// connections to Consul.
func TestConsulAgentGoroutinesAfterStop(t *testing.T) {
	agent := consultest.Start(t)
	agent.Register(t, consultest.Instance("llm-g", "g1", 9501, nil))
	agent.CloseIdleConnections()
	baseline := runtime.NumGoroutine()

	var ws []*discovery.Watcher
	for _, svc := range []string{"llm-g", "llm-g", "llm-h"} {
		w, err := discovery.NewConsulWatcher(agent.Config(), discovery.WatchConfig{Service: svc}, nil)
		if err != nil {
			t.Fatal(err)
		}
		w.Subscribe(func([]discovery.Instance) {})
		w.Start()
		ws = append(ws, w)
	}
	for _, w := range ws {
		waitFor(t, 10*time.Second, "sync", func() bool { return w.Status().Synced })
	}
	if n := runtime.NumGoroutine(); n <= baseline {
		t.Fatalf("watchers running but goroutines %d <= baseline %d: the test cannot see leaks", n, baseline)
	}
	for _, w := range ws {
		w.Stop()
	}
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > baseline {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("goroutines %d > baseline %d after Stop:\n%s", runtime.NumGoroutine(), baseline, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func splitURL(t *testing.T, u string) (string, int) {
	t.Helper()
	hp := strings.TrimPrefix(u, "http://")
	i := strings.LastIndexByte(hp, ':')
	var port int
	for _, c := range hp[i+1:] {
		port = port*10 + int(c-'0')
	}
	return hp[:i], port
}
