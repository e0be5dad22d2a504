package gateway

import (
	"strings"
	"testing"
)

// Unknown usage is flagged with "usage_reported": false and zero counts;
// known usage leaves the answer as it always was.
func TestServeUsageReported(t *testing.T) {
	for _, stream := range []bool{false, true} {
		for _, noUsage := range []bool{false, true} {
			g, _ := newTestGateway(t, map[string]script{"http://a": {deltas: []string{"Hel", "lo"}, noUsage: noUsage}}, "http://a")
			w := serve(g, request(stream))
			body := w.Body.String()
			if w.Code != 200 {
				t.Fatalf("stream=%v noUsage=%v: %d %s", stream, noUsage, w.Code, body)
			}
			if stream {
				i := strings.Index(body, "event: done\ndata: ")
				if i < 0 {
					t.Fatalf("no done event: %s", body)
				}
				body = body[i:]
			}
			wantFlag := strings.Contains(body, `"usage_reported":false`)
			zeros := strings.Contains(body, `"usage":{"prompt_tokens":0,"completion_tokens":0,"total_tokens":0}`)
			counted := strings.Contains(body, `"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}`)
			if noUsage != wantFlag || noUsage != zeros || noUsage == counted || strings.Contains(body, "usage_reported\":true") {
				t.Errorf("stream=%v noUsage=%v: body %s", stream, noUsage, body)
			}
		}
	}
}

// A replica's own API key (e.g. from discovery metadata) wins over the
// model's.
func TestServeReplicaAPIKey(t *testing.T) {
	g, fb := newTestGateway(t, map[string]script{"http://a": {deltas: []string{"x"}}}, "http://a")
	m := g.Models["qwen"]
	m.APIKey = "model-key"
	if w := serve(g, request(false)); w.Code != 200 || fb.last.APIKey != "model-key" {
		t.Fatalf("%d, key %q; want the model's", w.Code, fb.last.APIKey)
	}
	m.Pool.Replicas()[0].APIKey = "replica-key"
	if w := serve(g, request(false)); w.Code != 200 || fb.last.APIKey != "replica-key" {
		t.Fatalf("%d, key %q; want the replica's", w.Code, fb.last.APIKey)
	}
}

func TestContextLengthExceeded(t *testing.T) {
	for msg, want := range map[string]bool{
		"This model's maximum context length is 10 tokens. However, your request has 12 input tokens.": true,
		"The input (12 tokens) is longer than the model's context length (10 tokens).":                 true,
		"Input validation error: `inputs` tokens + `max_new_tokens` must be <= 4096. Given: 4000":      true,
		"the request exceeds the available context size, try increasing it":                            true,
		"temperature must be non-negative":                                                             false,
		"":                                                                                             false,
	} {
		if got := contextLengthExceeded(msg); got != want {
			t.Errorf("contextLengthExceeded(%q) = %v", msg, got)
		}
	}
	e := publicError("qwen", 0, errBadReq)
	if e.Status != 422 || e.Code != "context_length_exceeded" || e.Param != "messages" {
		t.Fatalf("%+v", e)
	}
}
