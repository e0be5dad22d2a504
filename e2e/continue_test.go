package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmedge/llmedge/internal/ollamatest"
)

// Mid-stream continuation: a replica that fails after the client saw
// text has its stream continued on another replica, spliced into the
// same client stream (docs/resilience.md).

// openAIStream is what a client read of one OpenAI chat stream.
type openAIStream struct {
	ids, created map[string]bool
	roles        int
	finishes     []string
	text         string
	usage        map[string]any
	done         bool   // [DONE] came last
	errData      string // an error event's data, if one came
	route        string // the Llmedge-Route header
	trailer      string // the Llmedge-Route trailer
	toolCalls    int
}

// readOpenAIStream reads a whole chat completions stream; onText, when
// set, hears the text as it comes.
func readOpenAIStream(t *testing.T, resp *http.Response, onText func(string)) openAIStream {
	t.Helper()
	defer resp.Body.Close()
	s := openAIStream{ids: map[string]bool{}, created: map[string]bool{}, route: resp.Header.Get("Llmedge-Route")}
	var text strings.Builder
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if data == "[DONE]" {
			s.done = true
			continue
		}
		if s.done {
			t.Errorf("an event after [DONE]: %s", data)
		}
		var c struct {
			ID      string `json:"id"`
			Created int64  `json:"created"`
			Error   any    `json:"error"`
			Choices []struct {
				Delta struct {
					Role      *string           `json:"role"`
					Content   *string           `json:"content"`
					ToolCalls []json.RawMessage `json:"tool_calls"`
				} `json:"delta"`
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
			Usage map[string]any `json:"usage"`
		}
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			t.Fatalf("chunk %q: %v", data, err)
		}
		if c.Error != nil {
			s.errData = data
			continue
		}
		s.ids[c.ID] = true
		s.created[strconv.FormatInt(c.Created, 10)] = true
		for _, ch := range c.Choices {
			if ch.Delta.Role != nil {
				s.roles++
			}
			if ch.Delta.Content != nil {
				text.WriteString(*ch.Delta.Content)
				if onText != nil && *ch.Delta.Content != "" {
					onText(*ch.Delta.Content)
				}
			}
			s.toolCalls += len(ch.Delta.ToolCalls)
			if ch.FinishReason != nil {
				s.finishes = append(s.finishes, *ch.FinishReason)
			}
		}
		if c.Usage != nil {
			s.usage = c.Usage
		}
	}
	if err := sc.Err(); err != nil {
		t.Errorf("reading the stream: %v", err)
	}
	s.text = text.String()
	s.trailer = resp.Trailer.Get("Llmedge-Route")
	return s
}

// chatStream opens a chat completions stream of content to model.
func chatStream(t *testing.T, g *Gateway, tok, model, content string, extra string) *http.Response {
	t.Helper()
	body := fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":%q}],"stream":true,"stream_options":{"include_usage":true}%s}`,
		model, content, extra)
	resp := g.v1(t, "POST", "/v1/chat/completions", tok, body)
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Fatalf("%s: %s", resp.Status, b)
	}
	return resp
}

