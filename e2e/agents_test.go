package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/llmedge/llmedge/internal/ollamatest"
	"github.com/llmedge/llmedge/internal/tinymodel"
)

// TestAgents runs the real coding-agent CLIs through the gateway, each in
// a multi-turn session with a tool call: Claude Code (`claude -p`, on
// Anthropic's door), Codex (`codex exec`, the Responses API), opencode
// (`opencode run`, chat completions) and Qwen Code (`qwen`, chat
// completions and the Responses API), pinned in e2e/agents (npm). Each
// runs over pass-through (the replica serves the door's API itself) and
// over translation (it does not: the gateway turns the door's API into
// chat completions, or chat completions into Ollama's /api/chat).
//
// The simulated model calls the agent's read-only file tool on a file in
// the session's scratch folder (llmsim -tool-file), then answers in text
// once the tool's result is back. A session passes when the CLI exits 0
// with its final text, the gateway answered every request it made with a
// 2xx (its access log), and the file's content reached the replica in a
// later request (the tool ran and its result went back through the
// gateway).
//
// Safely: the gateway and the replica on loopback, every other address
// through a proxy that is not there; the agent's HOME and working folder
// are scratch folders; every tool that could write, run a command or
// reach the network is denied (Codex's shell runs in its read-only
// sandbox); telemetry and update checks off.
func TestAgents(t *testing.T) {
	bin := agentsBin(t)
	start := time.Now()
	for _, c := range agentCells {
		t.Run(c.name(), func(t *testing.T) {
			runAgentCell(t, bin, c)
		})
	}
	t.Logf("the matrix took %s", time.Since(start).Round(time.Second))
}

// agentsDir is the npm project that pins the agents' CLIs (and a Node 22
// for those that need it).
const agentsDir = "agents"

