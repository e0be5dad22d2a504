package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llmedge/llmedge/internal/redistest"
)

// accountingBudget is every user's daily token budget in the accounting
// tests; puser has a tpm limit of the same size instead.
const accountingBudget = 3000

// accountingGateways starts two gateways on one Redis in front of one
// simulator (20-token replies, free prefill), with the users the
// accounting tests spend as: qwen lets a request ask for any number of
// generations (max_generations off: what the budget must hold against);
// gemma keeps the default cap of 16 and bounds prompts at 50,000 tokens.
func accountingGateways(t *testing.T) (a, b *Gateway, sim *Sim) {
	t.Helper()
	srv := redistest.Start(t)
	sim = startSim(t, "-tokens", "20", "-prefill-per-token", "0")
	var users strings.Builder
	for _, u := range []string{"nuser", "tuser", "buser", "cuser"} {
		users.WriteString("\t\tuser " + u + " " + demoHash + "\n")
	}
	users.WriteString("\t\tuser puser " + demoHash + " {\n\t\t\tlimits {\n\t\t\t\ttpm " + fmt.Sprint(accountingBudget) +
		"\n\t\t\t\tbudget tokens off per day\n\t\t\t}\n\t\t}\n")
	cfg := GatewayConfig{Data: t.TempDir(), // one storage: one signing key
		Models: map[string]string{
			"qwen":  staticModel(sim) + "\n\t\t\tmax_tokens 20\n\t\t\tmax_generations off",
			"gemma": staticModel(sim) + "\n\t\t\tmax_tokens 20\n\t\t\tmax_prompt_tokens 50000",
		},
		Options: patientRedisOption(srv, "\t\tlimits {\n\t\t\tbudget tokens "+fmt.Sprint(accountingBudget)+" per day\n\t\t}\n"+users.String()),
	}
	return startGateway(t, cfg), startGateway(t, cfg), sim
}