// cleanAnswer is the unbroken answer to content from model: its text and
// usage.
func cleanAnswer(t *testing.T, g *Gateway, tok, model, content string) (string, float64, float64) {
	t.Helper()
	resp := g.v1(t, "POST", "/v1/chat/completions", tok,
		fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":%q}]}`, model, content))
	var c chatCompletion
	readJSON(t, resp, &c)
	if len(c.Choices) != 1 || c.Choices[0].Message == nil || c.Usage == nil {
		t.Fatalf("clean answer %+v", c)
	}
	return c.Choices[0].Message.Content, float64(c.Usage.PromptTokens), float64(c.Usage.CompletionTokens)
}

var afterRE = regexp.MustCompile(`; continued=(\d+); after=([\d,]+)$`)

// checkSpliced fails unless s reads as one unbroken stream of want, with
// usage prompt+completion, continued once or more.
func checkSpliced(t *testing.T, s openAIStream, want string, prompt, completion float64) (after int) {
	t.Helper()
	if s.errData != "" || !s.done {
		t.Fatalf("stream ended with error %q, [DONE] %v", s.errData, s.done)
	}
	if s.text != want {
		t.Errorf("text %q, want %q", s.text, want)
	}
	if len(s.ids) != 1 || len(s.created) != 1 || s.roles != 1 || len(s.finishes) != 1 || s.finishes[0] != "stop" {
		t.Errorf("ids %v, created %v, %d roles, finishes %q: not one stream", s.ids, s.created, s.roles, s.finishes)
	}
	u := s.usage
	if u == nil || u["prompt_tokens"] != prompt || u["completion_tokens"] != completion || u["total_tokens"] != prompt+completion {
		t.Errorf("usage %v, want %v+%v", u, prompt, completion)
	}
	m := afterRE.FindStringSubmatch(s.trailer)
	if m == nil || !strings.HasPrefix(s.trailer, "policy=") {
		t.Fatalf("trailer %q (header %q)", s.trailer, s.route)
	}
	if n, _ := strconv.Atoi(m[1]); u != nil && u["llmedge_continuations"] != float64(n) {
		t.Errorf("usage %v marks not the %d continuations", u, n)
	}
	after, _ = strconv.Atoi(strings.Split(m[2], ",")[0])
	return after
}

// TestContinueUnderLoad: 20 streams at once, each broken by its replica
// at a point of its own (a connection closed abruptly), all complete as
// one stream each: no error event, the whole text, one finish reason,
// the unbroken answer's usage; the trailer, the metrics and the log tell
// where they were continued.
func TestContinueUnderLoad(t *testing.T) {
	args := []string{"-tokens", "40", "-itl", "3ms", "-seed", "5"}
	faulty := append(args[:len(args):len(args)], "-drop-after", "3", "-fault-spread", "30")
	a, b := startSim(t, faulty...), startSim(t, faulty...)
	clean := startSim(t, args...)
	logFile := filepath.Join(t.TempDir(), "access.log")
	g := startGateway(t, GatewayConfig{
		Models: map[string]string{
			"qwen":  staticModel(a, b) + "\n\t\t\tbreaker off",
			"clean": staticModel(clean),
		},
		Site: "log {\n\t\toutput file " + logFile + "\n\t\tformat json\n\t}\n\tllm_gateway",
	})
	tok := g.Token(t, "demo", "demo", "")

	const n = 20
	type outcome struct {
		s                 openAIStream
		want              string
		prompt, completed float64
	}
	out := make([]outcome, n)
	for i := range out {
		out[i].want, out[i].prompt, out[i].completed = cleanAnswer(t, g, tok, "clean", fmt.Sprintf("question number %d", i))
	}
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i].s = readOpenAIStream(t, chatStream(t, g, tok, "qwen", fmt.Sprintf("question number %d", i), ""), nil)
		}()
	}
	wg.Wait()
	points := map[int]bool{}
	for i, o := range out {
		t.Run(strconv.Itoa(i), func(t *testing.T) {
			after := checkSpliced(t, o.s, o.want, o.prompt, o.completed)
			if after < 3 || after >= 33 {
				t.Errorf("continued after %d tokens, want 3..32", after)
			}
			points[after] = true
		})
	}
	if len(points) < 5 {
		t.Errorf("20 streams broken at %d points only", len(points))
	}
	if st := a.Stats(t).Requests + b.Stats(t).Requests; st != 2*n {
		t.Errorf("the replicas had %d requests, want %d: one and one continuation per stream", st, 2*n)
	}
	metrics := g.scrape(t)
	if v := metricValue(t, metrics, `llmedge_continuations_total{model_type="qwen",outcome="completed"}`); v != n {
		t.Errorf("llmedge_continuations_total completed = %v, want %d", v, n)
	}
	if v := metricValue(t, metrics, `llmedge_retries_total{model_type="qwen"}`); v > 0 {
		t.Errorf("continuations counted as retries: %v", v)
	}
	if c := g.logCount("stream continues on another replica"); c != n {
		t.Errorf("%d continuations logged, want %d", c, n)
	}
	// The access log: each stream's entry says after how many tokens it
	// was continued; no text reaches any log.
	var entries []map[string]any
	waitFor(t, 5*time.Second, func() bool {
		entries = entries[:0]
		b, _ := os.ReadFile(logFile)
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			var e map[string]any
			if json.Unmarshal([]byte(line), &e) == nil && e["model_type"] == "qwen" {
				entries = append(entries, e)
			}
		}
		return len(entries) >= n
	})
	for _, e := range entries {
		after, _ := e["continued_after"].([]any)
		if len(after) != 1 || after[0].(float64) < 3 || e["attempts"] != float64(2) || e["completion_tokens"] != float64(40) {
			t.Errorf("access log entry %v: want continued_after [3..32], 2 attempts, 40 completion tokens", e)
		}
	}
	all, _ := os.ReadFile(logFile)
	if strings.Contains(string(all)+g.Log(), "question number") || strings.Contains(string(all)+g.Log(), out[0].want) {
		t.Error("message content reached the logs")
	}
}

