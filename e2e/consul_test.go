package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/llmedge/llmedge/internal/consultest"
	"github.com/llmedge/llmedge/simulator"
)

// These tests run the real gateway against a real `consul agent -dev` on
// free loopback ports (internal/consultest; `make consul` builds it).

func startConsul(t *testing.T) *consultest.Agent {
	t.Helper()
	needBinaries(t)
	return consultest.Start(t)
}

// consulSim starts a simulator that registers itself in Consul as service
// with the given ID and an HTTP check on /health every second.
func consulSim(t *testing.T, agent *consultest.Agent, service, id string, extra ...string) *Sim {
	t.Helper()
	args := []string{"-consul-addr", agent.Addr, "-consul-service", service, "-consul-id", id, "-consul-check-interval", "1s"}
	return startSim(t, append(args, extra...)...)
}

// Term stops the simulator with SIGTERM, as an orchestrator would.
func (s *Sim) Term(t *testing.T) {
	t.Helper()
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(15 * time.Second):
		t.Fatal("llmsim did not stop on SIGTERM")
	}
}

func (s *Sim) Port(t *testing.T) int {
	t.Helper()
	_, p, err := net.SplitHostPort(strings.TrimPrefix(s.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.Atoi(p)
	return n
}

type readiness struct {
	Status string
	Detail []string
	Models map[string]struct {
		Ready          bool
		Replicas       int
		Source         string
		Synced         bool
		DiscoveryError string `json:"discovery_error"`
		Reason         string
	}
}

// Ready reads the operators' readiness report (the admin API's
// /llmedge/readyz: the public /readyz names no model).
func (g *Gateway) Ready(t *testing.T) (int, readiness) {
	t.Helper()
	resp, err := http.Get(g.Admin + "/llmedge/readyz")
	if err != nil {
		t.Fatal(err)
	}
	var r readiness
	readJSON(t, resp, &r)
	return resp.StatusCode, r
}

func (g *Gateway) replicas(t *testing.T, model string) int {
	t.Helper()
	_, r := g.Ready(t)
	return r.Models[model].Replicas
}

// waitReplicas waits until /readyz shows n replicas of model, and returns
// how long that took.
func (g *Gateway) waitReplicas(t *testing.T, model string, n int, timeout time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	var got int
	// Every 5 ms: the time it took is logged.
	if !pollEvery(timeout, 5*time.Millisecond, func() bool { got = g.replicas(t, model); return got == n }) {
		t.Fatalf("model %s: %d replicas after %s, want %d", model, got, timeout, n)
	}
	return time.Since(start)
}

// Reload loads cfg through the admin API (POST /load, adapted from the
// Caddyfile), as `caddy reload` does.
func (g *Gateway) ReloadConfig(t *testing.T, cfg GatewayConfig) {
	t.Helper()
	req, _ := http.NewRequest("POST", g.Admin+"/load", bytes.NewReader(g.caddyfile(t, cfg)))
	req.Header.Set("Content-Type", "text/caddyfile")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("reload: %s %s", resp.Status, body)
	}
	g.Client.CloseIdleConnections() // as Reload does
}

var watcherGoroutine = regexp.MustCompile(`(?m)^goroutine (\d+) \[[^\]]*\]:\n(?:.*\n)*?github\.com/llmedge/llmedge/discovery\.\(\*Watcher\)\.run\(`)

// watchers lists the IDs of the gateway's Consul watcher goroutines, from
// the admin API's goroutine dump.
func (g *Gateway) watchers(t *testing.T) []string {
	t.Helper()
	resp, err := http.Get(g.Admin + "/debug/pprof/goroutine?debug=2")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var ids []string
	for _, stack := range strings.Split(string(b), "\n\n") {
		if m := watcherGoroutine.FindStringSubmatch(stack + "\n"); m != nil {
			ids = append(ids, m[1])
		}
	}
	return ids
}

func (g *Gateway) waitWatchers(t *testing.T, n int) []string {
	t.Helper()
	var ids []string
	if !poll(10*time.Second, func() bool { ids = g.watchers(t); return len(ids) == n }) {
		t.Fatalf("%d consul watcher goroutines, want %d", len(ids), n)
	}
	return ids
}

// infer sends one non-streamed request and returns the status (0 and the
// error when the request could not be sent); safe in any goroutine.
func (g *Gateway) inferModel(ctx context.Context, token, model string) (int, string, error) {
	b, _ := json.Marshal(withModel(model))
	req, _ := http.NewRequestWithContext(ctx, "POST", g.Base+"/tasks/assistant_inference", bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := g.Client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), nil
}

// traffic sends requests from workers until stopped, recording failures.
// Each worker sends one request at a time.
type traffic struct {
	ok, failed atomic.Int64
	// answered counts each worker's answered requests.
	answered []atomic.Int64
	mu       sync.Mutex
	failures []string
	cancel   context.CancelFunc
	wg       sync.WaitGroup
}

func startTraffic(g *Gateway, token, model string, workers int) *traffic {
	ctx, cancel := context.WithCancel(context.Background())
	tr := &traffic{cancel: cancel, answered: make([]atomic.Int64, workers)}
	for i := 0; i < workers; i++ {
		tr.wg.Add(1)
		go func() {
			defer tr.wg.Done()
			for ctx.Err() == nil {
				status, body, err := g.inferModel(ctx, token, model)
				if ctx.Err() != nil {
					return
				}
				tr.answered[i].Add(1)
				if err == nil && status == 200 {
					tr.ok.Add(1)
					continue
				}
				tr.failed.Add(1)
				tr.mu.Lock()
				if len(tr.failures) < 10 {
					tr.failures = append(tr.failures, fmt.Sprintf("%d %v %s", status, err, body))
				}
				tr.mu.Unlock()
			}
		}()
	}
	return tr
}

// rounds waits until every worker has had n more requests answered. As
// each worker sends one request at a time, every request sent before the
// call has then been answered: with n = 1, nothing sent before is still
// on its way. It is the traffic's own clock, which a loaded machine slows
// as it slows the traffic.
func (tr *traffic) rounds(t *testing.T, n int64, timeout time.Duration) {
	t.Helper()
	since := make([]int64, len(tr.answered))
	for i := range tr.answered {
		since[i] = tr.answered[i].Load()
	}
	waitFor(t, timeout, func() bool {
		for i := range tr.answered {
			if tr.answered[i].Load() < since[i]+n {
				return false
			}
		}
		return true
	})
}

func (tr *traffic) stop(t *testing.T) (ok, failed int64) {
	t.Helper()
	tr.cancel()
	tr.wg.Wait()
	if tr.failed.Load() > 0 {
		t.Errorf("%d of %d requests failed, e.g.:\n%s", tr.failed.Load(), tr.ok.Load()+tr.failed.Load(), strings.Join(tr.failures, "\n"))
	}
	return tr.ok.Load(), tr.failed.Load()
}

func expectOK(t *testing.T, g *Gateway, token, model string, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		status, body, err := g.inferModel(context.Background(), token, model)
		if err != nil || status != 200 {
			t.Fatalf("request %d to %s: %d %v %s", i, model, status, err, body)
		}
	}
}

