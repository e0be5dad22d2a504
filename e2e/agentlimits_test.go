package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// agentDoors are the doors, each with a small body of its own: the
// padding (JSON whitespace, which every door and engine skips) goes after
// its first member, so that a body of any size is the same request.
var agentDoors = []struct {
	name, path, head, tail string
}{
	{"native", "/tasks/assistant_inference", `{"model_type":"MODEL",`, `"messages":[{"role":"user","content":"hi"}]}`},
	{"openai chat", "/v1/chat/completions", `{"model":"MODEL",`, `"messages":[{"role":"user","content":"hi"}]}`},
	{"openai completions", "/v1/completions", `{"model":"MODEL",`, `"prompt":"hi","max_tokens":4}`},
	{"openai embeddings", "/v1/embeddings", `{"model":"MODEL",`, `"input":"hi"}`},
	{"openai responses", "/v1/responses", `{"model":"MODEL",`, `"input":"hi"}`},
	{"anthropic messages", "/v1/messages", `{"model":"MODEL",`, `"max_tokens":4,"messages":[{"role":"user","content":"hi"}]}`},
	{"anthropic count_tokens", "/v1/messages/count_tokens", `{"model":"MODEL",`, `"messages":[{"role":"user","content":"hi"}]}`},
}

// agentBody is the door's body for model, padded to size bytes.
func agentBody(head, tail, model string, size int) []byte {
	head = strings.Replace(head, "MODEL", model, 1)
	b := make([]byte, 0, size)
	b = append(b, head...)
	b = append(b, bytes.Repeat([]byte(" "), size-len(head)-len(tail))...)
	return append(b, tail...)
}

// TestAgentBodyLimits: the default max_body_size (32 MiB) on every door,
// over HTTPS: a body a little under it reaches the replica and is
// answered, one byte over it is the door's 413 naming the limit; and a
// model's own max_body_size and max_messages apply to its requests alone,
// after the body named it.
func TestAgentBodyLimits(t *testing.T) {
	sim := startSim(t, "-tokens", "2")
	g := startGateway(t, GatewayConfig{Models: map[string]string{
		"qwen":  staticModel(sim),
		"small": staticModel(sim) + "\n\t\t\tmax_body_size 64KiB\n\t\t\tmax_messages 3",
	}})
	key := credentialKinds[1].get(t, g, "demo")
	// Expect: 100-continue, as curl sends for large bodies: a body refused
	// from its Content-Length is answered before it is sent, rather than
	// the client finding the connection closed under its writing.
	tr := g.Client.Transport.(*http.Transport).Clone()
	tr.ExpectContinueTimeout = time.Minute
	client := &http.Client{Transport: tr}
	post := func(path string, body []byte) (int, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, "POST", g.Base+path, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Anthropic-Version", "2023-06-01")
		req.Header.Set("Expect", "100-continue")
		resp, err := client.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(raw)
	}
	const limit = 32 << 20
	for _, d := range agentDoors {
		t.Run(d.name, func(t *testing.T) {
			// The gateway's own edits (a reply cap, stream options) add a
			// few bytes on the way to the replica, whose limit is 32 MiB too.
			if status, raw := post(d.path, agentBody(d.head, d.tail, "qwen", limit-4096)); status != 200 {
				t.Fatalf("a body just under the limit: %d %.300s", status, raw)
			}
			status, raw := post(d.path, agentBody(d.head, d.tail, "qwen", limit+1))
			if status != 413 || !strings.Contains(raw, fmt.Sprintf("the limit is %d bytes (max_body_size)", limit)) || !doorShape(d.name, raw, "request_too_large") {
				t.Fatalf("a body a byte over the limit: %d %.300s", status, raw)
			}
			// A model's own limit: checked once the body names the model.
			status, raw = post(d.path, agentBody(d.head, d.tail, "small", 64<<10+1))
			if status != 413 || !strings.Contains(raw, "max_body_size is 65536 bytes") || !doorShape(d.name, raw, "request_too_large") {
				t.Fatalf("a body over the model's max_body_size: %d %.300s", status, raw)
			}
			if status, raw := post(d.path, agentBody(d.head, d.tail, "small", 64<<10)); status != 200 {
				t.Fatalf("a body at the model's max_body_size: %d %.300s", status, raw)
			}
		})
	}
	// max_messages in a model block: a list longer than the model's is
	// refused in the door's shape, the same list for another model passes.
	four := `"messages":[{"role":"user","content":"a"},{"role":"assistant","content":"b"},{"role":"user","content":"c"},{"role":"assistant","content":"d"}]`
	for _, d := range agentDoors {
		if !strings.Contains(d.tail, `"messages"`) {
			continue
		}
		tail := strings.Replace(d.tail, `"messages":[{"role":"user","content":"hi"}]`, four+`,"system":"s"`, 1)
		if d.name == "native" || strings.HasPrefix(d.name, "openai") {
			tail = strings.Replace(d.tail, `"messages":[{"role":"user","content":"hi"}]`, four, 1)
		}
		status, raw := post(d.path, agentBody(d.head, tail, "small", 1000))
		if status != 400 || !strings.Contains(raw, "max_messages is 3, the request has 4") {
			t.Errorf("%s: 4 messages for a model that takes 3: %d %.300s", d.name, status, raw)
		}
		if status, raw := post(d.path, agentBody(d.head, tail, "qwen", 1000)); status != 200 {
			t.Errorf("%s: 4 messages for a model without its own limit: %d %.300s", d.name, status, raw)
		}
	}
}

// doorShape reports whether raw is an error in the door's own shape, of
// the kind typ where the shape has one.
func doorShape(door, raw, typ string) bool {
	switch {
	case door == "native":
		return strings.HasPrefix(raw, `{"detail":`)
	case strings.HasPrefix(door, "anthropic"):
		return strings.HasPrefix(raw, `{"type":"error","error":{"type":"`+typ+`"`)
	}
	return strings.HasPrefix(raw, `{"error":{`) && strings.Contains(raw, `"code":"`+typ+`"`)
}
