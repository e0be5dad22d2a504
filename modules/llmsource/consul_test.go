package llmsource

import (
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/llmedge/llmedge/backends/fleet"
	"github.com/llmedge/llmedge/discovery"
	"github.com/llmedge/llmedge/internal/consultest"
	"github.com/llmedge/llmedge/keep"
)

// follow opens src as the app does and counts the instances it reports.
func follow(t *testing.T, kept *keep.Store, src *Consul, client discovery.ConsulConfig) (*discovery.Watcher, *atomic.Int32, func()) {
	t.Helper()
	ds, release, err := src.Open(Env{Model: "qwen", Consul: client, Logger: zap.NewNop(), Kept: kept})
	if err != nil {
		t.Fatal(err)
	}
	n := new(atomic.Int32)
	unsubscribe := ds.Subscribe(func(list []discovery.Instance) { n.Store(int32(len(list))) })
	return ds.(*discovery.Watcher), n, func() { unsubscribe(); release() }
}

// Configs with the same watch settings share one watcher (a reload neither
// doubles nor interrupts it); other settings get their own; the last
// release stops it, and with it every goroutine it had.
func TestConsulWatchersSharedAndReleased(t *testing.T) {
	kept := keep.New() // what outlives a reload, as the app's
	agent := consultest.Start(t)
	agent.Register(t, consultest.Instance("llm-q", "q1", 9601, nil))
	agent.CloseIdleConnections()
	baseline := runtime.NumGoroutine()
	client := agent.Config()

	w1, oldCount, cleanupOld := follow(t, kept, &Consul{Service: "llm-q"}, client)
	fleet.WaitSynced([]fleet.Syncer{w1}, 10*time.Second, zap.NewNop())
	if n := oldCount.Load(); n != 1 {
		t.Fatalf("old config sees %d replicas, want 1", n)
	}

	// "Reload": same settings, the new config filled at once from the running watcher.
	w2, newCount, cleanupNew := follow(t, kept, &Consul{Service: "llm-q"}, client)
	if w2 != w1 {
		t.Fatal("same settings started a second watcher")
	}
	if n := newCount.Load(); n != 1 {
		t.Fatalf("new config sees %d replicas right after subscribing, want 1 (no gap)", n)
	}
	cleanupOld() // the old config goes away
	agent.Register(t, consultest.Instance("llm-q", "q2", 9602, nil))
	waitCond(t, 2*time.Second, "q2 seen by the new config", func() bool { return newCount.Load() == 2 })
	if n := oldCount.Load(); n != 1 {
		t.Errorf("the released config still gets updates: %d replicas", n)
	}
	if !w1.Status().Synced {
		t.Error("watcher stopped while a config still uses it")
	}

	// Changed settings: another watcher.
	w3, _, cleanupChanged := follow(t, kept, &Consul{Service: "llm-q", Tag: "gpu"}, client)
	if w3 == w1 {
		t.Fatal("changed settings reused the old watcher")
	}
	cleanupNew()
	cleanupChanged()
	agent.CloseIdleConnections()
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > baseline {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("goroutines %d > baseline %d after the last release:\n%s", runtime.NumGoroutine(), baseline, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func waitCond(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A source's token replaces the `consul` option's token for its watcher
// (and makes it a watcher of its own).
func TestConsulSourceToken(t *testing.T) {
	kept := keep.New() // what outlives a reload, as the app's
	var mu sync.Mutex
	tokens := map[string]bool{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		tokens[r.Header.Get("X-Consul-Token")] = true
		mu.Unlock()
		if r.URL.Query().Get("index") != "1" {
			<-r.Context().Done() // block like Consul
			return
		}
		w.Header().Set("X-Consul-Index", "5")
		_, _ = w.Write([]byte("[]"))
	}))
	defer srv.Close()
	t.Setenv("MODEL_TOKEN", "model-secret")
	client := discovery.ConsulConfig{Address: strings.TrimPrefix(srv.URL, "http://"), Scheme: "http", Token: "global-secret"}
	wa, _, ca := follow(t, kept, &Consul{Service: "svc"}, client)
	defer ca()
	wb, _, cb := follow(t, kept, &Consul{Service: "svc", Token: "{env.MODEL_TOKEN}"}, client)
	defer cb()
	if wa == wb {
		t.Fatal("different tokens share a watcher")
	}
	fleet.WaitSynced([]fleet.Syncer{wa, wb}, 5*time.Second, zap.NewNop())
	mu.Lock()
	defer mu.Unlock()
	if !tokens["global-secret"] || !tokens["model-secret"] || len(tokens) != 2 {
		t.Errorf("tokens sent: %v", tokens)
	}
}
