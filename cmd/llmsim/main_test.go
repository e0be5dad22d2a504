package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/llmedge/llmedge/simulator"
)

func TestParseFlags(t *testing.T) {
	// Block size, cache kind and sequence cap are left to the dialect; the
	// prefill costs 100µs per token unless told otherwise.
	defaults := simulator.Config{Model: "sim-model", Tokens: 16, ErrorStatus: 500, KVCacheBlocks: 16384,
		PrefillPerToken: simulator.Duration(100 * time.Microsecond), EmbeddingDim: 16}
	with := func(f func(*simulator.Config)) simulator.Config {
		c := defaults
		f(&c)
		return c
	}
	tests := []struct {
		name     string
		args     []string
		wantAddr string
		want     simulator.Config
		wantErr  bool
	}{
		{"defaults", nil, "127.0.0.1:8000", defaults, false},
		{"ollama: its defaults are the simulator's to fill", []string{"-dialect", "ollama"}, "127.0.0.1:8000",
			with(func(c *simulator.Config) { c.Dialect = "ollama" }), false},
		{"ollama, overridden", []string{"-dialect", "ollama", "-max-num-seqs", "4", "-prefix-cache", "blocks", "-block-size", "16"}, "127.0.0.1:8000",
			with(func(c *simulator.Config) {
				c.Dialect, c.MaxNumSeqs, c.PrefixCache, c.BlockSize = "ollama", 4, "blocks", 16
			}), false},
		{"free prefill", []string{"-prefill-per-token", "0"}, "127.0.0.1:8000", with(func(c *simulator.Config) { c.PrefillPerToken = 0 }), false},
		{"all flags", []string{
			"-addr", "127.0.0.1:0", "-model", "m", "-ttft", "250ms", "-itl", "20ms", "-tokens", "5",
			"-seed", "7", "-error-rate", "0.25", "-error-status", "503", "-hang", "-drop-after", "3",
			"-max-model-len", "4096", "-api-key", "k", "-dialect", "tgi", "-loading", "2s", "-no-usage",
			"-usage-in-finish", "-error-after", "2", "-max-concurrent", "4",
			"-block-size", "32", "-kv-cache-blocks", "1000", "-no-prefix-cache", "-prefix-cache", "slots", "-prefill-per-token", "50us",
			"-max-num-seqs", "8", "-metrics-fault", "garbage",
			"-embedding-dim", "384", "-no-messages", "-no-responses",
		}, "127.0.0.1:0", simulator.Config{
			Model: "m", TTFT: simulator.Duration(250 * time.Millisecond), ITL: simulator.Duration(20 * time.Millisecond),
			Tokens: 5, Seed: 7, ErrorRate: 0.25, ErrorStatus: 503, Hang: true, DropAfter: 3, MaxModelLen: 4096, APIKey: "k",
			Dialect: "tgi", Loading: simulator.Duration(2 * time.Second), NoUsage: true, UsageInFinish: true,
			ErrorAfter: 2, MaxConcurrent: 4,
			BlockSize: 32, KVCacheBlocks: 1000, NoPrefixCache: true, PrefixCache: "slots", PrefillPerToken: simulator.Duration(50 * time.Microsecond),
			MaxNumSeqs: 8, MetricsFault: "garbage",
			EmbeddingDim: 384, NoMessages: true, NoResponses: true,
		}, false},
		{"embedding dim out of range", []string{"-embedding-dim", "70000"}, "", simulator.Config{}, true},
		{"block size out of range", []string{"-block-size", "5000"}, "", simulator.Config{}, true},
		{"kv cache blocks out of range", []string{"-kv-cache-blocks", "-1"}, "", simulator.Config{}, true},
		{"negative prefill", []string{"-prefill-per-token", "-1ms"}, "", simulator.Config{}, true},
		{"negative max num seqs", []string{"-max-num-seqs", "-1"}, "", simulator.Config{}, true},
		{"unknown metrics fault", []string{"-metrics-fault", "slow"}, "", simulator.Config{}, true},
		{"unknown prefix cache kind", []string{"-prefix-cache", "lru"}, "", simulator.Config{}, true},
		{"unknown dialect", []string{"-dialect", "klingon"}, "", simulator.Config{}, true},
		{"rate out of range", []string{"-error-rate", "1.5"}, "", simulator.Config{}, true},
		{"status out of range", []string{"-error-status", "200"}, "", simulator.Config{}, true},
		{"negative ttft", []string{"-ttft", "-1s"}, "", simulator.Config{}, true},
		{"bad duration", []string{"-itl", "soon"}, "", simulator.Config{}, true},
		{"unknown flag", []string{"-nope"}, "", simulator.Config{}, true},
		{"positional argument", []string{"extra"}, "", simulator.Config{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			addr, cfg, err := parseFlags(tt.args, io.Discard)
			if (err != nil) != tt.wantErr {
				t.Fatalf("error %v, want error %v", err, tt.wantErr)
			}
			if !tt.wantErr && (addr != tt.wantAddr || cfg != tt.want) {
				t.Errorf("got %q %+v, want %q %+v", addr, cfg, tt.wantAddr, tt.want)
			}
		})
	}
}

// firstLine is an io.Writer that keeps everything written and hands over
// the first line once it is complete.
type firstLine struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	once sync.Once
	line chan string
}

func (w *firstLine) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if l, _, ok := strings.Cut(w.buf.String(), "\n"); ok {
		w.once.Do(func() { w.line <- l })
	}
	return len(p), nil
}