// expect503 checks the answer for a model without a healthy replica.
func expect503(t *testing.T, g *Gateway, token, model string) {
	t.Helper()
	resp := g.Infer(t, token, withModel(model))
	var e errorBody
	readJSON(t, resp, &e)
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" || !strings.Contains(e.detailText(), "'"+model+"'") {
		t.Fatalf("model %s without replicas: %s Retry-After=%q detail=%s", model, resp.Status, resp.Header.Get("Retry-After"), e.Detail)
	}
}

// Registrations (by the simulator itself and through the API) reach the
// gateway within 1 s, with their Meta; a failing check removes a replica
// within its interval + 1 s; deregistration (API, or the simulator's
// SIGTERM) removes it; a model without a healthy replica answers 503.
func TestConsulDiscovery(t *testing.T) {
	agent := startConsul(t)
	q1 := consulSim(t, agent, "llm-qwen", "q1", "-consul-meta", "model=Qwen/Qwen2.5-7B-Instruct,protocol=openai")
	g := startGateway(t, GatewayConfig{
		Options: "\t\tconsul " + agent.Addr,
		Models: map[string]string{
			// Spread by turns: the test is about discovery, and the same
			// prompt would otherwise follow its prefix to one replica.
			"qwen":  "\t\t\tconsul_service llm-qwen\n\t\t\tupstream_model default-name\n\t\t\tlb_policy round_robin",
			"gemma": "\t\t\tconsul_service llm-gemma",
		},
	})
	token := g.Token(t, "demo", "demo", "")
	g.waitReplicas(t, "qwen", 1, 10*time.Second)

	status, ready := g.Ready(t)
	qs, gs := ready.Models["qwen"], ready.Models["gemma"]
	// gemma, not required, does not make the instance unready.
	if status != 200 || ready.Status != "degraded" || !qs.Ready || !qs.Synced || qs.Source != "consul" || gs.Ready || !gs.Synced || gs.Replicas != 0 ||
		gs.Reason != "no replicas" || len(ready.Detail) != 0 {
		t.Fatalf("readyz: %d %+v", status, ready)
	}
	expect503(t, g, token, "gemma")

	expectOK(t, g, token, "qwen", 3)
	if st := q1.Stats(t); st.Requests != 3 || st.LastRequest.Model != "Qwen/Qwen2.5-7B-Instruct" {
		t.Fatalf("q1 got %d requests for model %q; want 3 for the Meta model", st.Requests, st.LastRequest.Model)
	}

	// A registration through the API reaches the pool within 1 s.
	q2 := startSim(t)
	start := time.Now()
	agent.Register(t, consultest.Instance("llm-qwen", "q2", q2.Port(t), nil))
	took := g.waitReplicas(t, "qwen", 2, time.Second)
	t.Logf("registration -> gateway pool: %s (API call included: %s)", took, time.Since(start))
	expectOK(t, g, token, "qwen", 10)
	if st := q2.Stats(t); st.Requests == 0 || st.LastRequest.Model != "default-name" {
		t.Fatalf("q2: %d requests, model %q; want traffic with the model's upstream_model", st.Requests, st.LastRequest.Model)
	}

	// A failing check takes q1 out within its interval (1 s) + 1 s; its
	// chat still works, so any request it got would succeed: the request
	// counts show that it gets none.
	q1.Configure(t, map[string]any{"health_status": 503})
	took = g.waitReplicas(t, "qwen", 1, 2*time.Second)
	t.Logf("check failing -> out of the pool: %s (check interval 1s)", took)
	before := q1.Stats(t).Requests
	expectOK(t, g, token, "qwen", 10)
	if after := q1.Stats(t).Requests; after != before {
		t.Fatalf("q1 got %d requests after its check failed", after-before)
	}
	q1.Configure(t, map[string]any{"health_status": 0})
	g.waitReplicas(t, "qwen", 2, 3*time.Second)

	// Deregistration through the API.
	agent.Deregister(t, "q2")
	took = g.waitReplicas(t, "qwen", 1, time.Second)
	t.Logf("deregistration -> out of the pool: %s", took)
	before = q2.Stats(t).Requests
	expectOK(t, g, token, "qwen", 5)
	if after := q2.Stats(t).Requests; after != before {
		t.Fatalf("q2 got %d requests after its deregistration", after-before)
	}

	// The simulator deregisters itself on SIGTERM; then qwen has no
	// replica left and answers 503.
	q1.Term(t)
	g.waitReplicas(t, "qwen", 0, 2*time.Second)
	expect503(t, g, token, "qwen")
	if status, ready := g.Ready(t); status != 200 || ready.Models["qwen"].Ready || ready.Models["qwen"].Reason != "no replicas" {
		t.Fatalf("readyz after the last replica left: %d %+v", status, ready)
	}
}

