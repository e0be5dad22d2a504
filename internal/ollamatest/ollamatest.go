// Package ollamatest runs a real Ollama server (`ollama serve`, CPU only)
// on a free loopback port for tests, with tiny models from package
// tinymodel. The binary is <repo>/bin/ollama (built by `make ollama` from
// the pinned tools module) or $LLMEDGE_OLLAMA_BIN. Under `go test -short` a
// missing binary skips the test; otherwise it fails it, so CI cannot
// silently lose the real-engine tests.
package ollamatest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/llmedge/llmedge/internal/freeport"
	"github.com/llmedge/llmedge/internal/tinymodel"
)

// BinaryEnv names the environment variable that overrides the binary path.
const BinaryEnv = "LLMEDGE_OLLAMA_BIN"

// Binary returns the ollama binary's path, skipping (with -short) or
// failing the test when it is missing.
func Binary(t testing.TB) string {
	t.Helper()
	path := os.Getenv(BinaryEnv)
	if path == "" {
		root, err := repoRoot()
		if err != nil {
			t.Fatalf("ollamatest: %v", err)
		}
		path = filepath.Join(root, "bin", "ollama")
	}
	if _, err := os.Stat(path); err != nil {
		msg := fmt.Sprintf("ollama binary %s is missing: run `make ollama` (builds Ollama from tools/ollama) or set %s", path, BinaryEnv)
		if testing.Short() {
			t.Skip(msg)
		}
		t.Fatal(msg)
	}
	return path
}

func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil &&
			strings.HasPrefix(strings.TrimSpace(string(b)), "module github.com/llmedge/llmedge\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no github.com/llmedge/llmedge go.mod above the working directory")
		}
		dir = parent
	}
}

// Options change how the server runs.
type Options struct {
	// NumParallel is OLLAMA_NUM_PARALLEL, the requests one loaded model
	// serves at once (the rest queue inside Ollama). 0 means 1, Ollama's
	// default, written out so the tests do not depend on it.
	NumParallel int
	// Debug sets OLLAMA_DEBUG=1: the log then shows, among much else, how
	// much of each prompt the prefix cache reused.
	Debug bool
}

// Engine is a running `ollama serve`.
type Engine struct {
	// URL is the server's base URL, http://127.0.0.1:PORT.
	URL string

	bin  string
	dir  string
	env  []string
	http *http.Client

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
	log  *lockedBuffer
}

// Start runs `ollama serve` on a free port, with its models, keys and
// home in a temporary directory, and kills it (with its model runners)
// when the test ends.
func Start(t testing.TB, opts Options) *Engine {
	t.Helper()
	bin := Binary(t)
	dir := t.TempDir()
	if opts.NumParallel == 0 {
		opts.NumParallel = 1
	}
	var lastErr error
	// The port is free when picked, but the server binds it later: when
	// another process took it in between, start again on a new one.
	for try := 0; try < 5; try++ {
		port, err := freeport.Get()
		if err != nil {
			t.Fatal(err)
		}
		e := &Engine{
			URL:  fmt.Sprintf("http://127.0.0.1:%d", port),
			bin:  bin,
			dir:  dir,
			http: &http.Client{Timeout: 30 * time.Second},
		}
		e.env = append(cleanEnv(),
			fmt.Sprintf("OLLAMA_HOST=127.0.0.1:%d", port),
			"OLLAMA_MODELS="+filepath.Join(dir, "models"),
			"HOME="+dir, // Ollama keeps its key pair in ~/.ollama
			fmt.Sprintf("OLLAMA_NUM_PARALLEL=%d", opts.NumParallel),
			"OLLAMA_KEEP_ALIVE=-1", // never unload between tests: loading is not what they time
		)
		if opts.Debug {
			e.env = append(e.env, "OLLAMA_DEBUG=1")
		}
		if lastErr = e.start(); lastErr == nil {
			t.Cleanup(func() {
				e.Kill()
				if t.Failed() {
					t.Logf("ollama log (last lines):\n%s", lastLines(e.Log(), 40))
				}
			})
			return e
		}
		e.Kill()
		if !freeport.AddrInUse(e.Log()) && try >= 2 {
			break // not a port taken: trying more ports will not help
		}
		t.Logf("ollama did not start (try %d), again on a new port", try+1)
	}
	t.Fatalf("ollama did not start: %v", lastErr)
	return nil
}

// cleanEnv is this process's environment without OLLAMA_* variables, so a
// developer's settings do not change the tests.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "OLLAMA_") {
			env = append(env, kv)
		}
	}
	return env
}

