package simulator

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// reasonedAnswer is what a client reads of a non-streamed answer with
// reasoning.
type reasonedAnswer struct {
	Choices []struct {
		Message struct {
			Content          *string         `json:"content"`
			ReasoningContent *string         `json:"reasoning_content"`
			ToolCalls        json.RawMessage `json:"tool_calls"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage struct {
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
}

// TestReasoning holds the requests that ask for thinking, of each
// dialect, to the reasoning their answer carries.
func TestReasoning(t *testing.T) {
	for _, c := range []struct {
		name, dialect string
		extra         map[string]any
		// reasoning is the reasoning's tokens, 0 for none; text the text's.
		reasoning, text int
		finish          string
	}{
		{"enable_thinking", DialectVLLM, map[string]any{"chat_template_kwargs": map[string]any{"enable_thinking": true}}, 3, 6, "stop"},
		{"sglang", DialectSGLang, map[string]any{"chat_template_kwargs": map[string]any{"enable_thinking": true}}, 3, 6, "stop"},
		{"reasoning_effort", DialectVLLM, map[string]any{"reasoning_effort": "low"}, 3, 6, "stop"},
		{"enable_thinking false wins", DialectVLLM, map[string]any{"reasoning_effort": "high", "chat_template_kwargs": map[string]any{"enable_thinking": false}}, 0, 6, "stop"},
		{"effort none", DialectVLLM, map[string]any{"reasoning_effort": "none"}, 0, 6, "stop"},
		{"not asked", DialectVLLM, map[string]any{"chat_template_kwargs": map[string]any{"other": 1}}, 0, 6, "stop"},
		{"tgi does not separate it", DialectTGI, map[string]any{"chat_template_kwargs": map[string]any{"enable_thinking": true}}, 0, 6, "stop"},
		{"max_tokens counts it", DialectVLLM, map[string]any{"reasoning_effort": "low", "max_tokens": 5}, 3, 2, "length"},
		{"max_tokens within it", DialectVLLM, map[string]any{"reasoning_effort": "low", "max_tokens": 2}, 2, 0, "length"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ts, _ := start(t, Config{Tokens: 6, Seed: 5, Dialect: c.dialect})
			resp, b := do(t, http.MethodPost, ts.URL+"/v1/chat/completions", chatWith(t, c.extra))
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("%d %s", resp.StatusCode, b)
			}
			a := decode[reasonedAnswer](t, b)
			m := a.Choices[0].Message
			switch {
			case c.reasoning == 0 && m.ReasoningContent != nil:
				t.Fatalf("reasoning %q", *m.ReasoningContent)
			case c.reasoning > 0 && (m.ReasoningContent == nil || len(strings.Fields(*m.ReasoningContent)) != c.reasoning):
				t.Fatalf("reasoning %v, want %d words (%s)", m.ReasoningContent, c.reasoning, b)
			}
			if n := len(strings.Fields(*m.Content)); n != c.text || a.Choices[0].FinishReason != c.finish {
				t.Fatalf("text %q (%d words), finish %s; want %d, %s", *m.Content, n, a.Choices[0].FinishReason, c.text, c.finish)
			}
			if a.Usage.CompletionTokens != c.reasoning+c.text {
				t.Fatalf("completion tokens %d, want %d", a.Usage.CompletionTokens, c.reasoning+c.text)
			}
		})
	}
}

// TestReasoningStreamed: the reasoning's chunks come first, then the
// content's, or a tool call named after the reasoning; the usage counts
// both.
func TestReasoningStreamed(t *testing.T) {
	ts, _ := start(t, Config{Tokens: 4, Seed: 5})
	tools := []any{map[string]any{"type": "function", "function": map[string]any{"name": "f",
		"parameters": map[string]any{"type": "object", "properties": map[string]any{"a": map[string]any{"type": "string"}}, "required": []any{"a"}}}}}
	for _, c := range []struct {
		name  string
		extra map[string]any
		// want is the sequence of kinds of the deltas: R reasoning, C
		// content, N a call's name, A a call's arguments; repeats merged.
		want string
	}{
		{"text", map[string]any{}, "C"},
		{"reasoning then text", map[string]any{"reasoning_effort": "medium"}, "RC"},
		{"reasoning then a call", map[string]any{"reasoning_effort": "medium", "tools": tools, "tool_choice": "required"}, "RNA"},
		{"a call alone", map[string]any{"tools": tools, "tool_choice": "required"}, "NA"},
	} {
		t.Run(c.name, func(t *testing.T) {
			extra := map[string]any{"stream": true, "stream_options": map[string]any{"include_usage": true}}
			for k, v := range c.extra {
				extra[k] = v
			}
			resp, b := do(t, http.MethodPost, ts.URL+"/v1/chat/completions", chatWith(t, extra))
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("%d %s", resp.StatusCode, b)
			}
			payloads, _ := parseSSE(t, string(b))
			kinds, tokens, usage := "", 0, 0
			for _, p := range payloads {
				if p == "[DONE]" {
					continue
				}
				var ch struct {
					Choices []struct {
						Delta struct {
							Content          *string `json:"content"`
							ReasoningContent *string `json:"reasoning_content"`
							ToolCalls        []struct {
								Function struct {
									Name      string  `json:"name"`
									Arguments *string `json:"arguments"`
								} `json:"function"`
							} `json:"tool_calls"`
						} `json:"delta"`
					} `json:"choices"`
					Usage *struct {
						CompletionTokens int `json:"completion_tokens"`
					} `json:"usage"`
				}
				if err := json.Unmarshal([]byte(p), &ch); err != nil {
					t.Fatal(err)
				}
				if ch.Usage != nil {
					usage = ch.Usage.CompletionTokens
				}
				for _, choice := range ch.Choices {
					d := choice.Delta
					k := ""
					switch {
					case d.ReasoningContent != nil:
						k, tokens = "R", tokens+1
					case d.Content != nil && *d.Content != "":
						k, tokens = "C", tokens+1
					case len(d.ToolCalls) > 0 && d.ToolCalls[0].Function.Name != "":
						k = "N"
					case len(d.ToolCalls) > 0 && d.ToolCalls[0].Function.Arguments != nil:
						k, tokens = "A", tokens+1
					}
					if k != "" && !strings.HasSuffix(kinds, k) {
						kinds += k
					}
				}
			}
			if kinds != c.want {
				t.Fatalf("deltas %q, want %q\n%s", kinds, c.want, b)
			}
			if usage != tokens {
				t.Fatalf("usage %d, tokens streamed %d", usage, tokens)
			}
		})
	}
}
