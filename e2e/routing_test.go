package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// accessLog reads the inference entries of a JSON access log, by request ID.
func accessLog(t *testing.T, file string) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	b, _ := os.ReadFile(file)
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var e map[string]any
		if json.Unmarshal([]byte(line), &e) == nil {
			// By the X-Request-ID the test sent (the gateway's own
			// request_id is another).
			if id, ok := e["client_request_id"].(string); ok {
				out[id] = e
			} else if id, ok := e["request_id"].(string); ok {
				out[id] = e
			}
		}
	}
	return out
}

// turnBody is turn n of conversation c of tenant: the tenant's long system
// prompt, then the whole history, as chat clients resend it.
func turnBody(tenant, c, n int) map[string]any {
	msgs := []map[string]string{{"role": "system", "content": fmt.Sprintf("You work for tenant %d. ", tenant) + strings.Repeat("Answer carefully and cite your sources. ", 40)}}
	for i := 1; i <= n; i++ {
		msgs = append(msgs, map[string]string{"role": "user", "content": fmt.Sprintf("Conversation %d, question %d: %s", c, i, strings.Repeat("tell me more about it ", 10))})
		if i < n {
			msgs = append(msgs, map[string]string{"role": "assistant", "content": strings.Repeat("here is more about it ", 10)})
		}
	}
	return map[string]any{"messages": msgs, "model_type": "qwen"}
}

// ask sends body with the request ID id and fails the test on an error.
func (g *Gateway) ask(t *testing.T, tok, id string, body any) {
	t.Helper()
	if err := g.askErr(tok, id, body); err != nil {
		t.Fatal(err)
	}
}

// askErr is ask for goroutines: it returns the error.
func (g *Gateway) askErr(tok, id string, body any) error {
	j, _ := json.Marshal(body)
	req, _ := http.NewRequest("POST", g.Base+"/tasks/assistant_inference", bytes.NewReader(j))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("X-Request-ID", id)
	resp, err := g.Client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		return fmt.Errorf("%s: %s %s", id, resp.Status, b)
	}
	return nil
}

