package simulator

import (
	"encoding/json"
	"net/http"
	"testing"
)

// /tokenize counts what the same chat request is charged in
// usage.prompt_tokens: the template's tokens, tools and parts included.
func TestTokenizeAgreesWithUsage(t *testing.T) {
	ts, _ := start(t, Config{Tokens: 3})
	for _, tc := range []struct{ name, body string }{
		{"one message", `{"model":"m","messages":[{"role":"user","content":"hello there world"}]}`},
		{"system and turns", `{"model":"m","messages":[{"role":"system","content":"be terse"},{"role":"user","content":"a b c"},` +
			`{"role":"assistant","content":"d e"},{"role":"user","content":"f"}]}`},
		{"tools and a tool call", `{"model":"m","tools":[{"type":"function","function":{"name":"read","description":"read a file",` +
			`"parameters":{"type":"object","properties":{"path":{"type":"string"}}}}}],"messages":[{"role":"user","content":"read it"},` +
			`{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"read","arguments":"{\"path\":\"a\"}"}}]},` +
			`{"role":"tool","tool_call_id":"c1","content":"package main"}]}`},
		{"parts and an image", `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"what is this"},` +
			`{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgo="}}]}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, b := do(t, "POST", ts.URL+"/tokenize", tc.body)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("/tokenize: %d %s", resp.StatusCode, b)
			}
			var tok tokenizeResponse
			if err := json.Unmarshal(b, &tok); err != nil || tok.Count == 0 || len(tok.Tokens) != tok.Count {
				t.Fatalf("/tokenize answered %s (%v)", b, err)
			}
			resp, b = do(t, "POST", ts.URL+"/v1/chat/completions", tc.body)
			var ans struct {
				Usage struct {
					PromptTokens int `json:"prompt_tokens"`
				} `json:"usage"`
			}
			if err := json.Unmarshal(b, &ans); err != nil || resp.StatusCode != http.StatusOK {
				t.Fatalf("chat: %d %s", resp.StatusCode, b)
			}
			if tok.Count != ans.Usage.PromptTokens {
				t.Errorf("/tokenize counts %d, the chat is charged %d prompt tokens", tok.Count, ans.Usage.PromptTokens)
			}
		})
	}
}

func TestTokenizeShapes(t *testing.T) {
	vllm, _ := start(t, Config{})
	sglang, _ := start(t, Config{Dialect: DialectSGLang})
	keyed, _ := start(t, Config{APIKey: "k"})
	for _, tc := range []struct {
		name, url, body string
		status, count   int
	}{
		{"a prompt: words, no template", vllm.URL, `{"model":"m","prompt":"one two three"}`, 200, 3},
		{"not JSON", vllm.URL, `{`, 400, 0},
		{"no messages", vllm.URL, `{"model":"m"}`, 400, 0},
		{"another dialect has none", sglang.URL, `{"model":"m","prompt":"x"}`, 404, 0},
		{"the API key", keyed.URL, `{"model":"m","prompt":"x"}`, 401, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, b := do(t, "POST", tc.url+"/tokenize", tc.body)
			if resp.StatusCode != tc.status {
				t.Fatalf("%d %s, want %d", resp.StatusCode, b, tc.status)
			}
			var tok tokenizeResponse
			if tc.status == 200 && (json.Unmarshal(b, &tok) != nil || tok.Count != tc.count) {
				t.Fatalf("answered %s, want count %d", b, tc.count)
			}
		})
	}
}
