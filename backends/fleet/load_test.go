package fleet

import (
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/backends/pool"
	"github.com/llmedge/llmedge/backends/scrape"
	"github.com/llmedge/llmedge/gateway"
	"github.com/llmedge/llmedge/routing"
)

// TestLoadReportOwnWork: an engine's figures are kept with the gateway's
// own requests on the replica when they were read, and how many of those
// were sheddable: the batch gate tells a queue of its own lines from an
// online request waiting by them.
func TestLoadReportOwnWork(t *testing.T) {
	p := pool.NewWithOptions(t.Name(), &routing.RoundRobin{}, pool.Options{})
	defer p.Close()
	r, err := pool.NewReplica("http://ra:1")
	if err != nil {
		t.Fatal(err)
	}
	p.Set([]*pool.Replica{r})
	for _, prio := range []api.Priority{api.PriorityCritical, api.PrioritySheddable, api.PrioritySheddable} {
		l, err := p.Acquire(&pool.Request{Priority: prio}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Release(pool.Success)
	}
	m := &model{Model: &gateway.Model{Name: "qwen", Pool: p}}
	l := newScraper(m, Load{}, nil, zap.NewNop(), nil)
	l.report(scrape.Target{URL: "http://ra:1" + DefaultLoadPath}, scrape.Load{Running: 8, Waiting: 2, Time: time.Now()}, nil)
	got, ok := r.EngineLoad()
	if !ok {
		t.Fatal("no fresh figures kept")
	}
	if got.Running != 8 || got.Waiting != 2 || got.Own != 3 || got.OwnSheddable != 2 {
		t.Fatalf("kept running %v waiting %v own %v sheddable %v, want 8 2 3 2", got.Running, got.Waiting, got.Own, got.OwnSheddable)
	}
}
