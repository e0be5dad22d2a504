package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmedge/llmedge/internal/consultest"
)

// Rolling restarts (docs/resilience.md): every replica of a model
// killed and started again on its port in turn, as Kubernetes and every
// deployment tool upgrade them, under streaming load on every door that
// continues a stream. No client notices.

// nativeStream is what a client read of one native stream.
type nativeStream struct {
	text, end, trailer string
	usage              struct{ PromptTokens, CompletionTokens int }
	err                error
}

// readNativeStream reads a whole /tasks/assistant_inference stream; onText,
// when set, hears each delta.
func readNativeStream(resp *http.Response, onText func()) nativeStream {
	defer resp.Body.Close()
	var r nativeStream
	var text strings.Builder
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	name := ""
	for sc.Scan() {
		line := sc.Text()
		if ev, ok := strings.CutPrefix(line, "event: "); ok {
			name = ev
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		switch name {
		case "":
			var d struct{ Content string }
			_ = json.Unmarshal([]byte(data), &d)
			text.WriteString(d.Content)
			if onText != nil {
				onText()
			}
		case "done":
			r.end = "done"
			var ans struct {
				Content string
				Usage   struct {
					PromptTokens     int `json:"prompt_tokens"`
					CompletionTokens int `json:"completion_tokens"`
				}
			}
			_ = json.Unmarshal([]byte(data), &ans)
			r.usage.PromptTokens, r.usage.CompletionTokens = ans.Usage.PromptTokens, ans.Usage.CompletionTokens
			if ans.Content != text.String() {
				r.err = fmt.Errorf("done has %q, the deltas %q", ans.Content, text.String())
			}
		default:
			r.end = name + ": " + data
		}
		name = ""
	}
	if err := sc.Err(); err != nil && r.err == nil {
		r.err = err
	}
	r.text = text.String()
	r.trailer = resp.Trailer.Get("Llmedge-Route")
	return r
}

// readCompletionStream reads a whole text completions stream.
func readCompletionStream(resp *http.Response, onText func()) (openAIStream, error) {
	defer resp.Body.Close()
	s := openAIStream{ids: map[string]bool{}, created: map[string]bool{}}
	var text strings.Builder
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		switch {
		case !ok:
			continue
		case data == "[DONE]":
			s.done = true
			continue
		}
		var c struct {
			ID      string `json:"id"`
			Created int64  `json:"created"`
			Error   any    `json:"error"`
			Choices []struct {
				Text         string  `json:"text"`
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
			Usage map[string]any `json:"usage"`
		}
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			return s, fmt.Errorf("chunk %q: %w", data, err)
		}
		if c.Error != nil {
			s.errData = data
			continue
		}
		s.ids[c.ID] = true
		s.created[strconv.FormatInt(c.Created, 10)] = true
		for _, ch := range c.Choices {
			text.WriteString(ch.Text)
			if ch.Text != "" {
				onText()
			}
			if ch.FinishReason != nil {
				s.finishes = append(s.finishes, *ch.FinishReason)
			}
		}
		if c.Usage != nil {
			s.usage = c.Usage
		}
	}
	s.text = text.String()
	s.trailer = resp.Trailer.Get("Llmedge-Route")
	return s, sc.Err()
}

// cleanCompletion is the unbroken text completion of prompt from model:
// its text and usage.
func cleanCompletion(t *testing.T, g *Gateway, tok, model, prompt string) (string, float64, float64) {
	t.Helper()
	resp := g.v1(t, "POST", "/v1/completions", tok, fmt.Sprintf(`{"model":%q,"prompt":%q,"max_tokens":1000}`, model, prompt))
	var c struct {
		Choices []struct{ Text string }
		Usage   struct {
			PromptTokens     float64 `json:"prompt_tokens"`
			CompletionTokens float64 `json:"completion_tokens"`
		}
	}
	readJSON(t, resp, &c)
	if len(c.Choices) != 1 || c.Usage.CompletionTokens == 0 {
		t.Fatalf("clean completion %+v", c)
	}
	return c.Choices[0].Text, c.Usage.PromptTokens, c.Usage.CompletionTokens
}