func (w *firstLine) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// TestBinary builds llmsim, runs it on a free port, talks to it and stops
// it with SIGTERM.
func TestBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a binary")
	}
	if runtime.GOOS == "windows" {
		t.Skip("needs SIGTERM")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	bin := filepath.Join(t.TempDir(), "llmsim")
	build := exec.Command(goBin, "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}

	stdout := &firstLine{line: make(chan string, 1)}
	var stderr bytes.Buffer
	cmd := exec.Command(bin, "-addr", "127.0.0.1:0", "-tokens", "4", "-seed", "1", "-itl", "1ms",
		"-block-size", "4", "-prefill-per-token", "10us", "-max-num-seqs", "2")
	cmd.Stdout, cmd.Stderr = stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var waitErr error
	exited := make(chan struct{}) // closed once waitErr is set
	go func() {
		waitErr = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
	})

	var base string
	select {
	case line := <-stdout.line:
		var ok bool
		if base, ok = strings.CutPrefix(line, "llmsim listening on "); !ok || !strings.HasPrefix(base, "http://127.0.0.1:") || strings.HasSuffix(base, ":0") {
			t.Fatalf("first stdout line %q", line)
		}
	case <-exited:
		t.Fatalf("llmsim exited early: %v\n%s", waitErr, stderr.String())
	case <-time.After(10 * time.Second):
		t.Fatal("llmsim printed no address")
	}

	const prompt = "confidential prompt words"
	body := `{"model":"sim-model","messages":[{"role":"user","content":"` + prompt + `"}]}`
	post := func(body string) (int, string) {
		resp, err := http.Post(base+"/v1/chat/completions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, string(b)
	}

	status, b := post(body)
	var c struct {
		Choices []struct {
			Message      struct{ Content string }
			FinishReason string `json:"finish_reason"`
		}
		Usage struct {
			CompletionTokens int `json:"completion_tokens"`
		}
	}
	if err := json.Unmarshal([]byte(b), &c); status != 200 || err != nil || len(c.Choices) != 1 ||
		len(strings.Fields(c.Choices[0].Message.Content)) != 4 || c.Usage.CompletionTokens != 4 {
		t.Fatalf("non-streamed: %d %s (%v)", status, b, err)
	}

	status, b = post(strings.Replace(body, `"messages"`, `"stream":true,"stream_options":{"include_usage":true},"messages"`, 1))
	if status != 200 || !strings.HasPrefix(b, `data: {"id":"chatcmpl-`) || !strings.HasSuffix(b, "\n\ndata: [DONE]\n\n") ||
		strings.Count(b, "data: ") != 1+4+1+1+1 || !strings.Contains(b, `"choices":[],"usage":{"prompt_tokens":7,`) {
		t.Fatalf("streamed: %d %q", status, b)
	}

	resp, err := http.Get(base + "/sim/stats")
	if err != nil {
		t.Fatal(err)
	}
	var st simulator.Stats
	err = json.NewDecoder(resp.Body).Decode(&st)
	resp.Body.Close()
	if err != nil || st.Requests != 2 || st.Completed != 2 || st.InFlight != 0 || st.LastRequest == nil || !st.LastRequest.Stream {
		t.Fatalf("stats %+v (%v)", st, err)
	}

	// The same 7-token prompt twice, in blocks of 4: the second found the
	// first block (the last token is always computed).
	resp, err = http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	m, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET /metrics: %d %v", resp.StatusCode, err)
	}
	for _, line := range []string{
		`vllm:num_requests_running{engine="0",model_name="sim-model"} 0`,
		`vllm:prefix_cache_queries_total{engine="0",model_name="sim-model"} 14`,
		`vllm:prefix_cache_hits_total{engine="0",model_name="sim-model"} 4`,
	} {
		if !strings.Contains(string(m), "\n"+line+"\n") {
			t.Errorf("/metrics lacks %s:\n%s", line, m)
		}
	}

	// The other endpoints, and the capture of what was sent.
	for _, ep := range []struct{ path, body, want string }{
		{"/v1/embeddings", `{"input":"x","dimensions":3}`, `"object":"embedding"`},
		{"/v1/completions", `{"prompt":"x","max_tokens":2}`, `"object":"text_completion"`},
		{"/v1/messages", `{"model":"m","max_tokens":2,"messages":[{"role":"user","content":"x"}]}`, `"type":"message"`},
		{"/v1/responses", `{"input":"x"}`, `"object":"response"`},
	} {
		resp, err := http.Post(base+ep.path, "application/json", strings.NewReader(ep.body))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(b), ep.want) {
			t.Errorf("POST %s: %d %s", ep.path, resp.StatusCode, b)
		}
	}
	resp, err = http.Get(base + "/sim/requests?path=/v1/responses")
	if err != nil {
		t.Fatal(err)
	}
	var captured struct{ Requests []simulator.CapturedRequest }
	err = json.NewDecoder(resp.Body).Decode(&captured)
	resp.Body.Close()
	if err != nil || len(captured.Requests) != 1 || string(captured.Requests[0].Body) != `{"input":"x"}` {
		t.Errorf("GET /sim/requests: %+v (%v)", captured, err)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
		if waitErr != nil {
			t.Fatalf("exit after SIGTERM: %v\n%s", waitErr, stderr.String())
		}
	case <-time.After(5 * time.Second):
		t.Fatal("llmsim did not exit within 5s of SIGTERM")
	}
	if out := stdout.String(); strings.Count(out, "\n") != 1 {
		t.Errorf("stdout has more than one line: %q", out)
	}
	if strings.Contains(stderr.String(), "confidential") {
		t.Errorf("request content in the log: %s", stderr.String())
	}
}