// Prefix-aware routing against replicas found in a real Consul agent:
// each conversation's turns land where its history is (and the replica's
// own prefix cache confirms the hits); a reload keeps what the gateway
// learned; a replica whose engine reports a long queue is avoided; and a
// replica whose metrics die or turn to garbage falls back to the
// gateway's in-flight count, logged and counted, without failing a request.
func TestPrefixRoutingOverConsul(t *testing.T) {
	agent := startConsul(t)
	simArgs := []string{"-tokens", "4", "-prefill-per-token", "20us", "-max-num-seqs", "4"}
	var sims []*Sim
	for i := range 3 {
		sims = append(sims, consulSim(t, agent, "llm-qwen", fmt.Sprintf("q%d", i), simArgs...))
	}
	bySimURL := map[string]*Sim{}
	for _, s := range sims {
		bySimURL[s.URL] = s
	}
	logFile := filepath.Join(t.TempDir(), "access.log")
	cfg := GatewayConfig{
		Options: "\t\tconsul " + agent.Addr,
		Models: map[string]string{
			"qwen":  "\t\t\tconsul_service llm-qwen\n\t\t\tprotocol vllm\n\t\t\tload_metrics {\n\t\t\t\tinterval 200ms\n\t\t\t}",
			"gemma": staticModel(sims[0]),
		},
		Site: "log {\n\t\toutput file " + logFile + "\n\t\tformat json\n\t}\n\tllm_gateway",
	}
	g := startGateway(t, cfg)
	g.waitReplicas(t, "qwen", 3, 20*time.Second)
	tok := g.Token(t, "demo", "demo", "")

	// Six conversations of three tenants, four turns each. The first
	// turns arrive together, so the prefill queued at each replica spreads
	// them; the later turns, one at a time, must each find its history.
	const convs, turns = 6, 4
	var first sync.WaitGroup
	for c := range convs {
		first.Add(1)
		go func() {
			defer first.Done()
			if err := g.askErr(tok, fmt.Sprintf("c%d-t1", c), turnBody(c%3, c, 1)); err != nil {
				t.Error(err)
			}
		}()
	}
	first.Wait()
	for n := 2; n <= turns; n++ {
		for c := range convs {
			g.ask(t, tok, fmt.Sprintf("c%d-t%d", c, n), turnBody(c%3, c, n))
		}
	}
	var log map[string]map[string]any
	waitFor(t, 5*time.Second, func() bool { log = accessLog(t, logFile); return len(log) >= convs*turns })
	home := map[int]string{}
	for c := range convs {
		first := log[fmt.Sprintf("c%d-t1", c)]
		home[c], _ = first["replica"].(string)
		for n := 2; n <= turns; n++ {
			e := log[fmt.Sprintf("c%d-t%d", c, n)]
			if e["replica"] != home[c] || e["lb_reason"] != "prefix" || e["lb_policy"] != "prefix_cache" {
				t.Errorf("conversation %d turn %d: replica %v (%v), its history is on %s", c, n, e["replica"], e["lb_reason"], home[c])
			}
			if cached, _ := e["predicted_cached"].(float64); cached < 0.5 {
				t.Errorf("conversation %d turn %d: predicted cached share %v", c, n, cached)
			}
		}
	}
	spread := map[string]bool{}
	for _, r := range home {
		spread[r] = true
	}
	if len(spread) < 2 {
		t.Errorf("six conversations arriving together all went to one replica: %v", home)
	}
	var queries, hits int
	for _, s := range sims {
		st := s.engineStats(t)
		queries, hits = queries+st.PrefixCacheQueries, hits+st.PrefixCacheHits
	}
	if queries == 0 || float64(hits)/float64(queries) < 0.6 {
		t.Errorf("the replicas' own prefix caches hit %d of %d prompt tokens", hits, queries)
	}
	m := g.scrape(t)
	if v := metricValue(t, m, `llmedge_prefix_predicted_hit_ratio{model_type="qwen"}`); v < 0.5 {
		t.Errorf("predicted hit ratio %v", v)
	}
	if v := metricValue(t, m, `llmedge_routing_decisions_total{model_type="qwen",reason="prefix"}`); v < float64(convs*(turns-1)) {
		t.Errorf("prefix decisions counted: %v", v)
	}

	// A reload keeps the index: the next turn still finds its history.
	g.Reload(t, func(s string) string { return s })
	g.waitReplicas(t, "qwen", 3, 20*time.Second)
	for c := range convs {
		g.ask(t, tok, fmt.Sprintf("c%d-t%d", c, turns+1), turnBody(c%3, c, turns+1))
	}
	waitFor(t, 5*time.Second, func() bool { log = accessLog(t, logFile); return len(log) >= convs*(turns+1) })
	for c := range convs {
		e := log[fmt.Sprintf("c%d-t%d", c, turns+1)]
		if cached, _ := e["predicted_cached"].(float64); e["replica"] != home[c] || cached < 0.5 {
			t.Errorf("after the reload, conversation %d went to %v predicting %v cached", c, e["replica"], e["predicted_cached"])
		}
	}

	// Another client keeps conversation 0's replica busy: 4 running, 8
	// waiting in its engine's own queue. The gateway sees it in the
	// engine's metrics and sends the next turn elsewhere.
	busy := bySimURL[home[0]]
	busy.Configure(t, map[string]any{"itl": "200ms", "tokens": 20})
	var wg sync.WaitGroup
	for range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := http.Post(busy.URL+"/v1/chat/completions", "application/json",
				strings.NewReader(`{"messages":[{"role":"user","content":"hold on"}]}`))
			if err == nil {
				resp.Body.Close()
			}
		}()
	}
	waitFor(t, 5*time.Second, func() bool {
		return metricValue(t, g.scrape(t), `llmedge_replica_engine_requests{model_type="qwen",replica="`+busy.URL+`",state="waiting"}`) >= 4
	})
	g.ask(t, tok, "c0-busy", turnBody(0, 0, turns+2))
	log = accessLog(t, logFile)
	if e := log["c0-busy"]; e["replica"] == busy.URL {
		t.Errorf("the turn went to the replica whose engine reports a long queue: %v", e)
	}
	wg.Wait()
	busy.Configure(t, map[string]any{"itl": "0s", "tokens": 4})

	// Its metrics turn to garbage: its figure is dropped (logged, counted),
	// and requests keep being served on in-flight counts.
	errsBefore := metricValue(t, g.scrape(t), `llmedge_load_scrape_errors_total{model_type="qwen"}`)
	busy.Configure(t, map[string]any{"metrics_fault": "garbage"})
	// The replica serves gemma too: the line that says so for qwen.
	waitFor(t, 5*time.Second, func() bool {
		return g.logLine(`"replica load metrics unusable`, `"model_type":"qwen"`, `"replica":"`+busy.URL+`"`)
	})
	m = g.scrape(t)
	if v := metricValue(t, m, `llmedge_replica_load_age_seconds{model_type="qwen",replica="`+busy.URL+`"}`); v >= 0 {
		t.Errorf("a replica with garbage metrics still has a load figure (age %v)", v)
	}
	if v := metricValue(t, m, `llmedge_load_scrape_errors_total{model_type="qwen"}`); v <= errsBefore {
		t.Errorf("scrape errors not counted: %v -> %v", errsBefore, v)
	}
	for c := range convs {
		g.ask(t, tok, fmt.Sprintf("c%d-garbage", c), turnBody(c%3, c, turns+3))
	}
	busy.Configure(t, map[string]any{"metrics_fault": "hang"})
	g.ask(t, tok, "c0-hang", turnBody(0, 0, turns+4))
	busy.Configure(t, map[string]any{"metrics_fault": ""})
	waitFor(t, 5*time.Second, func() bool {
		return g.logLine("replica load metrics readable again", `"model_type":"qwen"`, `"replica":"`+busy.URL+`"`)
	})
}

// engineStats reads the simulator's engine counters.
type engineStats struct {
	PrefixCacheQueries int `json:"prefix_cache_queries"`
	PrefixCacheHits    int `json:"prefix_cache_hits"`
	Running            int `json:"running"`
	Waiting            int `json:"waiting"`
}

func (s *Sim) engineStats(t *testing.T) engineStats {
	t.Helper()
	resp, err := http.Get(s.URL + "/sim/stats")
	if err != nil {
		t.Fatal(err)
	}
	var st engineStats
	readJSON(t, resp, &st)
	return st
}
