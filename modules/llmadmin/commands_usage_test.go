package llmadmin

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/llmedge/llmedge/ledger"
)

func TestWriteUsage(t *testing.T) {
	res := UsageResponse{By: ledger.ByModel, Usage: []ledger.Sum{
		{Key: "gemma", Requests: 2, PromptTokens: 10, CompletionTokens: 30},
		{Key: "qwen", Requests: 1, PromptTokens: 5, CachedTokens: 2, CompletionTokens: 7, Cost: 0.000019},
	}}
	for _, tc := range []struct {
		format string
		want   []string
	}{
		{"csv", []string{"model,requests,prompt_tokens,cached_tokens,completion_tokens,cost\n", "gemma,2,10,0,30,0\n", "qwen,1,5,2,7,0.000019\n"}},
		{"table", []string{"model", "REQUESTS", "COMPLETION", "gemma", "0.0000", "qwen"}},
	} {
		var b bytes.Buffer
		if err := writeUsage(&b, tc.format, res); err != nil {
			t.Fatal(err)
		}
		for _, w := range tc.want {
			if !strings.Contains(b.String(), w) {
				t.Errorf("%s lacks %q:\n%s", tc.format, w, b.String())
			}
		}
	}
	var b bytes.Buffer
	if err := writeUsage(&b, "json", res); err != nil {
		t.Fatal(err)
	}
	var back UsageResponse
	if err := json.Unmarshal(b.Bytes(), &back); err != nil || back.By != ledger.ByModel || len(back.Usage) != 2 || back.Usage[1] != res.Usage[1] {
		t.Fatalf("json: %+v, %v\n%s", back, err, b.String())
	}
	// Without grouping, the one total's line says so.
	b.Reset()
	_ = writeUsage(&b, "csv", UsageResponse{Usage: []ledger.Sum{{Requests: 3}}})
	if !strings.HasPrefix(b.String(), "total,requests") || !strings.Contains(b.String(), "\n,3,") {
		t.Fatalf("csv total:\n%s", b.String())
	}
}