// TestContinueOffAndToolCalls: with "continue off" a broken stream ends
// with an error event, as without continuation; a stream of a tool call
// is never spliced, whatever the model says.
func TestContinueOffAndToolCalls(t *testing.T) {
	faulty := []string{"-tokens", "12", "-itl", "2ms", "-drop-after", "4"}
	a, b := startSim(t, faulty...), startSim(t, faulty...)
	g := startGateway(t, GatewayConfig{Models: map[string]string{
		"qwen":  staticModel(a, b) + "\n\t\t\tbreaker off",
		"gemma": staticModel(a, b) + "\n\t\t\tbreaker off\n\t\t\tcontinue off",
	}})
	tok := g.Token(t, "demo", "demo", "")

	before := a.Stats(t).Requests + b.Stats(t).Requests
	s := readOpenAIStream(t, chatStream(t, g, tok, "gemma", "hello", ""), nil)
	if s.errData == "" || s.done || len(strings.Fields(s.text)) != 4 || len(s.finishes) != 0 {
		t.Errorf("continue off: error %q, [DONE] %v, text %q, finishes %q: want 4 tokens then an error event", s.errData, s.done, s.text, s.finishes)
	}
	if s.trailer != "" {
		t.Errorf("a trailer %q without a continuation", s.trailer)
	}
	tools := `,"tools":[{"type":"function","function":{"name":"lookup","parameters":{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer"}},"required":["city","days"]}}}],"tool_choice":"required"`
	s = readOpenAIStream(t, chatStream(t, g, tok, "qwen", "weather?", tools), nil)
	if s.toolCalls == 0 || s.errData == "" || s.done || s.trailer != "" {
		t.Errorf("tool call: %d tool call deltas, error %q, [DONE] %v, trailer %q: want an error event, not spliced", s.toolCalls, s.errData, s.done, s.trailer)
	}
	if got := a.Stats(t).Requests + b.Stats(t).Requests - before; got != 2 {
		t.Errorf("%d replica requests, want 2: neither stream continued", got)
	}
}

// TestContinueReplicaKilled: 20 native streams in flight, staggered so
// that each is at its own token, when one of the two replicas is killed
// (SIGKILL): every stream completes, the killed replica's continued on
// the survivor, with the unbroken answer's text and usage.
func TestContinueReplicaKilled(t *testing.T) {
	args := []string{"-tokens", "200", "-itl", "15ms", "-seed", "9"}
	a, b := startSim(t, args...), startSim(t, args...)
	clean := startSim(t, "-tokens", "200", "-seed", "9") // the same text, at once
	g := startGateway(t, GatewayConfig{Models: map[string]string{
		"qwen":  staticModel(a, b) + "\n\t\t\tlb_policy round_robin",
		"clean": staticModel(clean),
	}})
	tok := g.Token(t, "demo", "demo", "")

	const n = 20
	results := make([]nativeStream, n)
	wantText := make([]string, n)
	wantUsage := make([][2]int, n)
	for i := range n {
		text, p, c := cleanAnswer(t, g, tok, "clean", fmt.Sprintf("tell me about %d", i))
		wantText[i], wantUsage[i] = text, [2]int{int(p), int(c)}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	tokens := make([]atomic.Int32, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := &results[i]
			body := fmt.Sprintf(`{"model_type":"qwen","stream":true,"messages":[{"role":"user","content":"tell me about %d"}]}`, i)
			req, _ := http.NewRequestWithContext(ctx, "POST", g.Base+"/tasks/assistant_inference", strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+tok)
			req.Header.Set("Content-Type", "application/json")
			resp, err := g.Client.Do(req)
			if err != nil {
				r.err = err
				return
			}
			*r = readNativeStream(resp, func() { tokens[i].Add(1) })
		}()
		// The next stream starts once this one has 2 tokens: at the kill,
		// each is at a token of its own.
		waitFor(t, 10*time.Second, func() bool { return tokens[i].Load() >= 2 })
	}
	if a.Stats(t).InFlight == 0 {
		t.Fatal("no stream in flight on the replica to kill")
	}
	a.Kill()
	wg.Wait()
	continued := 0
	for i, r := range results {
		if r.err != nil || r.end != "done" || r.text != wantText[i] {
			t.Errorf("stream %d: err %v, end %q, text %q, want %q", i, r.err, r.end, r.text, wantText[i])
			continue
		}
		if r.usage.PromptTokens != wantUsage[i][0] || r.usage.CompletionTokens != wantUsage[i][1] {
			t.Errorf("stream %d: usage %+v, want %v", i, r.usage, wantUsage[i])
		}
		if r.trailer != "" {
			continued++
			if !afterRE.MatchString(r.trailer) {
				t.Errorf("stream %d: trailer %q", i, r.trailer)
			}
		}
	}
	if continued < 5 {
		t.Errorf("%d of %d streams continued, want the killed replica's (about half)", continued, n)
	}
}