// agentsBin is the agents' node_modules/.bin, as an absolute path. The
// project is installed by `make agents` (which `make test` runs) or
// .ci/run; here with `npm ci` when LLMEDGE_TEST_AGENTS is set or an
// install is older than the lock file. Not installed and not asked for,
// the test is skipped: the CLIs weigh about 1.5 GB.
func agentsBin(t *testing.T) string {
	t.Helper()
	needBinaries(t)
	npmInstall.Lock()
	defer npmInstall.Unlock()
	lock, err := os.Stat(filepath.Join(agentsDir, "package-lock.json"))
	if err != nil {
		t.Fatal(err)
	}
	inst, err := os.Stat(filepath.Join(agentsDir, "node_modules", ".package-lock.json"))
	switch {
	case err == nil && !inst.ModTime().Before(lock.ModTime()):
	case err != nil && os.Getenv("LLMEDGE_TEST_AGENTS") == "":
		t.Skip("the coding agents are not installed (e2e/agents): `make agents`, or set LLMEDGE_TEST_AGENTS=1 to install them here")
	default:
		p, err := exec.LookPath("npm")
		if err != nil {
			t.Fatalf("npm is needed to install the coding agents: %v", err)
		}
		run(t, 10*time.Minute, agentsDir, os.Environ(), p, "ci", "--no-audit", "--no-fund")
	}
	bin, err := filepath.Abs(filepath.Join(agentsDir, "node_modules", ".bin"))
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// agentCell is one cell of the matrix: an agent on a door, with a replica
// that serves that door's API or not.
type agentCell struct {
	agent string // a key of agentCLIs
	door  string // "messages", "responses" or "chat"
	// engine says how the replica is reached: "passthrough" (it serves
	// the door's API), "translate" (it serves chat completions only), or
	// "ollama" (it speaks Ollama's /api/chat).
	engine string
	sim    []string // the simulator's flags for that
	model  string   // the model block's lines for that
}

func (c agentCell) name() string { return c.agent + "/" + c.door + "/" + c.engine }

// The replicas of the translation cells: without Anthropic's and OpenAI's
// Responses API (as SGLang, TGI and older vLLM and llama.cpp builds), or
// speaking Ollama's /api/chat.
var (
	chatOnly   = []string{"-no-messages", "-no-responses"}
	ollamaSim  = []string{"-dialect", "ollama"}
	ollamaLine = "\n\t\t\tprotocol ollama"
)

var agentCells = []agentCell{
	{agent: "claude", door: "messages", engine: "passthrough", model: "\n\t\t\tanthropic passthrough"},
	{agent: "claude", door: "messages", engine: "translate", sim: chatOnly, model: "\n\t\t\tanthropic translate"},
	{agent: "codex", door: "responses", engine: "passthrough"},
	{agent: "codex", door: "responses", engine: "translate", sim: chatOnly, model: "\n\t\t\tresponses translate"},
	{agent: "opencode", door: "chat", engine: "passthrough"},
	{agent: "opencode", door: "chat", engine: "ollama", sim: ollamaSim, model: ollamaLine},
	{agent: "qwen", door: "chat", engine: "passthrough"},
	{agent: "qwen", door: "responses", engine: "passthrough"},
	{agent: "qwen", door: "responses", engine: "translate", sim: chatOnly, model: "\n\t\t\tresponses translate"},
}

// agentPrompt asks for a tool call; the simulated model makes it whatever
// the prompt says.
const agentPrompt = "Read the file notes.txt in the current folder and tell me what it says."

// agentTimeout bounds one agent's session.
const agentTimeout = 2 * time.Minute

func runAgentCell(t *testing.T, bin string, c agentCell) {
	work, home := t.TempDir(), t.TempDir()
	marker := "llmedge-agents-" + randomHex(t)
	notes := filepath.Join(work, "notes.txt")
	writeFile(t, notes, "The deploy word is "+marker+".\n")

	sim := startSim(t, append([]string{"-tokens", "12", "-tool-file", notes}, c.sim...)...)
	logFile := filepath.Join(t.TempDir(), "access.log")
	g := startGateway(t, GatewayConfig{
		Models: map[string]string{"qwen": staticModel(sim) + c.model},
		Site:   accessLogSite(logFile),
	})
	s := agentSession{g: g, key: createKey(t, g, "--user", "demo"), model: "qwen", door: c.door, home: home, work: work}
	final := runAgent(t, bin, c.agent, s)

	reqs := checkAccessLog(t, logFile, 2)
	if reqs.refused > 0 {
		t.Logf("%s's account of its API errors:\n%s", c.agent, apiErrors(s))
	}
	found := false
	for _, r := range sim.requests(t) {
		if bytes.Contains(r.Body, []byte(marker)) {
			found = true
		}
	}
	if !found {
		t.Errorf("the file's content never reached the replica: the tool's result did not come back through the gateway")
	}
	t.Logf("%s: exit 0, %d requests %s, final text %q", c.name(), reqs.total, reqs, final)
}

// agentOutput is what an agent's run left: its exit, its output and its
// final text.
type agentOutput struct {
	err            error
	stdout, stderr []byte
	final          string
}

// runAgent runs one agent's session on s and fails the test unless it
// exits 0 with a final text, which it returns.
func runAgent(t *testing.T, bin, agent string, s agentSession) string {
	t.Helper()
	out := startAgent(t, bin, agent, s)
	if out.err != nil {
		t.Fatalf("%s: %v\nstdout:\n%s\nstderr:\n%s", agent, out.err, lastLines(string(out.stdout), 30), lastLines(string(out.stderr), 30))
	}
	if strings.TrimSpace(out.final) == "" {
		t.Fatalf("%s exited 0 without a final text\nstdout:\n%s\nstderr:\n%s", agent, lastLines(string(out.stdout), 30), lastLines(string(out.stderr), 30))
	}
	return out.final
}

// apiErrors is what an agent's debug log (Claude Code's, which works
// around refused requests quietly) says of its API errors. The log may
// be written a moment after the agent exits.
func apiErrors(s agentSession) string {
	file := filepath.Join(s.home, "claude-debug.log")
	var errs string
	pollEvery(3*time.Second, 100*time.Millisecond, func() bool {
		b, _ := os.ReadFile(file)
		errs = grepLines(string(b), "API error")
		return errs != ""
	})
	if errs == "" {
		return "(none logged: see its output above)"
	}
	return errs
}

// startAgent runs agent on s, in its own process group (the CLIs start
// helpers: a native binary behind a Node launcher, a sandbox), all of
// which are killed when the session outlives agentTimeout.
func startAgent(t *testing.T, bin, agent string, s agentSession) agentOutput {
	t.Helper()
	cli := agentCLIs[agent]
	args, extra := cli.configure(t, s, agentPrompt)
	ctx, cancel := context.WithTimeout(context.Background(), agentTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(bin, cli.bin), args...)
	cmd.Dir = s.work
	cmd.Env = append(agentEnv(bin, s.home, s.g.CAFile()), extra...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	began := time.Now()
	err := cmd.Run()
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // helpers left behind
	}
	if ctx.Err() != nil {
		err = fmt.Errorf("no end within %s: %w", agentTimeout, err)
	}
	t.Logf("%s ran %s", agent, time.Since(began).Round(100*time.Millisecond))
	o := agentOutput{err: err, stdout: stdout.Bytes(), stderr: stderr.Bytes()}
	if err == nil {
		o.final = cli.finalText(t, s, o.stdout)
	}
	return o
}

// agentEnv is the whole environment of an agent: nothing of the test's
// own (no credentials or settings of whoever runs it), its Node 22 first
// on PATH, its HOME and XDG folders in the scratch home, the gateway's CA
// trusted, and every address but loopback sent to a proxy that is not
// there.
func agentEnv(bin, home, ca string) []string {
	const deadProxy = "http://127.0.0.1:9" // discard's port: nothing listens
	return []string{
		"PATH=" + bin + ":/usr/local/bin:/usr/bin:/bin",
		"HOME=" + home,
		"XDG_CONFIG_HOME=" + filepath.Join(home, ".config"),
		"XDG_DATA_HOME=" + filepath.Join(home, ".local", "share"),
		"XDG_STATE_HOME=" + filepath.Join(home, ".local", "state"),
		"XDG_CACHE_HOME=" + filepath.Join(home, ".cache"),
		"LANG=C.UTF-8",
		"TERM=dumb",
		"NO_COLOR=1",
		"NODE_EXTRA_CA_CERTS=" + ca,
		"HTTPS_PROXY=" + deadProxy, "https_proxy=" + deadProxy,
		"HTTP_PROXY=" + deadProxy, "http_proxy=" + deadProxy,
		"NO_PROXY=localhost,127.0.0.1", "no_proxy=localhost,127.0.0.1",
	}
}

// accessLogSite is a site body that logs every request as JSON to file.
func accessLogSite(file string) string {
	return "log {\n\t\toutput file " + file + "\n\t\tformat json\n\t}\n\tllm_gateway"
}

// requestCounts counts a session's requests by method, path and status.
type requestCounts struct {
	total, refused int
	by             map[string]int
}

func (r requestCounts) String() string {
	keys := make([]string, 0, len(r.by))
	for k := range r.by {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s ×%d", k, r.by[k])
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

// checkAccessLog reads the gateway's access log and fails the test for
// every request it did not answer with a 2xx, or when there were fewer
// than atLeast inference requests (POSTs).
func checkAccessLog(t *testing.T, file string, atLeast int) requestCounts {
	t.Helper()
	rc := requestCounts{by: map[string]int{}}
	// The log is written as each request ends; the agent has exited.
	pollEvery(3*time.Second, 50*time.Millisecond, func() bool {
		b, _ := os.ReadFile(file)
		return len(b) > 0
	})
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	posts := 0
	for _, line := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		var e struct {
			Status  int `json:"status"`
			Request struct {
				Method string `json:"method"`
				URI    string `json:"uri"`
			} `json:"request"`
		}
		// The harness's own health checks are not the agent's.
		if json.Unmarshal(line, &e) != nil || e.Request.URI == "" || e.Request.URI == "/healthz" {
			continue
		}
		rc.total++
		rc.by[fmt.Sprintf("%s %s %d", e.Request.Method, e.Request.URI, e.Status)]++
		if e.Request.Method == "POST" {
			posts++
		}
		if e.Status < 200 || e.Status > 299 {
			rc.refused++
			t.Errorf("refused: %s %s answered %d: %s", e.Request.Method, e.Request.URI, e.Status, withoutHeaders(line))
		}
	}
	if posts < atLeast {
		t.Errorf("%d inference requests, want at least %d (a tool call and the answer to its result): %s", posts, atLeast, rc)
	}
	return rc
}

// withoutHeaders is an access log entry without the request's headers,
// which hold the credential.
func withoutHeaders(line []byte) string {
	var e map[string]any
	if json.Unmarshal(line, &e) != nil {
		return ""
	}
	if r, ok := e["request"].(map[string]any); ok {
		delete(r, "headers")
	}
	delete(e, "resp_headers")
	b, _ := json.Marshal(e)
	return string(b)
}

func randomHex(t *testing.T) string {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// ---- the real engine ----

// TestAgentsRealEngine runs each agent once against a real engine, Ollama
// with a tiny generated model, on pass-through: Ollama serves Anthropic's
// Messages API, OpenAI's Responses API and chat completions itself. The
// tiny model answers made-up words and never calls a tool, so a session is
// one or two requests; what is checked is that the agent ends its session
// (exit 0) and the gateway answered every request with a 2xx.
func TestAgentsRealEngine(t *testing.T) {
	bin := agentsBin(t)
	e := startOllama(t, ollamatest.Options{})
	// An agent's first request is some ten thousand tokens of
	// instructions and tool schemas: a context that holds it.
	e.CreateToolsModel(t, "tiny-agent", tinymodel.Config{Seed: 1, AnswerWords: tinyWords, ContextLength: agentCtx}, agentCtx)
	for _, c := range []struct{ agent, door, model string }{
		{"claude", "messages", "anthropic passthrough"},
		{"codex", "responses", ""},
		{"opencode", "chat", ""},
		{"qwen", "chat", ""},
	} {
		t.Run(c.agent+"/"+c.door, func(t *testing.T) {
			work, home := t.TempDir(), t.TempDir()
			writeFile(t, filepath.Join(work, "notes.txt"), "The deploy word is tangerine.\n")
			logFile := filepath.Join(t.TempDir(), "access.log")
			var extra []string
			if c.model != "" {
				extra = append(extra, c.model)
			}
			g := startGateway(t, GatewayConfig{
				Models: map[string]string{"qwen": engineModel(e, "openai", "tiny-agent", extra...)},
				Site:   accessLogSite(logFile),
			})
			s := agentSession{g: g, key: createKey(t, g, "--user", "demo"), model: "qwen", door: c.door, home: home, work: work}
			final := runAgent(t, bin, c.agent, s)
			reqs := checkAccessLog(t, logFile, 1)
			if reqs.refused > 0 {
				t.Logf("%s's account of its API errors:\n%s", c.agent, apiErrors(s))
			}
			t.Logf("%s on Ollama: exit 0, %d requests %s, final text %q", c.agent, reqs.total, reqs, final)
		})
	}
}

// agentCtx is the tiny model's context for the agents' long prompts.
const agentCtx = 4096
