package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/llmedge/llmedge/internal/redistest"
)

// These tests hold the tenant boundary's cache and engine-control items
// (docs/tenant-boundary.md) with real processes: gateways on one Redis,
// simulated vLLM replicas that record what they receive.

// post sends body to path of g with the credential tok (as x-api-key on
// Anthropic's paths) and returns the status, the body and Llmedge-Route.
func post(t *testing.T, g *Gateway, path, tok, body string) (int, string, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", g.Base+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if strings.HasPrefix(path, "/v1/messages") {
		req.Header.Set("X-Api-Key", tok)
		req.Header.Set("Anthropic-Version", "2023-06-01")
	} else {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := g.Client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header.Get("Llmedge-Route")
}

var cachedRe = regexp.MustCompile(`cached=([0-9.]+)`)

// cachedOf is the cached share Llmedge-Route tells.
func cachedOf(t *testing.T, route string) float64 {
	t.Helper()
	m := cachedRe.FindStringSubmatch(route)
	if m == nil {
		t.Fatalf("Llmedge-Route %q tells no cached share", route)
	}
	v, _ := strconv.ParseFloat(m[1], 64)
	return v
}

// received is the one request the sims received since their reset: which
// sim, and its body.
func received(t *testing.T, sims []*Sim) (int, captured) {
	t.Helper()
	at, n := -1, 0
	var got captured
	for i, s := range sims {
		for _, r := range s.requests(t) {
			at, got = i, r
			n++
		}
	}
	if n != 1 {
		t.Fatalf("the replicas received %d requests, want 1", n)
	}
	for _, s := range sims {
		s.reset(t)
	}
	return at, got
}

// saltOf is the cache_salt of a body, "" when none.
func saltOf(t *testing.T, body []byte) string {
	t.Helper()
	var v struct {
		CacheSalt string `json:"cache_salt"`
	}
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatalf("%s: %v", body, err)
	}
	return v.CacheSalt
}