// hops is the number of continuations a Llmedge-Route trailer counts.
func hops(trailer string) int {
	m := afterRE.FindStringSubmatch(trailer)
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// restartSim kills s (SIGKILL, as a crashed or replaced replica) and,
// after down, starts a new simulator with args on its port.
func restartSim(t *testing.T, s *Sim, down time.Duration, args ...string) *Sim {
	t.Helper()
	u, err := url.Parse(s.URL)
	if err != nil {
		t.Fatal(err)
	}
	s.Kill()
	time.Sleep(down)
	n := startSim(t, append(append([]string(nil), args...), "-addr", u.Host)...)
	if n.URL != s.URL {
		t.Fatalf("restarted on %s, want %s", n.URL, s.URL)
	}
	return n
}

// TestRollingRestart: three replicas, each killed and a new one started
// on its port 2 s later, the next one killed 4 s after the one before,
// under streams that last about 6 s each on the native door and the
// OpenAI door's chat completions, started all along the restart. Every
// stream completes with the whole text of the unbroken answer and its
// usage, one finish, no error event: a stream is continued as often as
// its replicas die, and a restarted replica takes continuations as soon
// as its probe passes, its breaker (opened by its streams' failures)
// closed rather than waiting out its open timeout.
func TestRollingRestart(t *testing.T) {
	args := []string{"-tokens", "200", "-itl", "30ms", "-seed", "9", "-continue-completions"}
	sims := []*Sim{startSim(t, args...), startSim(t, args...), startSim(t, args...)}
	clean := startSim(t, "-tokens", "200", "-seed", "9") // the same answers, at once
	g := startGateway(t, GatewayConfig{Models: map[string]string{
		"qwen":  staticModel(sims...) + "\n\t\t\tlb_policy round_robin",
		"clean": staticModel(clean),
	}})
	tok := g.Token(t, "demo", "demo", "")

	type outcome struct {
		door, prompt string
		ok           bool
		continued    bool
		hops         int // the continuations its trailer counts
		problem      string
	}
	const workers, rounds = 9, 6
	doors := []string{"native", "openai", "completions", "anthropic"}
	type answer struct {
		text               string
		prompt, completion float64
	}
	want := map[string]answer{} // by prompt
	promptOf := func(door string, worker, round int) string {
		return fmt.Sprintf("rolling %s %d %d", door, worker, round)
	}
	for w := range workers {
		for _, door := range doors {
			for r := range rounds {
				p := promptOf(door, w, r)
				clean := cleanAnswer
				if door == "completions" {
					clean = cleanCompletion
				}
				text, pt, ct := clean(t, g, tok, "clean", p)
				want[p] = answer{text, pt, ct}
			}
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	post := func(path, body string) (*http.Response, error) {
		req, _ := http.NewRequestWithContext(ctx, "POST", g.Base+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Anthropic-Version", "2023-06-01") // read by the Anthropic door alone
		resp, err := g.Client.Do(req)
		if err == nil && resp.StatusCode != 200 {
			resp.Body.Close()
			return nil, fmt.Errorf("%s", resp.Status)
		}
		return resp, err
	}
	var mu sync.Mutex
	var outcomes []outcome
	var stop atomic.Bool
	var started atomic.Int32 // streams that had their first text
	var wg sync.WaitGroup
	stream := func(door, prompt string) {
		w := want[prompt]
		o := outcome{door: door, prompt: prompt}
		onText := sync.OnceFunc(func() { started.Add(1) })
		switch door {
		case "native":
			resp, err := post("/tasks/assistant_inference",
				fmt.Sprintf(`{"model_type":"qwen","stream":true,"messages":[{"role":"user","content":%q}]}`, prompt))
			if err != nil {
				o.problem = err.Error()
				break
			}
			r := readNativeStream(resp, onText)
			o.continued, o.hops = r.trailer != "", hops(r.trailer)
			switch {
			case r.err != nil:
				o.problem = r.err.Error()
			case r.end != "done":
				o.problem = "ended with " + r.end
			case r.text != w.text:
				o.problem = fmt.Sprintf("text %q, want %q", r.text, w.text)
			case r.usage.PromptTokens != int(w.prompt) || r.usage.CompletionTokens != int(w.completion):
				o.problem = fmt.Sprintf("usage %+v, want %v+%v", r.usage, w.prompt, w.completion)
			case o.continued && !afterRE.MatchString(r.trailer):
				o.problem = "trailer " + r.trailer
			default:
				o.ok = true
			}
		case "openai":
			resp, err := post("/v1/chat/completions",
				fmt.Sprintf(`{"model":"qwen","messages":[{"role":"user","content":%q}],"stream":true,"stream_options":{"include_usage":true}}`, prompt))
			if err != nil {
				o.problem = err.Error()
				break
			}
			s := readOpenAIStream(t, resp, func(string) { onText() })
			o.continued, o.hops = s.trailer != "", hops(s.trailer)
			switch {
			case s.errData != "" || !s.done:
				o.problem = fmt.Sprintf("ended with error %q, [DONE] %v", s.errData, s.done)
			case s.text != w.text:
				o.problem = fmt.Sprintf("text %q, want %q", s.text, w.text)
			case len(s.ids) != 1 || len(s.created) != 1 || s.roles != 1 || len(s.finishes) != 1 || s.finishes[0] != "stop":
				o.problem = fmt.Sprintf("ids %v, created %v, %d roles, finishes %q: not one stream", s.ids, s.created, s.roles, s.finishes)
			case s.usage == nil || s.usage["prompt_tokens"] != w.prompt || s.usage["completion_tokens"] != w.completion:
				o.problem = fmt.Sprintf("usage %v, want %v+%v", s.usage, w.prompt, w.completion)
			case o.continued && !afterRE.MatchString(s.trailer):
				o.problem = "trailer " + s.trailer
			default:
				o.ok = true
			}
		case "completions":
			resp, err := post("/v1/completions",
				fmt.Sprintf(`{"model":"qwen","prompt":%q,"max_tokens":1000,"stream":true,"stream_options":{"include_usage":true}}`, prompt))
			if err != nil {
				o.problem = err.Error()
				break
			}
			s, err := readCompletionStream(resp, onText)
			o.continued, o.hops = s.trailer != "", hops(s.trailer)
			switch {
			case err != nil:
				o.problem = err.Error()
			case s.errData != "" || !s.done:
				o.problem = fmt.Sprintf("ended with error %q, [DONE] %v", s.errData, s.done)
			case s.text != w.text:
				o.problem = fmt.Sprintf("text %q, want %q", s.text, w.text)
			case len(s.ids) != 1 || len(s.created) != 1 || len(s.finishes) != 1 || s.finishes[0] != "stop":
				o.problem = fmt.Sprintf("ids %v, created %v, finishes %q: not one stream", s.ids, s.created, s.finishes)
			case s.usage == nil || s.usage["prompt_tokens"] != w.prompt || s.usage["completion_tokens"] != w.completion:
				o.problem = fmt.Sprintf("usage %v, want %v+%v", s.usage, w.prompt, w.completion)
			case o.continued && !afterRE.MatchString(s.trailer):
				o.problem = "trailer " + s.trailer
			default:
				o.ok = true
			}
		case "anthropic":
			resp, err := post("/v1/messages",
				fmt.Sprintf(`{"model":"qwen","max_tokens":1000,"stream":true,"messages":[{"role":"user","content":%q}]}`, prompt))
			if err != nil {
				o.problem = err.Error()
				break
			}
			onText()
			s := readStream(t, resp)
			trailer := resp.Trailer.Get("Llmedge-Route")
			o.continued, o.hops = trailer != "", hops(trailer)
			deltas := 0
			for _, n := range s.names {
				if n == "content_block_delta" {
					deltas++
				}
			}
			switch {
			case s.err != "":
				o.problem = "ended with error " + s.err
			case s.text != w.text:
				o.problem = fmt.Sprintf("text %q, want %q", s.text, w.text)
			case fmt.Sprint(s.names) != fmt.Sprint(sequence(deltas)) || len(s.blocks) != 1 || s.blocks[0] != "text" || s.stop != "end_turn":
				o.problem = fmt.Sprintf("events %v, blocks %v, stop %q: not one message", s.names, s.blocks, s.stop)
			case s.usage.input != int(w.prompt) || s.usage.output != int(w.completion):
				o.problem = fmt.Sprintf("usage %+v, want %v+%v", s.usage, w.prompt, w.completion)
			case o.continued && !afterRE.MatchString(trailer):
				o.problem = "trailer " + trailer
			default:
				o.ok = true
			}
		}
		mu.Lock()
		outcomes = append(outcomes, o)
		mu.Unlock()
	}
	// Nine clients per door, each streaming one answer after another
	// until the restart is over, started a third of a second apart: at
	// each kill, streams are at every point of their answers.
	for w := range workers {
		for _, door := range doors {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for round := 0; round < rounds && !stop.Load() && ctx.Err() == nil; round++ {
					stream(door, promptOf(door, w, round))
				}
			}()
		}
		time.Sleep(300 * time.Millisecond)
	}
	waitFor(t, 20*time.Second, func() bool { return started.Load() >= 2*workers })

	begin := time.Now()
	for i := range sims {
		if i > 0 {
			time.Sleep(time.Until(begin.Add(time.Duration(i) * 4 * time.Second)))
		}
		if sims[i].Stats(t).InFlight == 0 {
			t.Errorf("replica %d had no stream in flight when killed", i)
		}
		sims[i] = restartSim(t, sims[i], 2*time.Second, args...)
	}
	time.Sleep(2 * time.Second) // new streams for the last one restarted
	stop.Store(true)
	wg.Wait()

	completed, continued, multi := 0, 0, 0
	byDoor := map[string]int{} // continued streams
	for _, o := range outcomes {
		if o.continued {
			continued++
			byDoor[o.door]++
		}
		if o.hops > 1 {
			multi++
		}
		if o.ok {
			completed++
			continue
		}
		t.Errorf("%s stream %q: %s", o.door, o.prompt, o.problem)
	}
	t.Logf("%d of %d streams completed whole, %d of them continued, %d more than once", completed, len(outcomes), continued, multi)
	t.Logf("continued by door: %v", byDoor)
	for _, door := range doors {
		if byDoor[door] == 0 {
			t.Errorf("no %s stream was continued: the door's continuation went untested", door)
		}
	}
	if multi == 0 {
		t.Error("no stream was continued more than once: the continuation of a continuation went untested")
	}
	if continued < 2*workers/3 {
		t.Errorf("%d streams continued: the restarts broke fewer streams than they should have", continued)
	}
	for i, s := range sims {
		if st := s.Stats(t); st.Completed == 0 {
			t.Errorf("restarted replica %d completed no stream (%+v)", i, st)
		}
	}
}

// TestRestartedReplicaReadmitted: a replica whose breaker opened while it
// was down serves requests as soon as its health probe passes again,
// long before the breaker's open timeout: a static replica (probed by the
// gateway), and one listed in Consul whose restart Consul did not notice
// (no check: it stays listed), which the gateway probes while its breaker
// is open.
func TestRestartedReplicaReadmitted(t *testing.T) {
	args := []string{"-tokens", "5", "-seed", "3"}
	breaker := "\n\t\t\tlb_policy round_robin\n\t\t\tbreaker {\n\t\t\t\tconsecutive_failures 1\n\t\t\t\topen_timeout 5m\n\t\t\t}"
	for _, source := range []string{"static", "consul"} {
		t.Run(source, func(t *testing.T) {
			a, b := startSim(t, args...), startSim(t, args...)
			cfg := GatewayConfig{Models: map[string]string{"qwen": staticModel(a, b) + breaker}}
			if source == "consul" {
				agent := startConsul(t)
				agent.Register(t, consultest.Instance("llm-qwen", "a", a.Port(t), nil))
				agent.Register(t, consultest.Instance("llm-qwen", "b", b.Port(t), nil))
				cfg = GatewayConfig{Options: "\t\tconsul " + agent.Addr,
					Models: map[string]string{"qwen": "\t\t\tconsul_service llm-qwen" + breaker}}
			}
			g := startGateway(t, cfg)
			if source == "consul" {
				g.waitReplicas(t, "qwen", 2, 10*time.Second)
			}
			tok := g.Token(t, "demo", "demo", "")
			ask := func() {
				t.Helper()
				resp := g.Infer(t, tok, map[string]any{"model_type": "qwen", "messages": []map[string]string{{"role": "user", "content": "hi"}}})
				readJSON(t, resp, &map[string]any{})
			}
			u, _ := url.Parse(a.URL)
			a.Kill()
			// Requests find a's connection refused (and are answered by
			// b): its breaker opens for five minutes.
			waitFor(t, 10*time.Second, func() bool {
				ask()
				return strings.Contains(g.Log(), `"replica circuit breaker open"`) && strings.Contains(g.Log(), a.URL)
			})
			a = startSim(t, append(args, "-addr", u.Host)...)
			restarted := time.Now()
			waitFor(t, 10*time.Second, func() bool {
				ask()
				return a.Stats(t).Completed > 0
			})
			t.Logf("the restarted replica served a request %v after it started", time.Since(restarted).Round(100*time.Millisecond))
			if !strings.Contains(g.Log(), "replica readmitted") {
				t.Error("the log does not say the replica was readmitted")
			}
		})
	}
}
