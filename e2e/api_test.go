package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

type inferenceResponse struct {
	Content   string `json:"content"`
	ModelType string `json:"model_type"`
	Usage     struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
		TotalTokens      int `json:"total_tokens"`
	} `json:"usage"`
	ProcessingTime float64 `json:"processing_time"`
	InferenceTime  float64 `json:"inference_time"`
	MessageCount   int     `json:"message_count"`
}

var chat = map[string]any{"messages": []map[string]string{
	{"role": "system", "content": "You are terse."},
	{"role": "user", "content": "Say hello."},
	{"role": "assistant", "content": "Hello."},
	{"role": "user", "content": "Again, please."},
}}

func withModel(model string, extra ...any) map[string]any {
	m := map[string]any{"messages": chat["messages"], "model_type": model}
	for i := 0; i+1 < len(extra); i += 2 {
		m[extra[i].(string)] = extra[i+1]
	}
	return m
}

// directChat asks a simulator the same question without the gateway.
func directChat(t *testing.T, s *Sim, model string) (string, int, int) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"model": model, "messages": chat["messages"], "temperature": 0.3})
	resp, err := http.Post(s.URL+"/v1/chat/completions", "application/json", strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	var out struct {
		Choices []struct{ Message struct{ Content string } }
		Usage   struct {
			PromptTokens     int `json:"prompt_tokens"`
			CompletionTokens int `json:"completion_tokens"`
		}
	}
	readJSON(t, resp, &out)
	return out.Choices[0].Message.Content, out.Usage.PromptTokens, out.Usage.CompletionTokens
}

func TestInferenceBothModels(t *testing.T) {
	qwen := startSim(t, "-model", "qwen-upstream", "-seed", "1", "-tokens", "12")
	gemma := startSim(t, "-model", "gemma-upstream", "-seed", "2", "-tokens", "7")
	g := startGateway(t, GatewayConfig{Models: map[string]string{
		"qwen":  staticModel(qwen) + "\n\t\t\tupstream_model qwen-upstream",
		"gemma": staticModel(gemma) + "\n\t\t\tupstream_model gemma-upstream",
	}})
	tok := g.Token(t, "demo", "demo", "")

	for _, tc := range []struct {
		model string
		sim   *Sim
		body  map[string]any
	}{
		{"qwen", qwen, map[string]any{"messages": chat["messages"]}}, // default model_type
		{"gemma", gemma, withModel("gemma")},
	} {
		t.Run(tc.model, func(t *testing.T) {
			resp := g.Infer(t, tok, tc.body)
			var out inferenceResponse
			raw := readJSON(t, resp, &out)
			if resp.StatusCode != 200 {
				t.Fatalf("%s: %s", resp.Status, raw)
			}
			want, prompt, completion := directChat(t, tc.sim, tc.model+"-upstream")
			if out.Content != want || out.Content == "" {
				t.Fatalf("content %q, the replica says %q", out.Content, want)
			}
			if out.ModelType != tc.model || out.MessageCount != 4 {
				t.Fatalf("model_type %q message_count %d", out.ModelType, out.MessageCount)
			}
			if out.Usage.PromptTokens != prompt || out.Usage.CompletionTokens != completion ||
				out.Usage.TotalTokens != prompt+completion || completion == 0 {
				t.Fatalf("usage %+v, replica %d/%d", out.Usage, prompt, completion)
			}
			if out.InferenceTime <= 0 || out.ProcessingTime < out.InferenceTime {
				t.Fatalf("timings: processing %v inference %v", out.ProcessingTime, out.InferenceTime)
			}
			st := resp.Header.Get("Server-Timing")
			for _, stage := range []string{"auth;dur=", "validate;dur=", "queue;dur=", "upstream;dur=", "total;dur="} {
				if !strings.Contains(st, stage) {
					t.Fatalf("Server-Timing %q lacks %s", st, stage)
				}
			}
			if len(resp.Header.Get("X-Request-ID")) < 16 {
				t.Fatalf("no X-Request-ID")
			}
			last := tc.sim.Stats(t).LastRequest
			if last.Model != tc.model+"-upstream" || len(last.Messages) != 4 || last.Temperature != 0.3 {
				t.Fatalf("replica got %+v", last)
			}
		})
	}
}