func (e *Engine) start() error {
	e.mu.Lock()
	if e.log == nil { // a restart appends to the same log
		e.log = &lockedBuffer{}
	}
	// The server spawns a model runner process per loaded model. Everything
	// runs in a process group of its own, so Kill reaches the runners too.
	// Should the test binary die without cleaning up (a -timeout panic, a
	// kill), the parent-death signal reaches only its direct child: so that
	// is a shell that then kills the whole group, rather than the server,
	// whose runners would outlive it.
	cmd := exec.Command("/bin/sh", "-c", `trap 'kill -KILL 0' TERM; "$0" serve & wait`, e.bin)
	cmd.Env = e.env
	cmd.Stdout, cmd.Stderr = e.log, e.log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		e.mu.Unlock()
		return fmt.Errorf("starting %s serve: %w", e.bin, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	e.cmd, e.done = cmd, done
	e.mu.Unlock()

	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-done:
			return fmt.Errorf("ollama exited early:\n%s", lastLines(e.Log(), 20))
		default:
		}
		if resp, err := e.http.Get(e.URL + "/"); err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 200 && strings.Contains(string(b), "Ollama is running") {
				return nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("ollama not answering after 30s:\n%s", lastLines(e.Log(), 20))
}

// Kill ends the server and its model runners with SIGKILL, as a crashed
// machine, and waits for them to exit.
func (e *Engine) Kill() {
	e.mu.Lock()
	cmd, done := e.cmd, e.done
	e.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	<-done
}

// Restart starts the server again after Kill, on the same port with the
// same models (which then need loading again).
func (e *Engine) Restart(t testing.TB) {
	t.Helper()
	var err error
	deadline := time.Now().Add(30 * time.Second)
	for {
		if err = e.start(); err == nil {
			return
		}
		e.Kill()
		if time.Now().After(deadline) {
			t.Fatalf("ollama did not restart: %v", err)
		}
		time.Sleep(500 * time.Millisecond) // the port may linger a moment
	}
}

// Log is the server's output so far (its runners' output included).
func (e *Engine) Log() string { return e.log.String() }

// CreateModel writes a tiny model with cfg and registers it as name with
// `ollama create`, with a context of numCtx tokens, then loads it, so
// that the first request does not pay for loading.
func (e *Engine) CreateModel(t testing.TB, name string, cfg tinymodel.Config, numCtx int) {
	t.Helper()
	e.create(t, name, cfg, tinymodel.Modelfile, numCtx)
}

// CreateToolsModel is CreateModel with a template that renders tools, so
// that Ollama takes requests that offer them (coding agents' requests).
func (e *Engine) CreateToolsModel(t testing.TB, name string, cfg tinymodel.Config, numCtx int) {
	t.Helper()
	e.create(t, name, cfg, tinymodel.ToolsModelfile, numCtx)
}

func (e *Engine) create(t testing.TB, name string, cfg tinymodel.Config, modelfileOf func(string, int) string, numCtx int) {
	t.Helper()
	gguf := filepath.Join(e.dir, name+".gguf")
	f, err := os.Create(gguf)
	if err != nil {
		t.Fatal(err)
	}
	if err := tinymodel.Write(f, cfg); err != nil {
		t.Fatalf("writing %s: %v", gguf, err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	modelfile := filepath.Join(e.dir, name+".Modelfile")
	if err := os.WriteFile(modelfile, []byte(modelfileOf(gguf, numCtx)), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(e.bin, "create", name, "-f", modelfile)
	cmd.Env = e.env
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("ollama create %s: %v\n%s", name, err, out)
	}
	e.Load(t, name)
}

// Load loads model into memory (an empty generate request does that) and
// keeps it loaded.
func (e *Engine) Load(t testing.TB, model string) {
	t.Helper()
	var out struct {
		Done       bool   `json:"done"`
		DoneReason string `json:"done_reason"`
	}
	if status, body := e.Post(t, "/api/generate", map[string]any{"model": model, "keep_alive": -1, "stream": false}, &out); status != 200 || !out.Done {
		t.Fatalf("loading %s: %d %s", model, status, body)
	}
}

// Post sends body as JSON to the engine itself (no gateway) and decodes a
// JSON answer into out when out is not nil; it returns the status and the
// raw answer.
func (e *Engine) Post(t testing.TB, path string, body, out any) (int, []byte) {
	t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", e.URL+path, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s%s: %v", e.URL, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("POST %s%s: %v", e.URL, path, err)
	}
	if out != nil && resp.StatusCode == 200 {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("POST %s%s: answer is not JSON (%v): %s", e.URL, path, err, raw)
		}
	}
	return resp.StatusCode, raw
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