// With Consul gone, requests keep flowing to the last-known-good set and
// /readyz reports the error; once Consul is back (a dev agent comes back
// empty), new registrations are seen.
func TestConsulOutageKeepsLastKnownGood(t *testing.T) {
	agent := startConsul(t)
	s1, s2 := startSim(t), startSim(t)
	agent.Register(t, consultest.Instance("llm-qwen", "s1", s1.Port(t), nil))
	agent.Register(t, consultest.Instance("llm-qwen", "s2", s2.Port(t), nil))
	g := startGateway(t, GatewayConfig{
		Options: "\t\tconsul " + agent.Addr,
		Models:  map[string]string{"qwen": "\t\t\tconsul_service llm-qwen\n\t\t\tlb_policy round_robin"},
	})
	token := g.Token(t, "demo", "demo", "")
	g.waitReplicas(t, "qwen", 2, 10*time.Second)

	agent.Kill()
	waitFor(t, 15*time.Second, func() bool {
		_, r := g.Ready(t)
		return r.Models["qwen"].DiscoveryError != ""
	})
	tr := startTraffic(g, token, "qwen", 4)
	// Requests keep going through: at least 10, to both replicas.
	poll(30*time.Second, func() bool {
		return tr.ok.Load() >= 10 && s1.Stats(t).Requests > 0 && s2.Stats(t).Requests > 0
	})
	if ok, _ := tr.stop(t); ok < 10 {
		t.Fatalf("only %d requests went through during the outage", ok)
	}
	status, ready := g.Ready(t)
	if qs := ready.Models["qwen"]; status != 200 || !qs.Ready || qs.Replicas != 2 || !qs.Synced || qs.DiscoveryError == "" {
		t.Fatalf("readyz during the outage: %d %+v", status, ready)
	}
	if s1.Stats(t).Requests == 0 || s2.Stats(t).Requests == 0 {
		t.Fatalf("traffic did not reach both last-known-good replicas: %d, %d", s1.Stats(t).Requests, s2.Stats(t).Requests)
	}

	agent.Restart(t)
	s3 := startSim(t)
	agent.Register(t, consultest.Instance("llm-qwen", "s3", s3.Port(t), nil))
	waitFor(t, 20*time.Second, func() bool {
		_, r := g.Ready(t)
		qs := r.Models["qwen"]
		return qs.Replicas == 1 && qs.DiscoveryError == ""
	})
	b1, b2 := s1.Stats(t).Requests, s2.Stats(t).Requests
	expectOK(t, g, token, "qwen", 10)
	if s3.Stats(t).Requests != 10 || s1.Stats(t).Requests != b1 || s2.Stats(t).Requests != b2 {
		t.Fatalf("after Consul came back: s3 got %d of 10 requests (s1 +%d, s2 +%d)",
			s3.Stats(t).Requests, s1.Stats(t).Requests-b1, s2.Stats(t).Requests-b2)
	}
}

