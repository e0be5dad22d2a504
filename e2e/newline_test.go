package e2e

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestJSONAnswersEndWithANewline: every door's JSON answers and error
// bodies, and the site's own, end with a newline (curl's output then
// ends its line; line-oriented tools read it whole).
func TestJSONAnswersEndWithANewline(t *testing.T) {
	sim := startSim(t, "-tokens", "3")
	g := startGateway(t, GatewayConfig{Models: map[string]string{"qwen": staticModel(sim), "gemma": "\t\t\tprotocol openai"}})
	tok := g.Token(t, "demo", "demo", "")
	chat := `{"model":"qwen","messages":[{"role":"user","content":"Hi"}]}`
	for _, c := range []struct {
		name, method, path, body string
		header                   map[string]string
	}{
		{"native answer", "POST", "/tasks/assistant_inference", `{"model_type":"qwen","messages":[{"role":"user","content":"Hi"}]}`, map[string]string{"Authorization": "Bearer " + tok}},
		{"native error", "POST", "/tasks/assistant_inference", `{}`, map[string]string{"Authorization": "Bearer " + tok}},
		{"native 401", "POST", "/tasks/assistant_inference", `{}`, nil},
		{"openai answer", "POST", "/v1/chat/completions", chat, map[string]string{"Authorization": "Bearer " + tok}},
		{"openai error", "POST", "/v1/chat/completions", `{"model":"llama","messages":[]}`, map[string]string{"Authorization": "Bearer " + tok}},
		{"openai models", "GET", "/v1/models", "", map[string]string{"Authorization": "Bearer " + tok}},
		{"openai 503", "POST", "/v1/chat/completions", strings.Replace(chat, "qwen", "gemma", 1), map[string]string{"Authorization": "Bearer " + tok}},
		{"anthropic answer", "POST", "/v1/messages", `{"model":"qwen","max_tokens":16,"messages":[{"role":"user","content":"Hi"}]}`, map[string]string{"x-api-key": tok, "anthropic-version": "2023-06-01"}},
		{"anthropic error", "POST", "/v1/messages", `{"model":"qwen"}`, map[string]string{"x-api-key": tok, "anthropic-version": "2023-06-01"}},
		{"healthz", "GET", "/healthz", "", nil},
		{"readyz", "GET", "/readyz", "", nil},
		{"openapi", "GET", "/openapi.json", "", nil},
		{"jwks", "GET", "/.well-known/jwks.json", "", nil},
		{"not found", "GET", "/nothing", "", nil},
		{"token error", "POST", "/auth/token", url.Values{"username": {"demo"}}.Encode(), map[string]string{"Content-Type": "application/x-www-form-urlencoded"}},
	} {
		req, _ := http.NewRequest(c.method, g.Base+c.path, strings.NewReader(c.body))
		if c.body != "" && c.header["Content-Type"] == "" {
			req.Header.Set("Content-Type", "application/json")
		}
		for k, v := range c.header {
			req.Header.Set(k, v)
		}
		resp, err := g.Client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(resp.Header.Get("Content-Type"), "json") || !strings.HasSuffix(string(b), "}\n") {
			t.Errorf("%s: %s %s %q", c.name, resp.Status, resp.Header.Get("Content-Type"), b)
		}
	}
}