func TestStreaming(t *testing.T) {
	sim := startSim(t, "-seed", "5", "-tokens", "9", "-ttft", "50ms", "-itl", "10ms")
	g := startGateway(t, GatewayConfig{Models: map[string]string{"qwen": staticModel(sim), "gemma": staticModel(sim)}})
	tok := g.Token(t, "demo", "demo", "")

	resp := g.Infer(t, tok, withModel("gemma", "stream", true))
	defer resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("%s %s", resp.Status, resp.Header.Get("Content-Type"))
	}
	evs := readEvents(t, resp.Body)
	var text strings.Builder
	var deltas int
	for _, ev := range evs[:len(evs)-1] {
		if ev.Comment {
			continue
		}
		if ev.Name != "" {
			t.Fatalf("unexpected event %q before done", ev.Name)
		}
		var d struct{ Content string }
		if err := json.Unmarshal([]byte(ev.Data), &d); err != nil {
			t.Fatal(err)
		}
		text.WriteString(d.Content)
		deltas++
	}
	done := evs[len(evs)-1]
	if done.Name != "done" {
		t.Fatalf("last event %+v", done)
	}
	var out inferenceResponse
	if err := json.Unmarshal([]byte(done.Data), &out); err != nil {
		t.Fatal(err)
	}
	if deltas != 9 || out.Content != text.String() || out.Usage.CompletionTokens != 9 || out.ModelType != "gemma" || out.MessageCount != 4 {
		t.Fatalf("%d deltas %q, done %+v", deltas, text.String(), out)
	}
	if out.InferenceTime < 0.05 || out.ProcessingTime < out.InferenceTime {
		t.Fatalf("timings %+v", out)
	}
	if !sim.Stats(t).LastRequest.IncludeUsage {
		t.Fatal("the gateway did not ask the replica for streamed usage")
	}
}

func TestStreamPingsWhileWaiting(t *testing.T) {
	sim := startSim(t, "-ttft", "900ms", "-tokens", "2")
	g := startGateway(t, GatewayConfig{Options: "\t\tping_interval 200ms", Models: map[string]string{"qwen": staticModel(sim), "gemma": staticModel(sim)}})
	resp := g.Infer(t, g.Token(t, "demo", "demo", ""), withModel("qwen", "stream", true))
	defer resp.Body.Close()
	evs := readEvents(t, resp.Body)
	pings := 0
	for _, ev := range evs {
		if ev.Comment && ev.Data == "ping" {
			pings++
		} else {
			break
		}
	}
	if pings < 2 || evs[len(evs)-1].Name != "done" {
		t.Fatalf("%d pings before the first token; events %+v", pings, evs)
	}
}

func TestStreamErrorAfterStart(t *testing.T) {
	sim := startSim(t, "-tokens", "20", "-drop-after", "3")
	g := startGateway(t, GatewayConfig{Models: map[string]string{"qwen": staticModel(sim), "gemma": staticModel(sim)}})
	resp := g.Infer(t, g.Token(t, "demo", "demo", ""), withModel("qwen", "stream", true))
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %s", resp.Status)
	}
	evs := readEvents(t, resp.Body)
	last := evs[len(evs)-1]
	if last.Name != "error" || !strings.Contains(last.Data, `"detail"`) {
		t.Fatalf("want a final error event, got %+v", evs)
	}
	if len(evs) != 4 {
		t.Fatalf("want 3 deltas then the error, got %+v", evs)
	}
}

func TestClientDisconnectCancelsReplica(t *testing.T) {
	sim := startSim(t, "-tokens", "500", "-itl", "50ms")
	g := startGateway(t, GatewayConfig{Models: map[string]string{"qwen": staticModel(sim), "gemma": staticModel(sim)}})
	tok := g.Token(t, "demo", "demo", "")
	for _, stream := range []bool{true, false} {
		before := sim.Stats(t).Cancelled
		ctx, cancel := context.WithCancel(context.Background())
		body, _ := json.Marshal(withModel("qwen", "stream", stream))
		req, _ := http.NewRequestWithContext(ctx, "POST", g.Base+"/tasks/assistant_inference", strings.NewReader(string(body)))
		req.Header.Set("Authorization", "Bearer "+tok)
		errc := make(chan error, 1)
		firstEvent := make(chan struct{})
		go func() {
			resp, err := g.Client.Do(req)
			if err == nil {
				br := bufio.NewReader(resp.Body)
				if _, err = br.ReadString('\n'); err == nil {
					close(firstEvent)
					_, err = io.ReadAll(br)
				}
				resp.Body.Close()
			}
			errc <- err
		}()
		// Mid-answer: the replica generates (it has no time to first
		// token) and, for a stream, the client has its first words. A
		// non-streamed answer shows nothing before its end.
		waitFor(t, 5*time.Second, func() bool { return sim.Stats(t).InFlight == 1 })
		if stream {
			select {
			case <-firstEvent:
			case err := <-errc:
				t.Fatalf("the stream ended before its first event: %v", err)
			}
		}
		cancel()
		<-errc
		waitFor(t, 2*time.Second, func() bool {
			st := sim.Stats(t)
			return st.Cancelled == before+1 && st.InFlight == 0
		})
	}
}