// localSim is an in-process simulated replica, so that 200 of them cost
// a listener each rather than a process each.
type localSim struct {
	id   string
	port int
	sim  *simulator.Server
}

func startLocalSims(t *testing.T, n int) []*localSim {
	t.Helper()
	var out []*localSim
	for i := 0; i < n; i++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		s := &localSim{id: fmt.Sprintf("r%03d", i), port: ln.Addr().(*net.TCPAddr).Port, sim: simulator.New(simulator.Config{Tokens: 4})}
		srv := &http.Server{Handler: s.sim, ReadHeaderTimeout: 10 * time.Second}
		go srv.Serve(ln)
		t.Cleanup(func() { srv.Close() })
		out = append(out, s)
	}
	return out
}

// 200 replicas register and leave while traffic flows. Leaving is
// deregistration (the replica keeps serving, as a draining replica does),
// so every replica a request can be sent to is healthy: no request may
// fail. And once a replica has left, it must get no more traffic.
func TestConsulChurn200Replicas(t *testing.T) {
	agent := startConsul(t)
	sims := startLocalSims(t, 200)
	const live = 20
	for _, s := range sims[:live] {
		agent.Register(t, consultest.Instance("llm-churn", s.id, s.port, nil))
	}
	g := startGateway(t, GatewayConfig{
		Options: "\t\tconsul " + agent.Addr,
		Models:  map[string]string{"qwen": "\t\t\tconsul_service llm-churn\n\t\t\tlb_policy round_robin"},
	})
	token := g.Token(t, "demo", "demo", "")
	g.waitReplicas(t, "qwen", live, 10*time.Second)

	const workers = 6
	tr := startTraffic(g, token, "qwen", workers)
	start := time.Now()
	for i := live; i < len(sims); i++ {
		agent.Register(t, consultest.Instance("llm-churn", sims[i].id, sims[i].port, nil))
		agent.Deregister(t, sims[i-live].id)
		// The pace of the churn, under test: a change every 25 ms.
		time.Sleep(25 * time.Millisecond)
	}
	churn := time.Since(start)
	// The pool is the last 20 registered (its size alone says nothing:
	// it was 20 or 21 all along the churn).
	want := make([]string, 0, live)
	for _, s := range sims[len(sims)-live:] {
		want = append(want, fmt.Sprintf("http://127.0.0.1:%d", s.port))
	}
	sort.Strings(want)
	var pool []string
	if !poll(10*time.Second, func() bool {
		pool = pool[:0]
		for _, r := range g.status(t, "qwen").Replicas {
			pool = append(pool, r.URL)
		}
		sort.Strings(pool)
		return slices.Equal(pool, want)
	}) {
		t.Fatalf("the pool after the churn is %v, want %v", pool, want)
	}
	// Every replica has left the pool; once the requests sent before are
	// answered, none of them may get another one, however many go out.
	tr.rounds(t, 1, 10*time.Second)
	left := sims[:len(sims)-live]
	counts := make([]int64, len(left))
	for i, s := range left {
		counts[i] = s.sim.Stats().Requests
	}
	const after = 30 // requests per worker
	tr.rounds(t, after, 30*time.Second)
	ok, _ := tr.stop(t)
	for i, s := range left {
		if n := s.sim.Stats().Requests; n != counts[i] {
			t.Errorf("replica %s got %d of %d requests sent after it left", s.id, n-counts[i], workers*after)
		}
	}
	served := 0
	for _, s := range sims {
		if s.sim.Stats().Requests > 0 {
			served++
		}
	}
	t.Logf("%d requests, none failed, during %s of churn (180 registrations, 180 deregistrations); %d of 200 replicas served traffic",
		ok, churn.Round(time.Millisecond), served)
	if served < 60 {
		t.Errorf("only %d of 200 replicas served traffic: the new registrations did not reach the pool in time", served)
	}
	for _, s := range sims[len(sims)-live:] {
		if s.sim.Stats().Requests == 0 {
			t.Errorf("replica %s, registered to the end, got no traffic", s.id)
		}
	}
}

