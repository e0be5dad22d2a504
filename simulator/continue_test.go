package simulator

import (
	"encoding/json"
	"net/http"

	"strings"
	"testing"

	"github.com/llmedge/llmedge/api"
)

// continueBody is hello continued from the assistant's text.
func continueBody(t *testing.T, text string, extra map[string]any) string {
	t.Helper()
	m := map[string]any{"messages": []map[string]any{
		{"role": "user", "content": "hello there"}, {"role": "assistant", "content": text}}}
	for k, v := range extra {
		m[k] = v
	}
	return chatWith(t, m)
}

// TestContinueFinalMessage: the answer a continuation gets is the rest of
// the answer it continues, token for token, and its prompt holds the
// tokens continued from.
func TestContinueFinalMessage(t *testing.T) {
	ts, _ := start(t, Config{Tokens: 10, Seed: 3})
	whole := complete(t, ts.URL, hello)
	text := whole.Choices[0].Message.Content
	words := strings.SplitAfter(text, " ") // "w1 ", "w2 ", ...: cut before a space
	for _, k := range []int{1, 4, 9} {
		prefix := strings.TrimSuffix(strings.Join(words[:k], ""), " ")
		c := complete(t, ts.URL, continueBody(t, prefix, map[string]any{"continue_final_message": true, "add_generation_prompt": false}))
		if got := prefix + c.Choices[0].Message.Content; got != text {
			t.Errorf("after %d tokens: %q + %q, want %q", k, prefix, c.Choices[0].Message.Content, text)
		}
		if c.Usage.PromptTokens != whole.Usage.PromptTokens+k || c.Usage.CompletionTokens != 10-k {
			t.Errorf("after %d tokens: usage %+v, want prompt %d + %d, completion %d", k, c.Usage, whole.Usage.PromptTokens, k, 10-k)
		}
	}
	// Text the simulator would not have written goes on all the same.
	c := complete(t, ts.URL, continueBody(t, "zebra crossing", map[string]any{"continue_final_message": true, "add_generation_prompt": false}))
	if got := c.Choices[0].Message.Content; !strings.HasPrefix(got, " ") || len(strings.Fields(got)) != 8 {
		t.Errorf("foreign text continued with %q", got)
	}
	// Without the flag, a trailing assistant message is answered anew.
	c = complete(t, ts.URL, continueBody(t, strings.Fields(text)[0], nil))
	if strings.HasPrefix(c.Choices[0].Message.Content, " ") {
		t.Errorf("answered as a continuation without continue_final_message: %q", c.Choices[0].Message.Content)
	}
}

func TestContinueRefusals(t *testing.T) {
	ts, _ := start(t, Config{})
	for _, tc := range []struct{ name, body, msg string }{
		{"generation prompt left on", continueBody(t, "x", map[string]any{"continue_final_message": true}), "add_generation_prompt"},
		{"last message not the assistant's", chatWith(t, map[string]any{"continue_final_message": true, "add_generation_prompt": false}), "final message"},
	} {
		resp, b := do(t, http.MethodPost, ts.URL+"/v1/chat/completions", tc.body)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), tc.msg) {
			t.Errorf("%s: %d %s", tc.name, resp.StatusCode, b)
		}
	}
}

// Ollama continues a trailing assistant message as it is.
func TestContinueOllamaTrailing(t *testing.T) {
	ts, _ := start(t, Config{Dialect: DialectOllama, Tokens: 6, Seed: 1})
	_, b := do(t, http.MethodPost, ts.URL+"/api/chat", `{"model":"m","stream":false,"messages":[{"role":"user","content":"hello there"}]}`)
	whole := decode[struct {
		Message struct{ Content string } `json:"message"`
	}](t, b)
	first := strings.Fields(whole.Message.Content)[0]
	_, b = do(t, http.MethodPost, ts.URL+"/api/chat", `{"model":"m","stream":false,"messages":[{"role":"user","content":"hello there"},{"role":"assistant","content":"`+first+`"}]}`)
	cont := decode[struct {
		Message struct{ Content string } `json:"message"`
	}](t, b)
	if first+cont.Message.Content != whole.Message.Content {
		t.Errorf("%q + %q, want %q", first, cont.Message.Content, whole.Message.Content)
	}
}