// TestCachePartitionedByTenant: two gateways on one Redis (sharing their
// routing) in front of four vLLM replicas. Tenant A (alice) sends a
// confidential prompt; tenants B and C guessing it word for word, on
// either gateway, are told nothing is cached (before partitions: 1.00),
// while A's next turn, on the other gateway, goes back to the replica that
// holds its history, predicted cached. Every replica request carries the
// gateway's cache_salt for its tenant (the same on both gateways, another
// for each tenant), never the client's.
func TestCachePartitionedByTenant(t *testing.T) {
	srv := redistest.Start(t)
	var sims []*Sim
	for range 4 {
		sims = append(sims, startSim(t, "-tokens", "4", "-prompt-tokens-details"))
	}
	data := t.TempDir() // one storage: the tokens and the cache secret are the same on both
	cfg := GatewayConfig{Data: data, Options: redisOption(srv, "\t\tuser carol "+demoHash),
		Models: map[string]string{"qwen": staticModel(sims...) + "\n\t\t\tprotocol vllm"}}
	a := startGateway(t, cfg)
	b := startGateway(t, cfg)
	alice, demo, carol := a.Token(t, "alice", "demo", ""), a.Token(t, "demo", "demo", ""), a.Token(t, "carol", "demo", "")

	secret := "You are the clinic's assistant. Patient record 4411: Jane Roe, born 1961, diagnosis: " +
		strings.Repeat("early-onset condition under review, treatment plan confidential. ", 8)
	turn1 := []map[string]string{{"role": "system", "content": secret}, {"role": "user", "content": "Summarise the record."}}
	body := func(msgs []map[string]string) string {
		j, _ := json.Marshal(map[string]any{"model": "qwen", "messages": msgs, "cache_salt": "guess"})
		return string(j)
	}
	ask := func(g *Gateway, tok string, msgs []map[string]string) (float64, int, string) {
		t.Helper()
		status, resp, route := post(t, g, "/v1/chat/completions", tok, body(msgs))
		if status != 200 {
			t.Fatalf("%d %s", status, resp)
		}
		at, req := received(t, sims)
		if strings.Contains(string(req.Body), "guess") {
			t.Errorf("the client's cache_salt reached the replica: %s", req.Body)
		}
		return cachedOf(t, route), at, saltOf(t, req.Body)
	}

	_, home, saltA := ask(a, alice, turn1)
	if len(saltA) != 43 {
		t.Errorf("tenant A's salt %q: want 43 characters (256 bits)", saltA)
	}
	waitFor(t, 10*time.Second, func() bool { return applied(t, b) >= 1 }) // b has learned A's decision

	// Tenants B (demo) and C (carol) guess A's prompt exactly, one on each
	// gateway (a tenant's second guess would find its own first one).
	salts := map[string]bool{saltA: true}
	for i, tc := range []struct {
		g   *Gateway
		tok string
	}{{a, demo}, {b, carol}} {
		cached, _, salt := ask(tc.g, tc.tok, turn1)
		if cached != 0 {
			t.Errorf("gateway %d: another tenant guessing tenant A's prompt is told cached=%.2f, want 0.00", i, cached)
		}
		if salt == "" || salts[salt] {
			t.Errorf("gateway %d: another tenant's salt %q is not its own", i, salt)
		}
		salts[salt] = true
	}

	// A's next turn, on the other gateway: home, predicted cached, salted alike.
	turn2 := append(turn1, map[string]string{"role": "assistant", "content": "Jane Roe's record says the condition is under review."},
		map[string]string{"role": "user", "content": "And the treatment plan?"})
	cached, at, salt2 := ask(b, alice, turn2)
	if at != home || cached <= 0 {
		t.Errorf("tenant A's second turn went to replica %d (its history is on %d), cached=%.2f", at, home, cached)
	}
	if salt2 != saltA {
		t.Errorf("tenant A's salt differs between the gateways: %q and %q", saltA, salt2)
	}
	t.Logf("tenant A's second turn: cached=%.2f on its home replica", cached)
}