// Config reloads: unchanged settings keep the running watcher (same
// goroutine: no gap, no duplicate); a changed service switches cleanly
// (no failed request while traffic flows); a config without Consul models
// leaves no watcher running; traffic never fails.
func TestConsulReload(t *testing.T) {
	agent := startConsul(t)
	a, b := startSim(t), startSim(t)
	agent.Register(t, consultest.Instance("llm-a", "a", a.Port(t), nil))
	agent.Register(t, consultest.Instance("llm-b", "b", b.Port(t), nil))
	cfgA := GatewayConfig{
		Options: "\t\tconsul " + agent.Addr,
		Models:  map[string]string{"qwen": "\t\t\tconsul_service llm-a"},
	}
	g := startGateway(t, cfgA)
	token := g.Token(t, "demo", "demo", "")
	g.waitReplicas(t, "qwen", 1, 10*time.Second)
	first := g.waitWatchers(t, 1)

	// Reloads close the old server's idle HTTP/1.1 connections, and a
	// request sent on one at that moment fails with EOF before the gateway
	// sees it: an inherent race of HTTP/1.1 keep-alive with any server
	// restart, unrelated to replicas. HTTP/2's GOAWAY tells the client which
	// requests were not processed, and Go retries those; so the traffic here
	// uses HTTP/2, and every request that reaches the gateway must succeed.
	tlsConf := g.Client.Transport.(*http.Transport).TLSClientConfig.Clone()
	g.Client = &http.Client{Transport: &http.Transport{TLSClientConfig: tlsConf, ForceAttemptHTTP2: true}}
	tr := startTraffic(g, token, "qwen", 3)
	g.ReloadConfig(t, cfgA) // a config equal in content is a no-op for Caddy...
	cfgA.Options += "\n\t\tping_interval 14s"
	g.ReloadConfig(t, cfgA) // ...so change something else: a real reload, same watch settings
	if ids := g.waitWatchers(t, 1); ids[0] != first[0] {
		t.Errorf("a reload with unchanged watch settings replaced the watcher (goroutine %s -> %s)", first[0], ids[0])
	}

	cfgB := GatewayConfig{Options: cfgA.Options, Models: map[string]string{"qwen": "\t\t\tconsul_service llm-b"}}
	g.ReloadConfig(t, cfgB)
	ids := g.waitWatchers(t, 1)
	if ids[0] == first[0] {
		t.Errorf("the watcher of llm-a still runs after the reload to llm-b")
	}
	// Once the requests sent before the switch are answered, every
	// request goes to llm-b.
	tr.rounds(t, 1, 10*time.Second)
	beforeA, beforeB := a.Stats(t).Requests, b.Stats(t).Requests
	tr.rounds(t, 10, 30*time.Second)
	if da, db := a.Stats(t).Requests-beforeA, b.Stats(t).Requests-beforeB; da != 0 || db == 0 {
		t.Errorf("after switching qwen to llm-b: llm-a got %d requests, llm-b %d", da, db)
	}

	g.ReloadConfig(t, GatewayConfig{Options: "", Models: map[string]string{"qwen": staticModel(b)}})
	g.waitWatchers(t, 0)
	ok, _ := tr.stop(t)
	t.Logf("%d requests through 4 reloads, none failed", ok)
	if status, ready := g.Ready(t); status != 200 || ready.Models["qwen"].Source != "static" {
		t.Errorf("readyz after the reload to a static list: %d %+v", status, ready)
	}
}

