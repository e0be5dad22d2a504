package e2e

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// One agent's conversation, its turns sent through OpenAI's chat door,
// then Anthropic's, then the Responses door, is one prompt to prefix
// routing: every later turn lands on the replica that holds its history,
// however the client's JSON spells the text (escapes, non-ASCII), since
// no door decodes what it carries through.
func TestRoutingAcrossDoors(t *testing.T) {
	var sims []*Sim
	for range 3 {
		sims = append(sims, startSim(t, "-tokens", "4"))
	}
	logFile := filepath.Join(t.TempDir(), "access.log")
	g := startGateway(t, GatewayConfig{
		Models: map[string]string{"qwen": staticModel(sims...)},
		Site:   "log {\n\t\toutput file " + logFile + "\n\t\tformat json\n\t}\n\tllm_gateway",
	})
	tok := g.Token(t, "demo", "demo", "")

	// system is a long system prompt as an agent's client writes it, with
	// escapes and non-ASCII text; turn is its user's turn n.
	system := func(c int) string {
		return fmt.Sprintf(`Tu travailles pour l'\u00e9quipe %d. `, c) + strings.Repeat(`Réponds avec soin, cite tes sources \u2014 \"toujours\".\n`, 40)
	}
	turn := func(c, n int) string { return fmt.Sprintf(`Question %d.%d : et ensuite ? 你好`, c, n) }
	answer := strings.Repeat(`voici la suite \u2026 `, 8)
	// history is turns 1..n as chat messages (the system prompt apart),
	// the assistant's answers between them.
	history := func(c, n int, text func(s string) string) string {
		var b []string
		for i := 1; i <= n; i++ {
			b = append(b, `{"role":"user","content":`+text(turn(c, i))+`}`)
			if i < n {
				b = append(b, `{"role":"assistant","content":`+text(answer)+`}`)
			}
		}
		return strings.Join(b, ",")
	}
	quoted := func(s string) string { return `"` + s + `"` }
	// Anthropic's blocks and the Responses API's parts: the same text.
	blocks := func(s string) string { return `[{"type":"text","text":"` + s + `"}]` }
	const convs = 3
	for c := range convs {
		chat := `{"model":"qwen","max_tokens":4,"messages":[{"role":"system","content":"` + system(c) + `"},` + history(c, 1, quoted) + `]}`
		postDoor(t, g, tok, "/v1/chat/completions", fmt.Sprintf("c%d-chat", c), chat)
		anth := `{"model":"qwen","max_tokens":4,"system":"` + system(c) + `","messages":[` + history(c, 2, blocks) + `]}`
		postDoor(t, g, tok, "/v1/messages", fmt.Sprintf("c%d-anthropic", c), anth)
		resp := `{"model":"qwen","max_output_tokens":4,"instructions":"` + system(c) + `","input":[` +
			strings.ReplaceAll(history(c, 3, quoted), `"content":"`+answer+`"`, `"content":[{"type":"output_text","text":"`+answer+`"}]`) + `]}`
		postDoor(t, g, tok, "/v1/responses", fmt.Sprintf("c%d-responses", c), resp)
	}
	var log map[string]map[string]any
	waitFor(t, 5*time.Second, func() bool { log = accessLog(t, logFile); return len(log) >= 3*convs })
	for c := range convs {
		home, _ := log[fmt.Sprintf("c%d-chat", c)]["replica"].(string)
		for _, door := range []string{"anthropic", "responses"} {
			e := log[fmt.Sprintf("c%d-%s", c, door)]
			if e["replica"] != home || e["lb_reason"] != "prefix" {
				t.Errorf("conversation %d through the %s door: replica %v (%v), its history is on %s", c, door, e["replica"], e["lb_reason"], home)
			}
		}
	}
}

// postDoor sends body to path with the request ID id, and fails the test on
// any answer but 200.
func postDoor(t *testing.T, g *Gateway, tok, path, id, body string) {
	t.Helper()
	req, _ := http.NewRequest("POST", g.Base+path, bytes.NewReader([]byte(body)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("X-Request-ID", id)
	resp, err := g.Client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("%s %s: %s %s", path, id, resp.Status, b)
	}
}