// TestContinueRealEngine: a stream from a real engine (Ollama, the tiny
// endless model, which loops a fixed chain of words) whose engine is
// killed mid-stream is continued on the other engine: Ollama continues
// the trailing assistant message from its last word (an engine that
// answered it anew would start the chain again), so the client reads,
// word for word, the unbroken answer, and its completion tokens.
func TestContinueRealEngine(t *testing.T) {
	a := startOllama(t, ollamatest.Options{}, "tiny-endless")
	b := startOllama(t, ollamatest.Options{}, "tiny-endless")
	model := "\t\t\tstatic ollama+" + a.URL + " ollama+" + b.URL + "\n\t\t\tupstream_model tiny-endless\n\t\t\tmax_tokens 3000" +
		"\n\t\t\thealth_interval 300ms\n\t\t\tlb_policy round_robin"
	g := engineGateway(t, a, map[string]string{"endless": model})
	tok := g.Token(t, "demo", "demo", "")
	whole := askReal(t, g, tok, userChat("endless", "Hello!", false))
	if whole.status != 200 || len(strings.Fields(whole.ans.Content)) < 100 {
		t.Fatalf("unbroken answer: %d %q %q", whole.status, whole.detail, whole.ans.Content)
	}

	resp := g.Infer(t, tok, userChat("endless", "Hello!", true))
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("stream: %s", resp.Status)
	}
	sr := newSSEReader(resp.Body)
	var text strings.Builder
	for range 20 {
		ev, ok := sr.next()
		if !ok || ev.Name != "" {
			t.Fatalf("stream before the kill: event %+v", ev)
		}
		text.WriteString(delta(t, ev))
	}
	// Kill the engine that serves the stream.
	var serving string
	for _, r := range g.status(t, "endless").Replicas {
		if r.InFlight > 0 {
			serving = r.URL
		}
	}
	switch serving {
	case a.URL:
		a.Kill()
	case b.URL:
		b.Kill()
	default:
		t.Fatalf("no engine serves the stream: %+v", g.status(t, "endless").Replicas)
	}
	var last Event
	for ev, ok := sr.next(); ok; ev, ok = sr.next() {
		last = ev
		if ev.Name == "" {
			text.WriteString(delta(t, ev))
		}
	}
	if last.Name != "done" {
		t.Fatalf("the stream ended with %+v, want done", last)
	}
	var ans publicAnswer
	if err := json.Unmarshal([]byte(last.Data), &ans); err != nil {
		t.Fatal(err)
	}
	if text.String() != whole.ans.Content || ans.Content != whole.ans.Content {
		t.Errorf("continued text differs from the unbroken answer:\n got  %.300q\n want %.300q", text.String(), whole.ans.Content)
	}
	if ans.Usage.CompletionTokens != whole.ans.Usage.CompletionTokens {
		t.Errorf("completion tokens %d, want the unbroken answer's %d", ans.Usage.CompletionTokens, whole.ans.Usage.CompletionTokens)
	}
	t.Logf("usage unbroken %+v, continued %+v; trailer %q", whole.ans.Usage, ans.Usage, resp.Trailer.Get("Llmedge-Route"))
	if !afterRE.MatchString(resp.Trailer.Get("Llmedge-Route")) {
		t.Errorf("trailer %q", resp.Trailer.Get("Llmedge-Route"))
	}
}
