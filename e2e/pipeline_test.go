package e2e

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
)

// No order or subset of llm_auth, llm_validate and llm_route lets a
// request through that llm_gateway would refuse: each path below holds
// one arrangement (in a route block, so the order is as written), and in
// every one a request without a token gets 401, a token without the
// model's scope gets 403 (and the replica never hears of it), a bad body
// gets 422, and a good request is answered.
func TestEveryHandlerOrderEnforcesAuthAndScope(t *testing.T) {
	qwen := startSim(t, "-tokens", "3")
	gemma := startSim(t, "-tokens", "3")
	arrangements := [][]string{
		{"llm_route"},
		{"llm_auth", "llm_route"}, {"llm_route", "llm_auth"},
		{"llm_validate", "llm_route"}, {"llm_route", "llm_validate"},
		{"llm_auth", "llm_validate", "llm_route"}, {"llm_auth", "llm_route", "llm_validate"},
		{"llm_validate", "llm_auth", "llm_route"}, {"llm_validate", "llm_route", "llm_auth"},
		{"llm_route", "llm_auth", "llm_validate"}, {"llm_route", "llm_validate", "llm_auth"},
		// Without llm_route a request is not routed by llmedge; what the
		// stages let through reaches the next handler.
		{"llm_validate"}, {"llm_auth", "llm_validate"}, {"llm_validate", "llm_auth"},
	}
	var site strings.Builder
	site.WriteString("llm_token /auth/token\n")
	for i, handlers := range arrangements {
		fmt.Fprintf(&site, "\thandle /a%d {\n\t\troute {\n", i)
		for _, h := range handlers {
			fmt.Fprintf(&site, "\t\t\t%s\n", h)
		}
		fmt.Fprintf(&site, "\t\t\trespond \"passed on\" 299\n\t\t}\n\t}\n")
	}
	g := startGateway(t, GatewayConfig{
		Models: map[string]string{"qwen": staticModel(qwen), "gemma": staticModel(gemma)},
		Site:   site.String(),
	})
	alice := g.Token(t, "alice", "demo", "") // qwen only
	post := func(path, token, body string) (int, string) {
		req, _ := http.NewRequest("POST", g.Base+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := g.Client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	const good = `{"messages":[{"role":"user","content":"hi"}],"model_type":"qwen"}`
	const other = `{"messages":[{"role":"user","content":"hi"}],"model_type":"gemma"}`
	for i, handlers := range arrangements {
		path := fmt.Sprintf("/a%d", i)
		t.Run(strings.Join(handlers, "+"), func(t *testing.T) {
			if code, body := post(path, "", other); code != 401 || !strings.Contains(body, "Not authenticated") {
				t.Errorf("no token: %d %s", code, body)
			}
			if code, body := post(path, "forged.token.here", good); code != 401 || !strings.Contains(body, "Could not validate credentials") {
				t.Errorf("bad token: %d %s", code, body)
			}
			if code, body := post(path, alice, other); code != 403 || !strings.Contains(body, "model:gemma") {
				t.Errorf("outside the scope: %d %s", code, body)
			}
			if code, body := post(path, alice, `{"messages":[]}`); code != 422 {
				t.Errorf("bad body: %d %s", code, body)
			}
			code, body := post(path, alice, good)
			routed := slices.Contains(handlers, "llm_route")
			switch {
			case routed && (code != 200 || !strings.Contains(body, `"model_type":"qwen"`)):
				t.Errorf("good request: %d %s", code, body)
			case !routed && (code != 299 || body != "passed on"):
				t.Errorf("good request not passed on: %d %s", code, body)
			}
		})
	}
	if n := gemma.Stats(t).Requests; n != 0 {
		t.Fatalf("the gemma replica got %d requests from a qwen-only token", n)
	}
}
