package e2e

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// TestCountTokensWithEngineTokenizer: Anthropic's count_tokens for models
// whose replicas do not serve it, over HTTPS through the real gateway:
//
//	qwen     anthropic translate, an llmsim without /v1/messages
//	         (-no-messages) that has vLLM's /tokenize: the count is the
//	         engine's tokenizer's, the input_tokens /v1/messages then
//	         charges for the same request
//	sglang   the same over an engine without a chat tokenizer: the
//	         gateway's estimate, and still nothing generated
func TestCountTokensWithEngineTokenizer(t *testing.T) {
	vllm := startSim(t, "-tokens", "4", "-no-messages")
	sglang := startSim(t, "-tokens", "4", "-no-messages", "-dialect", "sglang")
	g := startGateway(t, GatewayConfig{Models: map[string]string{
		"qwen":   staticModel(vllm) + "\n\t\t\tanthropic translate\n\t\t\tupstream_model Qwen/Qwen3-8B",
		"sglang": staticModel(sglang) + "\n\t\t\tanthropic translate",
	}})
	cred := credentialKinds[1].get(t, g, "demo")
	count := func(body string) (int, string, int) {
		t.Helper()
		var c struct {
			InputTokens int `json:"input_tokens"`
		}
		resp := g.anthropicPost(t, g.Base, "/v1/messages/count_tokens", body, "X-Api-Key", cred)
		raw := readJSON(t, resp, &c)
		return resp.StatusCode, string(raw), c.InputTokens
	}
	// An agent's turn: a system prompt as blocks, tools, a tool call and
	// its result, an image.
	conversation := `"system":[{"type":"text","text":"You are a coding agent.","cache_control":{"type":"ephemeral"}}],` +
		anthropicWeatherTool + `,"messages":[{"role":"user","content":"What is the weather in Paris and Rome?"},` +
		`{"role":"assistant","content":[{"type":"text","text":"Let me look."},{"type":"tool_use","id":"t1","name":"get_weather","input":{"city":"Paris"}}]},` +
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"sunny, 21 degrees"},` +
		`{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}},{"type":"text","text":"and Rome?"}]}]`
	for _, body := range []string{anthropicHello, conversation} {
		vllm.drain(t)
		status, raw, n := count(`{"model":"qwen",` + body + `}`)
		if status != 200 || n <= 0 {
			t.Fatalf("count_tokens: %d %s", status, raw)
		}
		got := vllm.drain(t)
		// Counted by the engine's tokenizer, in the chat form a message
		// is translated to, under the replica's name of the model; nothing
		// generated.
		if paths(got) != "/tokenize" || !strings.Contains(string(got[0].Body), `"model":"Qwen/Qwen3-8B"`) ||
			strings.Contains(body, `"system"`) != strings.Contains(string(got[0].Body), `"role":"system"`) ||
			strings.Contains(string(got[0].Body), "max_tokens") {
			t.Fatalf("the engine got %s", bodies(got))
		}
		m := readMessage(t, g.anthropicPost(t, g.Base, "/v1/messages", `{"model":"qwen","max_tokens":8,`+body+`}`, "X-Api-Key", cred))
		if m.Usage.InputTokens != n {
			t.Fatalf("count_tokens says %d, /v1/messages charged %d input tokens", n, m.Usage.InputTokens)
		}
	}

	// No chat tokenizer: the estimate, and the engine generated nothing.
	sglang.drain(t)
	status, raw, n := count(`{"model":"sglang",` + conversation + `}`)
	if status != 200 || n <= 0 {
		t.Fatalf("count_tokens without a tokenizer: %d %s", status, raw)
	}
	if got := sglang.drain(t); paths(got) != "/tokenize" { // asked in vLLM's shape: 404
		t.Fatalf("the engine without a tokenizer got %s", bodies(got))
	}
	// The replica is remembered as having none: the next count asks it nothing.
	if status, raw, again := count(`{"model":"sglang",` + conversation + `}`); status != 200 || again != n {
		t.Fatalf("second count: %d %s, first %d", status, raw, n)
	}
	if got := sglang.drain(t); len(got) != 0 {
		t.Fatalf("the engine was asked again: %s", bodies(got))
	}
}

// TestUsageIsTheEngines: every door reports the engine's own prompt
// count, not an estimate of the gateway's: the figure the engine's
// tokenizer gives for the same conversation (the simulator charges what
// its /tokenize counts).
func TestUsageIsTheEngines(t *testing.T) {
	sim := startSim(t, "-tokens", "3")
	g := startGateway(t, GatewayConfig{Models: map[string]string{
		"qwen":  staticModel(sim),
		"gemma": staticModel(sim) + "\n\t\t\tanthropic translate",
	}})
	key := credentialKinds[1].get(t, g, "demo")
	token := g.Token(t, "demo", "demo", "")
	const msgs = `"messages":[{"role":"system","content":"You are terse, precise and kind."},{"role":"user","content":"Name three rivers of Europe, please."}]`
	engine := func(body string) int {
		t.Helper()
		resp, err := http.Post(sim.URL+"/tokenize", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		var c struct {
			Count int `json:"count"`
		}
		if raw := readJSON(t, resp, &c); resp.StatusCode != 200 || c.Count == 0 {
			t.Fatalf("/tokenize: %s %s", resp.Status, raw)
		}
		return c.Count
	}
	chatCount := engine(`{"model":"m",` + msgs + `}`)
	post := func(path, body string) []byte {
		t.Helper()
		req, _ := http.NewRequest("POST", g.Base+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Anthropic-Version", "2023-06-01")
		resp, err := g.Client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		raw := readJSON(t, resp, nil)
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %s %s", path, resp.Status, raw)
		}
		return raw
	}
	var u struct {
		Usage struct {
			PromptTokens int `json:"prompt_tokens"`
			InputTokens  int `json:"input_tokens"`
		} `json:"usage"`
	}
	for _, tc := range []struct {
		door, path, body string
		want             int
	}{
		{"openai chat", "/v1/chat/completions", `{"model":"qwen",` + msgs + `}`, chatCount},
		{"openai completions", "/v1/completions", `{"model":"qwen","prompt":"Name three rivers of Europe.","max_tokens":3}`,
			engine(`{"model":"m","prompt":"Name three rivers of Europe."}`)},
		{"anthropic, translated", "/v1/messages", `{"model":"gemma","max_tokens":3,"system":"You are terse, precise and kind.",` +
			`"messages":[{"role":"user","content":"Name three rivers of Europe, please."}]}`, chatCount},
	} {
		u.Usage.PromptTokens, u.Usage.InputTokens = 0, 0
		raw := post(tc.path, tc.body)
		if err := json.Unmarshal(raw, &u); err != nil || u.Usage.PromptTokens+u.Usage.InputTokens != tc.want {
			t.Errorf("%s reports %s, the engine counts %d", tc.door, raw, tc.want)
		}
	}
	// The native door.
	resp := g.Infer(t, token, `{"model_type":"qwen",`+msgs+`}`)
	var n struct {
		Usage struct {
			PromptTokens int `json:"prompt_tokens"`
		} `json:"usage"`
	}
	if raw := readJSON(t, resp, &n); resp.StatusCode != 200 || n.Usage.PromptTokens != chatCount {
		t.Errorf("native door reports %s, the engine counts %d", raw, chatCount)
	}
}