func TestFaultAt(t *testing.T) {
	conv := plan{Conversation: nil}
	tests := []struct {
		name string
		cfg  Config
		p    plan
		n    int
		want int
	}{
		{"off", Config{}, conv, 0, 0},
		{"no spread", Config{}, conv, 5, 5},
		{"a continuation before the point", Config{}, plan{Continued: 2}, 5, 3},
		{"a continuation past the point", Config{}, plan{Continued: 5}, 5, 0},
	}
	for _, tt := range tests {
		if got := faultAt(tt.cfg, tt.p, tt.n); got != tt.want {
			t.Errorf("%s: %d, want %d", tt.name, got, tt.want)
		}
	}
	// A spread puts answers' faults at points of their own, the same for
	// the same conversation.
	seen := map[int]bool{}
	for _, c := range []string{"a", "b", "c", "d", "e", "f", "g", "h"} {
		p := plan{Conversation: []api.Message{{Role: "user", Content: c}}}
		got := faultAt(Config{FaultSpread: 30}, p, 5)
		if got < 5 || got >= 35 || got != faultAt(Config{FaultSpread: 30}, p, 5) {
			t.Fatalf("%q: %d", c, got)
		}
		seen[got] = true
	}
	if len(seen) < 4 {
		t.Errorf("8 conversations struck at %d points", len(seen))
	}
}

// TestContinueCompletion: with ContinueCompletions, a text completion
// whose prompt ends with the beginning of the answer to the prompt before
// it gets the rest of that answer, its prompt counting the words
// continued from; without it, the same prompt is answered anew.
func TestContinueCompletion(t *testing.T) {
	type completion struct {
		Choices []struct{ Text string }
		Usage   struct {
			PromptTokens     int `json:"prompt_tokens"`
			CompletionTokens int `json:"completion_tokens"`
		} `json:"usage"`
	}
	ask := func(t *testing.T, url, prompt string) completion {
		t.Helper()
		body, _ := json.Marshal(map[string]any{"model": "m", "prompt": prompt, "max_tokens": 100})
		resp, b := do(t, http.MethodPost, url+"/v1/completions", string(body))
		var c completion
		if resp.StatusCode != 200 || json.Unmarshal(b, &c) != nil || len(c.Choices) != 1 {
			t.Fatalf("%s %s", resp.Status, b)
		}
		return c
	}
	ts, _ := start(t, Config{Tokens: 10, Seed: 3, ContinueCompletions: true})
	whole := ask(t, ts.URL, "tell me about 3")
	text := whole.Choices[0].Text
	words := strings.SplitAfter(text, " ")
	for _, k := range []int{1, 4, 9} {
		prefix := strings.TrimSuffix(strings.Join(words[:k], ""), " ")
		c := ask(t, ts.URL, "tell me about 3"+prefix)
		if got := prefix + c.Choices[0].Text; got != text {
			t.Errorf("after %d tokens: %q + %q, want %q", k, prefix, c.Choices[0].Text, text)
		}
		if c.Usage.PromptTokens != whole.Usage.PromptTokens+k || c.Usage.CompletionTokens != 10-k {
			t.Errorf("after %d tokens: usage %+v, want prompt %d + %d, completion %d", k, c.Usage, whole.Usage.PromptTokens, k, 10-k)
		}
	}
	off, _ := start(t, Config{Tokens: 10, Seed: 3})
	prefix := strings.TrimSuffix(strings.Join(words[:4], ""), " ")
	if c := ask(t, off.URL, "tell me about 3"+prefix); len(strings.Fields(c.Choices[0].Text)) != 10 {
		t.Errorf("continued without ContinueCompletions: %q", c.Choices[0].Text)
	}
}
