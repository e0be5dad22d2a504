package llmedge

import (
	"context"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/llmedge/llmedge/discovery"
	"github.com/llmedge/llmedge/internal/consultest"
	"github.com/llmedge/llmedge/pool"
)

func TestConsulReplicasFromInstances(t *testing.T) {
	mc := &ModelConfig{Name: "qwen", MaxConcurrency: 7}
	got := mc.replicas([]discovery.Instance{
		{ID: "a", URL: "http://10.0.0.1:8000", Model: "Qwen/Qwen2.5-7B-Instruct", Protocol: "openai", Weight: 3, MaxConcurrency: 2},
		{ID: "b", URL: "https://10.0.0.2:8443"},
		{ID: "c", URL: "http://10.0.0.3:8000", Protocol: "carrier-pigeon"},
	}, zap.NewNop())
	if len(got) != 2 {
		t.Fatalf("%d replicas, want 2 (unknown protocol skipped)", len(got))
	}
	if r := got[0]; r.URL != "http://10.0.0.1:8000" || r.Model != "Qwen/Qwen2.5-7B-Instruct" || r.Protocol != "openai" || r.Weight != 3 || r.MaxConcurrency != 2 {
		t.Errorf("meta overrides lost: %+v", r)
	}
	if r := got[1]; r.URL != "https://10.0.0.2:8443" || r.Model != "" || r.Protocol != "" || r.MaxConcurrency != 7 {
		t.Errorf("model defaults lost: %+v", r)
	}
}

// Configs with the same watch settings share one watcher (a reload neither
// doubles nor interrupts it); other settings get their own; the last
// release stops it, and with it every goroutine it had.
func TestConsulWatchersSharedAndReleased(t *testing.T) {
	agent := consultest.Start(t)
	agent.Register(t, consultest.Instance("llm-q", "q1", 9601, nil))
	agent.CloseIdleConnections()
	baseline := runtime.NumGoroutine()
	client := agent.Config()

	old := &ModelConfig{Name: "qwen", ConsulService: "llm-q"}
	oldPool := pool.New("qwen", pool.P2C{})
	w1, cleanupOld, err := old.watchConsul(client, oldPool, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	WaitSynced(context.Background(), []*discovery.Watcher{w1}, 10*time.Second, zap.NewNop())
	if n := len(oldPool.Replicas()); n != 1 {
		t.Fatalf("old pool has %d replicas, want 1", n)
	}

	// "Reload": same settings, a new pool filled at once from the running watcher.
	newPool := pool.New("qwen", pool.P2C{})
	w2, cleanupNew, err := old.watchConsul(client, newPool, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	if w2 != w1 {
		t.Fatal("same settings started a second watcher")
	}
	if n := len(newPool.Replicas()); n != 1 {
		t.Fatalf("new pool has %d replicas right after subscribing, want 1 (no gap)", n)
	}
	cleanupOld() // the old config goes away
	agent.Register(t, consultest.Instance("llm-q", "q2", 9602, nil))
	waitCond(t, 2*time.Second, "q2 in the new pool", func() bool { return len(newPool.Replicas()) == 2 })
	if n := len(oldPool.Replicas()); n != 1 {
		t.Errorf("the released config's pool still gets updates: %d replicas", n)
	}
	if w1.Status().Synced != true {
		t.Error("watcher stopped while a config still uses it")
	}

	// Changed settings: another watcher.
	changed := &ModelConfig{Name: "qwen", ConsulService: "llm-q", ConsulTag: "gpu"}
	w3, cleanupChanged, err := changed.watchConsul(client, pool.New("qwen", pool.P2C{}), zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
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

// A model's consul_token replaces the `consul` option's token for its
// watcher (and makes it a watcher of its own).
func TestConsulModelToken(t *testing.T) {
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
	a := &ModelConfig{Name: "a", ConsulService: "svc"}
	b := &ModelConfig{Name: "b", ConsulService: "svc", ConsulToken: "{env.MODEL_TOKEN}"}
	wa, ca, err := a.watchConsul(client, pool.New("a", pool.P2C{}), zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	defer ca()
	wb, cb, err := b.watchConsul(client, pool.New("b", pool.P2C{}), zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	defer cb()
	if wa == wb {
		t.Fatal("different tokens share a watcher")
	}
	WaitSynced(context.Background(), []*discovery.Watcher{wa, wb}, 5*time.Second, zap.NewNop())
	mu.Lock()
	defer mu.Unlock()
	if !tokens["global-secret"] || !tokens["model-secret"] || len(tokens) != 2 {
		t.Errorf("tokens sent: %v", tokens)
	}
}