// TestEngineControlMembers: a sheddable client's "priority" reaches no
// engine on any door (the class's does, with engine_priority; none
// without), translated requests included; kv_transfer_params is refused
// with a 400 in the door's shape naming it, and reaches the engine as
// written where the operator allows it.
func TestEngineControlMembers(t *testing.T) {
	qwen, plain, pd, trans := startSim(t, "-tokens", "3"), startSim(t, "-tokens", "3"), startSim(t, "-tokens", "3"), startSim(t, "-tokens", "3")
	g := startGateway(t, GatewayConfig{
		Options: "\t\tuser batch " + demoHash + " {\n\t\t\tpriority sheddable\n\t\t}",
		Models: map[string]string{
			"qwen":  staticModel(qwen) + "\n\t\t\tprotocol vllm\n\t\t\tengine_priority on",
			"plain": staticModel(plain),
			"pd":    staticModel(pd) + "\n\t\t\tallow_members kv_transfer_params",
			"trans": staticModel(trans) + "\n\t\t\tanthropic translate\n\t\t\tengine_priority on",
		},
	})
	batch := g.Token(t, "batch", "demo", "")
	const hi = `"messages":[{"role":"user","content":"hi"}]`
	bodies := map[string]string{
		"/v1/chat/completions":      `{"model":%q,` + hi + `,"priority":-1000000}`,
		"/v1/completions":           `{"model":%q,"prompt":"hi","priority":-1000000}`,
		"/v1/embeddings":            `{"model":%q,"input":"hi","priority":-1000000}`,
		"/v1/responses":             `{"model":%q,"input":"hi","priority":-1000000}`,
		"/v1/messages":              `{"model":%q,"max_tokens":8,` + hi + `,"priority":-1000000}`,
		"/v1/messages/count_tokens": `{"model":%q,` + hi + `,"priority":-1000000}`,
	}
	for path, tmpl := range bodies {
		for _, tc := range []struct {
			model string
			sim   *Sim
			want  string // the priority the engine gets, "" none
		}{{"qwen", qwen, `"priority":1`}, {"plain", plain, ""}} {
			status, resp, _ := post(t, g, path, batch, fmt.Sprintf(tmpl, tc.model))
			if status != 200 {
				t.Fatalf("%s %s: %d %s", path, tc.model, status, resp)
			}
			got := string(tc.sim.only(t).Body)
			tc.sim.reset(t)
			if strings.Contains(got, "-1000000") || (tc.want == "" && strings.Contains(got, "priority")) ||
				(tc.want != "" && (!strings.Contains(got, tc.want) || strings.Count(got, `"priority"`) != 1)) {
				t.Errorf("%s %s: the engine got %s, want priority %q", path, tc.model, got, tc.want)
			}
		}
	}
	// Anthropic's door translated to chat completions.
	if status, resp, _ := post(t, g, "/v1/messages", batch, fmt.Sprintf(bodies["/v1/messages"], "trans")); status != 200 {
		t.Fatalf("translated: %d %s", status, resp)
	}
	if r := trans.only(t); r.Path != "/v1/chat/completions" || strings.Contains(string(r.Body), "-1000000") || !strings.Contains(string(r.Body), `"priority":1`) {
		t.Errorf("translated: the engine got %s %s", r.Path, r.Body)
	}
	trans.reset(t)

	// kv_transfer_params: refused, in each door's shape, naming it.
	const kv = `"kv_transfer_params":{"remote_host":"10.9.9.9","remote_port":5557}`
	for _, tc := range []struct{ path, model, body string }{
		{"/v1/chat/completions", "qwen", `{"model":"qwen",` + hi + `,` + kv + `}`},
		{"/v1/responses", "qwen", `{"model":"qwen","input":"hi",` + kv + `}`},
		{"/v1/embeddings", "qwen", `{"model":"qwen","input":"hi",` + kv + `}`},
		{"/v1/messages", "qwen", `{"model":"qwen","max_tokens":8,` + hi + `,` + kv + `}`},
		{"/v1/messages", "trans", `{"model":"trans","max_tokens":8,` + hi + `,` + kv + `}`},
		{"/v1/chat/completions", "plain", `{"model":"plain",` + hi + `,"vllm_xargs":{"k":1}}`},
	} {
		status, resp, _ := post(t, g, tc.path, batch, tc.body)
		var shape struct {
			Type  string `json:"type"` // Anthropic's "error"
			Error struct {
				Message string `json:"message"`
				Param   string `json:"param"`
				Type    string `json:"type"`
			} `json:"error"`
		}
		_ = json.Unmarshal([]byte(resp), &shape)
		name := "kv_transfer_params"
		if tc.model == "plain" {
			name = "vllm_xargs"
		}
		anthropic := strings.HasPrefix(tc.path, "/v1/messages")
		if status != 400 || !strings.Contains(shape.Error.Message, name) ||
			(anthropic && (shape.Type != "error" || shape.Error.Type != "invalid_request_error")) ||
			(!anthropic && shape.Error.Param != name) {
			t.Errorf("%s %s: %d %s, want 400 naming %s", tc.path, tc.model, status, resp, name)
		}
	}
	for _, s := range []*Sim{qwen, plain, trans} {
		if n := len(s.requests(t)); n != 0 {
			t.Errorf("a refused request reached a replica (%d)", n)
		}
	}
	// Allowed on pd: as the client wrote it.
	if status, resp, _ := post(t, g, "/v1/chat/completions", batch, `{"model":"pd",`+hi+`,`+kv+`}`); status != 200 {
		t.Fatalf("allowed: %d %s", status, resp)
	}
	if got := string(pd.only(t).Body); !strings.Contains(got, kv) {
		t.Errorf("allowed kv_transfer_params: the engine got %s", got)
	}
}