// The `consul` dynamic upstream source sends a stock reverse_proxy route
// to a Consul service, sharing the model's watcher. Consul is found
// through CONSUL_HTTP_ADDR, as every Consul tool finds it.
func TestConsulUpstreamSource(t *testing.T) {
	agent := startConsul(t)
	s1 := startSim(t, "-model", "first")
	agent.Register(t, consultest.Instance("llm-raw", "raw1", s1.Port(t), nil))
	t.Setenv("CONSUL_HTTP_ADDR", agent.Addr) // inherited by the gateway; no consul option
	g := startGateway(t, GatewayConfig{
		Models: map[string]string{"qwen": "\t\t\tconsul_service llm-raw"},
		Site:   "route /raw/* {\n\t\turi strip_prefix /raw\n\t\treverse_proxy {\n\t\t\tdynamic consul llm-raw\n\t\t}\n\t}\n\tllm_gateway",
	})
	g.waitReplicas(t, "qwen", 1, 10*time.Second)
	models := func() (int, string) {
		resp, err := g.Client.Get(g.Base + "/raw/v1/models")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var list struct{ Data []struct{ ID string } }
		b, _ := io.ReadAll(resp.Body)
		_ = json.Unmarshal(b, &list)
		if len(list.Data) == 1 {
			return resp.StatusCode, list.Data[0].ID
		}
		return resp.StatusCode, ""
	}
	if status, id := models(); status != 200 || id != "first" {
		t.Fatalf("GET /raw/v1/models: %d %q", status, id)
	}
	if n := len(g.watchers(t)); n != 1 {
		t.Errorf("%d watchers for one service used by a model and a route, want 1 (shared)", n)
	}

	agent.Deregister(t, "raw1")
	waitFor(t, 2*time.Second, func() bool { status, _ := models(); return status == 503 })
	s2 := startSim(t, "-model", "second")
	agent.Register(t, consultest.Instance("llm-raw", "raw2", s2.Port(t), nil))
	waitFor(t, 2*time.Second, func() bool { status, id := models(); return status == 200 && id == "second" })
}

// A gateway that starts while Consul is down serves (after sync_timeout),
// reports the model as not synced and answers 503 for it; once Consul
// answers, the model becomes ready.
func TestConsulNotSyncedAtStart(t *testing.T) {
	agent := startConsul(t)
	agent.Kill()
	start := time.Now()
	g := startGateway(t, GatewayConfig{
		Options: "\t\tconsul " + agent.Addr + " {\n\t\t\tsync_timeout 1s\n\t\t}",
		Models:  map[string]string{"qwen": "\t\t\tconsul_service llm-qwen\n\t\t\trequired"},
	})
	t.Logf("gateway serving %s after start, with Consul down", time.Since(start).Round(time.Millisecond))
	token := g.Token(t, "demo", "demo", "")
	status, ready := g.Ready(t)
	qs := ready.Models["qwen"]
	if status != 503 || qs.Ready || qs.Synced || qs.Source != "consul" || qs.DiscoveryError == "" ||
		!strings.HasPrefix(qs.Reason, "discovery has not synced") {
		t.Fatalf("readyz with Consul down from the start: %d %+v", status, ready)
	}
	if c, b := getBody(t, g.Client, g.Base+"/readyz"); c != 503 || b != `{"status":"not ready"}`+"\n" {
		t.Fatalf("public /readyz with its required model unsynced: %d %s", c, b)
	}
	expect503(t, g, token, "qwen")

	agent.Restart(t)
	s := startSim(t)
	agent.Register(t, consultest.Instance("llm-qwen", "s", s.Port(t), nil))
	waitFor(t, 20*time.Second, func() bool {
		status, r := g.Ready(t)
		return status == 200 && r.Models["qwen"].Synced && r.Models["qwen"].Replicas == 1
	})
	expectOK(t, g, token, "qwen", 3)
}