// postV1 sends body to an OpenAI path with a Bearer token; safe in a
// goroutine (errors are returned).
func postV1(g *Gateway, path, tok, body string) result {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", g.Base+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := g.Client.Do(req)
	if err != nil {
		return result{err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return result{status: resp.StatusCode, body: b, header: resp.Header, err: err}
}

// spend sends n copies of body at once, spread over gws, and returns the
// tokens the engine reported for the answers (what settlement charges)
// and the refusals' error codes and messages.
func spend(t *testing.T, gws []*Gateway, path, tok, body string, n int) (used, answered int, refused []string) {
	t.Helper()
	out := make([]result, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			out[i] = postV1(gws[i%len(gws)], path, tok, body)
		}()
	}
	close(start)
	wg.Wait()
	for _, r := range out {
		switch {
		case r.err != nil:
			t.Errorf("request failed: %v", r.err)
		case r.status == 200:
			var ans struct {
				Usage struct {
					Total int `json:"total_tokens"`
				} `json:"usage"`
			}
			if json.Unmarshal(r.body, &ans) != nil || ans.Usage.Total == 0 {
				t.Errorf("an answer without usage: %.300s", r.body)
			}
			used += ans.Usage.Total
			answered++
		case r.status == 429:
			var e openAIError
			if json.Unmarshal(r.body, &e) != nil || e.Error == nil {
				t.Errorf("429 not in OpenAI's shape: %.300s", r.body)
				continue
			}
			refused = append(refused, str(e.Error.Code)+": "+e.Error.Message)
		default:
			t.Errorf("status %d: %.300s", r.status, r.body)
		}
	}
	return used, answered, refused
}

// reservationOf bounds what the gateway reserves for a body of prompts
// prompts asking gens generations of 20 tokens each: its bytes at 3 a
// token, the per-prompt overhead, every generation's cap.
func reservationOf(body string, prompts, gens int) int {
	return len(body)/3 + 4*prompts + 10 + prompts*gens*20
}

// TestBudgetHoldsWhateverTheBodySays: two instances on one Redis share
// each user's daily token budget of 3,000, and the total charged (the
// engine's usage of the answers) stays within one request's reservation
// of it whatever the body asks: 16 requests at once with n=128, six
// with about 900 KB of tools each, eight batched /v1/completions of 64
// prompts; the others are refused with 429 budget_exceeded. Before the
// reservation counted what the engine does, these spent 40 to 300 times
// the budget.
func TestBudgetHoldsWhateverTheBodySays(t *testing.T) {
	a, b, _ := accountingGateways(t)
	gws := []*Gateway{a, b}
	tools := `[{"type":"function","function":{"name":"lookup","description":"` +
		strings.Repeat("lorem ", 150_000) + `","parameters":{"type":"object"}}}]`
	batch := make([]string, 64)
	for i := range batch {
		batch[i] = fmt.Sprintf("prompt number %d", i)
	}
	prompts, _ := json.Marshal(batch)
	for _, tc := range []struct {
		name, user, path, body string
		n, prompts, gens       int
	}{
		{name: "n=128", user: "nuser", path: "/v1/chat/completions", n: 16, prompts: 1, gens: 128,
			body: `{"model":"qwen","n":128,"max_tokens":20,"messages":[{"role":"user","content":"hello there"}]}`},
		{name: "900 KB of tools", user: "tuser", path: "/v1/chat/completions", n: 6, prompts: 1, gens: 1,
			body: `{"model":"qwen","max_tokens":20,"tools":` + tools + `,"messages":[{"role":"user","content":"hello there"}]}`},
		{name: "batched completions", user: "buser", path: "/v1/completions", n: 8, prompts: 64, gens: 2,
			body: `{"model":"qwen","n":2,"max_tokens":20,"prompt":` + string(prompts) + `}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tok := a.Token(t, tc.user, "demo", "")
			used, answered, refused := spend(t, gws, tc.path, tok, tc.body, tc.n)
			res := reservationOf(tc.body, tc.prompts, tc.gens)
			t.Logf("%d of %d answered, %d tokens used of a %d budget (a reservation is at most %d)",
				answered, tc.n, used, accountingBudget, res)
			if answered == 0 || used > accountingBudget+res {
				t.Errorf("%d answers used %d tokens of a %d budget; want at most %d (one reservation over)",
					answered, used, accountingBudget, accountingBudget+res)
			}
			if len(refused) == 0 {
				t.Errorf("no request was refused")
			}
			for _, r := range refused {
				if !strings.HasPrefix(r, "budget_exceeded: ") {
					t.Errorf("refusal %q, want budget_exceeded", r)
				}
			}
			noRedisFallback(t, a)
			noRedisFallback(t, b)
		})
	}
}

// TestTPMHoldsAgainstGenerations: a 3,000 tokens-per-minute limit
// shared by two instances holds against 16 requests at once each asking
// 128 generations: what they use stays within one reservation (and the
// minute's refill while they run) of the limit.
func TestTPMHoldsAgainstGenerations(t *testing.T) {
	a, b, _ := accountingGateways(t)
	tok := a.Token(t, "puser", "demo", "")
	body := `{"model":"qwen","n":128,"max_tokens":20,"messages":[{"role":"user","content":"hello there"}]}`
	start := time.Now()
	used, answered, refused := spend(t, []*Gateway{a, b}, "/v1/chat/completions", tok, body, 16)
	refill := int(time.Since(start).Seconds()*accountingBudget/60) + 1
	res := reservationOf(body, 1, 128)
	t.Logf("%d of 16 answered, %d tokens used against %d tpm (a reservation is at most %d, refill %d)",
		answered, used, accountingBudget, res, refill)
	if answered == 0 || used > accountingBudget+res+refill {
		t.Errorf("%d answers used %d tokens against %d tpm; want at most %d", answered, used, accountingBudget, accountingBudget+res+refill)
	}
	if len(refused) == 0 {
		t.Errorf("no request was refused")
	}
	for _, r := range refused {
		if !strings.Contains(r, "tokens per minute") {
			t.Errorf("refusal %q, want the tpm limit's", r)
		}
	}
}

// TestRequestCapsAndReplyCaps: a request over its model's caps is refused
// in the door's shape naming the member (n above the default 16; a
// prompt of 900 KB of tools above max_prompt_tokens), and the reply cap
// the gateway reserved reaches the engine under every name it honours:
// max_completion_tokens on /v1/messages, max_tokens on /v1/responses.
func TestRequestCapsAndReplyCaps(t *testing.T) {
	a, _, sim := accountingGateways(t)
	tok := a.Token(t, "cuser", "demo", "")
	tools := `[{"type":"function","function":{"name":"lookup","description":"` + strings.Repeat("lorem ", 150_000) + `"}}]`
	for _, tc := range []struct{ name, body, param string }{
		{"n over 16", `{"model":"gemma","n":17,"messages":[{"role":"user","content":"hi"}]}`, "n"},
		{"prompt over 50000 tokens", `{"model":"gemma","tools":` + tools + `,"messages":[{"role":"user","content":"hi"}]}`, "tools"},
	} {
		sim.reset(t)
		r := postV1(a, "/v1/chat/completions", tok, tc.body)
		var e openAIError
		_ = json.Unmarshal(r.body, &e)
		if r.status != 400 || e.Error == nil || e.Error.Type != "invalid_request_error" || str(e.Error.Param) != tc.param ||
			str(e.Error.Code) != "invalid_value" {
			t.Errorf("%s: %d %.300s", tc.name, r.status, r.body)
		}
		if n := len(sim.requests(t)); n != 0 {
			t.Errorf("%s: the engine received %d requests", tc.name, n)
		}
	}
	// Anthropic's door, in its shape: the largest member named.
	resp := a.anthropicPost(t, a.Base, "/v1/messages", `{"model":"gemma","max_tokens":10,"tools":[{"name":"lookup","description":"`+strings.Repeat("lorem ", 150_000)+
		`","input_schema":{"type":"object"}}],"messages":[{"role":"user","content":"hi"}]}`, "Authorization", "Bearer "+tok)
	readAnthropicError(t, resp, 400, "invalid_request_error", "'tools'")
	if r := postV1(a, "/v1/chat/completions", tok, `{"model":"gemma","n":16,"messages":[{"role":"user","content":"hi"}]}`); r.status != 200 {
		t.Errorf("n=16: %d %.300s", r.status, r.body)
	}

	for _, tc := range []struct{ name, path, body, member string }{
		{"messages", "/v1/messages", `{"model":"qwen","max_tokens":10,"max_completion_tokens":100000,"messages":[{"role":"user","content":"hi"}]}`,
			"max_completion_tokens"},
		{"responses", "/v1/responses", `{"model":"qwen","max_output_tokens":16,"max_tokens":100000,"input":"hi"}`, "max_tokens"},
	} {
		sim.reset(t)
		hdr := "Authorization"
		val := "Bearer " + tok
		req, _ := http.NewRequest("POST", a.Base+tc.path, bytes.NewReader([]byte(tc.body)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(hdr, val)
		if tc.path == "/v1/messages" {
			req.Header.Set("Anthropic-Version", "2023-06-01")
		}
		resp, err := a.Client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("%s: %d %.300s", tc.name, resp.StatusCode, b)
			continue
		}
		var got map[string]any
		if err := json.Unmarshal(sim.only(t).Body, &got); err != nil {
			t.Fatal(err)
		}
		if v, ok := got[tc.member].(float64); !ok || v > 16 {
			t.Errorf("%s: the engine got %s %v, want at most the 16 reserved", tc.name, tc.member, got[tc.member])
		}
	}
}
