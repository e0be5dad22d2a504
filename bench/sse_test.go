package bench

import (
	"strings"
	"testing"
)

func TestSSETokens(t *testing.T) {
	tests := []struct {
		name   string
		stream string
		want   []sseKind // one per line
	}{
		{"openai", `data: {"id":"c","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}

data: {"id":"c","choices":[{"index":0,"delta":{"content":"of"},"finish_reason":null}]}

data: {"id":"c","choices":[{"index":0,"delta":{"content":" path"},"finish_reason":null}]}

data: {"id":"c","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}

data: {"id":"c","choices":[],"usage":{"prompt_tokens":5}}

data: [DONE]`,
			[]sseKind{sseOther, sseOther, sseToken, sseOther, sseToken, sseOther, sseOther, sseOther, sseOther, sseOther, sseDone}},
		{"llmedge", `: ping

data: {"content":"of"}

data: {"content":" path"}

event: done
data: {"content":"of path","model_type":"bench"}
`,
			[]sseKind{sseOther, sseOther, sseToken, sseOther, sseToken, sseOther, sseDone, sseOther, sseOther}},
		{"llmedge error", `data: {"content":"x"}

event: error
data: {"detail":"boom"}
`,
			[]sseKind{sseToken, sseOther, sseError, sseOther, sseOther}},
		{"escaped quote is text", `data: {"content":"\"hi\""}`, []sseKind{sseToken}},
		{"no space after colon", `data:{"content":"x"}`, []sseKind{sseToken}},
		{"event resets after a blank line", "event: other\ndata: {\"content\":\"x\"}\n\ndata: {\"content\":\"y\"}",
			[]sseKind{sseOther, sseOther, sseOther, sseToken}},
		{"truncated value", `data: {"content":"`, []sseKind{sseOther}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var s sseTokens
			lines := strings.Split(tt.stream, "\n")
			if len(lines) != len(tt.want) {
				t.Fatalf("test has %d lines but %d expectations", len(lines), len(tt.want))
			}
			for i, l := range lines {
				if got := s.line([]byte(l)); got != tt.want[i] {
					t.Errorf("line %d %q: got %d, want %d", i, l, got, tt.want[i])
				}
			}
		})
	}
}