func TestTokensSurviveRestart(t *testing.T) {
	sim := startSim(t)
	g := startGateway(t, GatewayConfig{Models: map[string]string{"qwen": staticModel(sim), "gemma": staticModel(sim)}})
	tok := g.Token(t, "demo", "demo", "")
	var jwksBefore, jwksAfter json.RawMessage
	resp, _ := g.Client.Get(g.Base + "/.well-known/jwks.json")
	readJSON(t, resp, &jwksBefore)

	g.Restart(t)
	resp = g.Infer(t, tok, withModel("qwen"))
	if b := readJSON(t, resp, nil); resp.StatusCode != 200 {
		t.Fatalf("token from before the restart: %s %s", resp.Status, b)
	}
	resp, _ = g.Client.Get(g.Base + "/.well-known/jwks.json")
	readJSON(t, resp, &jwksAfter)
	if string(jwksBefore) != string(jwksAfter) {
		t.Fatal("signing key changed across restart")
	}
}

func TestRetryOnDeadReplica(t *testing.T) {
	dead := startSim(t)
	alive := startSim(t, "-seed", "3")
	dead.Kill()
	g := startGateway(t, GatewayConfig{Models: map[string]string{
		"qwen":  staticModel(dead, alive) + "\n\t\t\tlb_policy round_robin",
		"gemma": staticModel(alive),
	}})
	tok := g.Token(t, "demo", "demo", "")
	for i := 0; i < 6; i++ {
		for _, stream := range []bool{false, true} {
			resp := g.Infer(t, tok, withModel("qwen", "stream", stream))
			if b := readJSON(t, resp, nil); resp.StatusCode != 200 || strings.Contains(string(b), "event: error") {
				t.Fatalf("request %d: %s %s", i, resp.Status, b)
			}
		}
	}
}

func TestJWKSAndHealth(t *testing.T) {
	sim := startSim(t)
	g := startGateway(t, GatewayConfig{Models: map[string]string{"qwen": staticModel(sim), "gemma": "\t\t\tprotocol openai"}})
	var jwks struct {
		Keys []struct{ Kty, Crv, Kid, Alg, X string }
	}
	resp, _ := g.Client.Get(g.Base + "/.well-known/jwks.json")
	readJSON(t, resp, &jwks)
	if len(jwks.Keys) != 1 || jwks.Keys[0].Kty != "OKP" || jwks.Keys[0].Crv != "Ed25519" || jwks.Keys[0].Kid == "" || jwks.Keys[0].Alg != "EdDSA" {
		t.Fatalf("jwks %+v", jwks)
	}
	resp, _ = g.Client.Get(g.Base + "/healthz")
	readJSON(t, resp, nil)
	if resp.StatusCode != 200 {
		t.Fatalf("healthz %s", resp.Status)
	}
	// gemma has no replica, and is not required: the instance is ready,
	// and the public answer names nothing.
	resp, _ = g.Client.Get(g.Base + "/readyz")
	if b := readJSON(t, resp, nil); resp.StatusCode != 200 || string(b) != `{"status":"ready"}`+"\n" {
		t.Fatalf("readyz %s %s", resp.Status, b)
	}
	// The operators' report has the models and the reason.
	code, rep := g.report(t)
	if code != 200 || rep.Status != "degraded" || !rep.Models["qwen"].Ready || rep.Models["gemma"].Ready ||
		rep.Models["gemma"].Reason != "no replicas" {
		t.Fatalf("the admin report: %d %+v", code, rep)
	}
}
