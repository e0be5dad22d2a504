package e2e

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmedge/llmedge/internal/consultest"
)

// Drain (docs/resilience.md): a replica that leaves through its source
// (deregistered, its check critical or in maintenance, removed from a
// static list by a reload) gets no new request, and the streams it has
// run to their end on it: not cut, not continued elsewhere.

// drainStreams runs n native streams to model, each waiting for the one
// before to have text, and returns a wait for their ends.
func drainStreams(t *testing.T, g *Gateway, tok, model, prefix string, n int) func() []nativeStream {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	results := make([]nativeStream, n)
	var wg sync.WaitGroup
	for i := range n {
		var text atomic.Bool
		wg.Add(1)
		go func() {
			defer wg.Done()
			body := fmt.Sprintf(`{"model_type":%q,"stream":true,"messages":[{"role":"user","content":"%s %d"}]}`, model, prefix, i)
			req, _ := http.NewRequestWithContext(ctx, "POST", g.Base+"/tasks/assistant_inference", strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+tok)
			req.Header.Set("Content-Type", "application/json")
			resp, err := g.Client.Do(req)
			if err != nil {
				results[i].err = err
				text.Store(true)
				return
			}
			results[i] = readNativeStream(resp, func() { text.Store(true) })
		}()
		waitFor(t, 10*time.Second, text.Load)
	}
	return func() []nativeStream {
		wg.Wait()
		cancel()
		return results
	}
}

// checkDrained fails unless every stream ended whole on the replica it
// began on: the clean answer, no continuation.
func checkDrained(t *testing.T, g *Gateway, tok, prefix string, results []nativeStream) {
	t.Helper()
	for i, r := range results {
		want, _, _ := cleanAnswer(t, g, tok, "clean", fmt.Sprintf("%s %d", prefix, i))
		if r.err != nil || r.end != "done" || r.text != want || r.trailer != "" {
			t.Errorf("stream %d: err %v, end %q, trailer %q, text %q, want %q", i, r.err, r.end, r.trailer, r.text, want)
		}
	}
}

// shortAnswers has model answer n short requests (two tokens each), on
// connections of their own (the streams' may be the old server's, after
// a reload): new requests, while the streams drain.
func shortAnswers(t *testing.T, g *Gateway, tok, model string, n int) {
	t.Helper()
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		TLSClientConfig: g.Client.Transport.(*http.Transport).TLSClientConfig.Clone()}}
	defer client.CloseIdleConnections()
	for i := range n {
		body := fmt.Sprintf(`{"model":%q,"max_tokens":2,"messages":[{"role":"user","content":"new %d"}]}`, model, i)
		req, _ := http.NewRequest("POST", g.Base+"/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var c chatCompletion
		readJSON(t, resp, &c)
	}
}

// TestDrainThroughConsul: a replica deregistered, then one put in
// maintenance, while each serves streams: the streams end whole on it,
// and new requests go to the others only.
func TestDrainThroughConsul(t *testing.T) {
	agent := startConsul(t)
	args := []string{"-tokens", "100", "-itl", "30ms", "-seed", "4"} // 3 s streams
	q1, q2 := startSim(t, args...), startSim(t, args...)
	clean := startSim(t, "-tokens", "100", "-seed", "4")
	agent.Register(t, consultest.Instance("llm-qwen", "q1", q1.Port(t), nil))
	agent.Register(t, consultest.Instance("llm-qwen", "q2", q2.Port(t), nil))
	g := startGateway(t, GatewayConfig{
		Options: "\t\tconsul " + agent.Addr,
		Models: map[string]string{
			"qwen":  "\t\t\tconsul_service llm-qwen\n\t\t\tlb_policy round_robin",
			"clean": staticModel(clean),
		},
	})
	tok := g.Token(t, "demo", "demo", "")
	g.waitReplicas(t, "qwen", 2, 10*time.Second)

	for _, step := range []struct {
		name    string
		leaving *Sim
		leave   func()
	}{
		{"deregistered", q1, func() { agent.Deregister(t, "q1") }},
		{"maintenance", q2, func() {
			if err := agent.Client(t).Agent().EnableServiceMaintenance("q2", "drain"); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		wait := drainStreams(t, g, tok, "qwen", step.name, 6)
		inFlight := step.leaving.Stats(t).InFlight
		if inFlight == 0 {
			t.Fatalf("%s: no stream in flight on the replica about to leave", step.name)
		}
		before := step.leaving.Stats(t)
		step.leave()
		g.waitReplicas(t, "qwen", 1, 5*time.Second)
		shortAnswers(t, g, tok, "qwen", 5)
		checkDrained(t, g, tok, step.name, wait())
		after := step.leaving.Stats(t)
		if after.Requests != before.Requests || after.Completed != before.Completed+inFlight || after.Cancelled != before.Cancelled {
			t.Errorf("%s: the leaving replica went from %+v to %+v; want no new request and its %d streams completed",
				step.name, before, after, inFlight)
		}
		if step.name == "deregistered" { // back for the next step
			agent.Register(t, consultest.Instance("llm-qwen", "q1", q1.Port(t), nil))
			g.waitReplicas(t, "qwen", 2, 5*time.Second)
		}
	}
}

// TestDrainStaticReload: a reload that removes a replica from the static
// list lets its streams end whole on it, and sends it nothing new.
func TestDrainStaticReload(t *testing.T) {
	args := []string{"-tokens", "100", "-itl", "30ms", "-seed", "4"}
	a, b := startSim(t, args...), startSim(t, args...)
	clean := startSim(t, "-tokens", "100", "-seed", "4")
	g := startGateway(t, GatewayConfig{Models: map[string]string{
		"qwen":  staticModel(a, b) + "\n\t\t\tlb_policy round_robin",
		"clean": staticModel(clean),
	}})
	tok := g.Token(t, "demo", "demo", "")
	wait := drainStreams(t, g, tok, "qwen", "reload", 6)
	inFlight := a.Stats(t).InFlight
	if inFlight == 0 {
		t.Fatal("no stream in flight on the replica about to leave")
	}
	before := a.Stats(t)
	g.Reload(t, func(c string) string { return strings.Replace(c, "static "+a.URL+" ", "static ", 1) })
	shortAnswers(t, g, tok, "qwen", 5)
	checkDrained(t, g, tok, "reload", wait())
	if after := a.Stats(t); after.Requests != before.Requests || after.Completed != before.Completed+inFlight {
		t.Errorf("the removed replica went from %+v to %+v; want no new request and its %d streams completed", before, after, inFlight)
	}
}
