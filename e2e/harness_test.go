// Package e2e tests llmedge as operators run it: the real binary, loaded
// from a real Caddyfile, over HTTPS with Caddy's internal CA, in front of
// simulator processes that the tests start, stop and kill.
package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"text/template"
	"time"

	"github.com/llmedge/llmedge/internal/freeport"
)

var binDir string // llmedge and llmsim, built once by TestMain

// e2eBinEnv names binDir for a test re-run in another process.
const e2eBinEnv = "LLMEDGE_E2E_BIN"

func TestMain(m *testing.M) {
	code := func() int {
		flag.Parse()
		if testing.Short() {
			return m.Run()
		}
		if dir := os.Getenv(e2eBinEnv); dir != "" {
			// A test re-run in a private network namespace
			// (kubetest.PrivateNetwork): its parent built the binaries.
			binDir = dir
			return m.Run()
		}
		dir, err := os.MkdirTemp("", "llmedge-e2e-bin")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		// The gateway is built with the race detector: the e2e tests then
		// check the real server for data races too. Benchmarks measure the
		// binary as it ships.
		race := "-race"
		if f := flag.Lookup("test.bench"); f != nil && f.Value.String() != "" {
			race = "-trimpath"
		}
		builds := [][]string{
			{"build", race, "-o", filepath.Join(dir, "llmedge"), "../cmd/llmedge"},
			{"build", "-o", filepath.Join(dir, "llmsim"), "../cmd/llmsim"},
		}
		for _, args := range builds {
			cmd := exec.Command("go", args...)
			cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
			if err := cmd.Run(); err != nil {
				fmt.Fprintln(os.Stderr, "building", args[len(args)-1], "failed:", err)
				return 1
			}
		}
		binDir = dir
		return m.Run()
	}()
	os.Exit(code)
}

func needBinaries(t testing.TB) {
	t.Helper()
	if binDir == "" {
		t.Skip("end-to-end test: not run with -short")
	}
}

// ---- simulators ----

// Sim is a replica simulator process.
type Sim struct {
	URL  string
	cmd  *exec.Cmd
	done chan struct{}
}

func startSim(t testing.TB, args ...string) *Sim {
	t.Helper()
	needBinaries(t)
	// The simulator listens on a port the kernel picks (race-free), and
	// says which.
	cmd := exec.Command(filepath.Join(binDir, "llmsim"), append([]string{"-addr", "127.0.0.1:0"}, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // never outlive the test binary
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &Sim{cmd: cmd, done: make(chan struct{})}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("llmsim %v stderr:\n%s", args, lastLines(stderr.String(), 20))
		}
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		_ = cmd.Process.Kill()
		t.Fatalf("llmsim did not start: %v", err)
	}
	s.URL = strings.TrimSpace(strings.TrimPrefix(line, "llmsim listening on "))
	if u, err := url.Parse(s.URL); err == nil {
		if p, err := strconv.Atoi(u.Port()); err == nil {
			// Once the simulator is gone (killed as a crashed replica),
			// its port is not handed to a gateway or an agent of the
			// suite, which a gateway still probing it would then reach.
			freeport.Mark(p)
		}
	}
	go func() { _, _ = io.Copy(io.Discard, out); _ = cmd.Wait(); close(s.done) }()
	t.Cleanup(s.Kill)
	return s
}

// Kill ends the simulator with SIGKILL, as a crashed replica.
func (s *Sim) Kill() {
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.done
}

// Stats reads the simulator's counters.
func (s *Sim) Stats(t testing.TB) SimStats {
	t.Helper()
	resp, err := http.Get(s.URL + "/sim/stats")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st SimStats
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	return st
}

// Configure changes the simulator's behaviour at run time.
func (s *Sim) Configure(t testing.TB, cfg map[string]any) {
	t.Helper()
	b, _ := json.Marshal(cfg)
	resp, err := http.Post(s.URL+"/sim/config", "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("sim config: %s", resp.Status)
	}
}

type SimStats struct {
	Requests  int `json:"requests"`
	Completed int `json:"completed"`
	Cancelled int `json:"cancelled"`
	Errors    int `json:"errors"`
	Rejected  int `json:"rejected"`
	// HealthChecks counts GETs of the health path.
	HealthChecks int `json:"health_checks"`
	InFlight     int `json:"in_flight"`
	LastRequest  struct {
		Model        string `json:"model"`
		Messages     []struct{ Role, Content string }
		Temperature  float64 `json:"temperature"`
		Stream       bool    `json:"stream"`
		IncludeUsage bool    `json:"include_usage"`
		Traceparent  string  `json:"traceparent"`
	} `json:"last_request"`
}

// ---- gateway ----

// Gateway is an llmedge process started from a Caddyfile.
type Gateway struct {
	Base   string // https://localhost:PORT
	Admin  string
	Client *http.Client
	dir    string
	data   string
	conf   string
	bin    string
	port   int
	// adminPort serves Caddy's admin API (config loads, pprof).
	adminPort int
	// Extra are more ports, for the config's other sites (ExtraPorts).
	Extra []int
	cmd   *exec.Cmd
	done  chan struct{}
	log   *syncBuffer
	env   []string
}

// GatewayConfig fills the test Caddyfile template.
type GatewayConfig struct {
	Options string            // extra lines in the llmedge block
	Global  string            // extra global options
	Models  map[string]string // model name -> lines of its block
	Site    string            // site block body; default llm_gateway
	Data    string            // Caddy storage folder; default a fresh one
	Binary  string            // the gateway binary; default the one TestMain built
	Env     []string          // more environment of the gateway process
	// Sites are more site blocks, after the test's site: a template in
	// which {{index .Extra N}} is the Nth of ExtraPorts free ports (the
	// gateway's Extra).
	Sites      string
	ExtraPorts int
}

// demoHash is "demo" at bcrypt's lowest cost (4), not the quickstart's
// 10: the gateway under test runs with the race detector, where one
// check at cost 10 takes one to three seconds of a core, and every login
// pays it, as does every start and reload (the dummy hash for unknown
// users is made at the users' cost). The cost is the operator's choice,
// not what these tests are about.
const demoHash = "$2a$04$//lmmdYlz3BXiUhDo5P6lOOcjwIbLtvpOSupFwNCLW6iykENt/Ht." // "demo"

var caddyfileTmpl = template.Must(template.New("").Parse(`{
	admin 127.0.0.1:{{.AdminPort}}
	storage file_system {{.Data}}
	skip_install_trust
	auto_https disable_redirects
{{.Global}}
	llmedge {
		user demo ` + demoHash + `
		user alice ` + demoHash + ` qwen
{{.Options}}
{{- range $name, $body := .Models}}
		model {{$name}} {
{{$body}}
		}
{{- end}}
	}
}
https://localhost:{{.Port}} {
	tls internal
	{{.Site}}
}
{{.Sites}}
`))

func startGateway(t testing.TB, cfg GatewayConfig) *Gateway {
	t.Helper()
	needBinaries(t)
	g := &Gateway{dir: t.TempDir()}
	if cfg.Site == "" {
		cfg.Site = "llm_gateway"
	}
	g.data = cfg.Data
	if g.data == "" {
		g.data = filepath.Join(g.dir, "data")
	}
	g.bin = cfg.Binary
	if g.bin == "" {
		g.bin = filepath.Join(binDir, "llmedge")
	}
	g.env = cfg.Env
	g.conf = filepath.Join(g.dir, "Caddyfile")
	// The ports are free when picked, but the gateway binds them later:
	// when another process took one in between, start again on new ones.
	for try := 1; ; try++ {
		g.port, g.adminPort = pickPort(t), pickPort(t)
		g.Extra = g.Extra[:0]
		for range cfg.ExtraPorts {
			g.Extra = append(g.Extra, pickPort(t))
		}
		if err := os.WriteFile(g.conf, g.caddyfile(t, cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		g.Base = fmt.Sprintf("https://localhost:%d", g.port)
		g.Admin = fmt.Sprintf("http://127.0.0.1:%d", g.adminPort)
		err := g.launch()
		if err == nil {
			break
		}
		if try == 5 || !freeport.AddrInUse(g.log.String()) {
			t.Fatal(err)
		}
		t.Logf("llmedge could not bind its ports (try %d), again on new ones", try)
	}
	t.Cleanup(func() { g.Stop(t) })
	return g
}

// pickPort hands out the gateways' ports (a test replaces it to hand out
// a taken one).
var pickPort = freeport.Must

// caddyfile renders the test Caddyfile for cfg on g's ports and storage.
func (g *Gateway) caddyfile(t testing.TB, cfg GatewayConfig) []byte {
	t.Helper()
	if cfg.Site == "" {
		cfg.Site = "llm_gateway"
	}
	sites := cfg.Sites
	if cfg.ExtraPorts > 0 {
		tmpl, err := template.New("sites").Parse(sites)
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		if err := tmpl.Execute(&b, map[string]any{"Extra": g.Extra}); err != nil {
			t.Fatal(err)
		}
		sites = b.String()
	}
	var buf bytes.Buffer
	err := caddyfileTmpl.Execute(&buf, map[string]any{
		"AdminPort": g.adminPort, "Port": g.port, "Data": g.data,
		"Options": cfg.Options, "Models": cfg.Models, "Site": cfg.Site, "Global": cfg.Global, "Sites": sites,
	})
	if err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// start launches the process on its config and waits until it serves.
func (g *Gateway) start(t testing.TB) {
	t.Helper()
	if err := g.launch(); err != nil {
		t.Fatal(err)
	}
}

// launch starts the process and waits for the internal CA's root, then
// for /healthz to answer 200. When the process exits first, or does not
// serve within a minute, it is gone when launch returns the error.
func (g *Gateway) launch() error {
	g.log = new(syncBuffer)
	g.cmd = exec.Command(g.bin, "run", "--config", g.conf, "--adapter", "caddyfile")
	g.cmd.Env = append(append(os.Environ(), "HOME="+g.dir, "XDG_DATA_HOME="+g.dir, "XDG_CONFIG_HOME="+g.dir), g.env...)
	g.cmd.Stdout, g.cmd.Stderr = g.log, g.log
	g.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // never outlive the test binary
	if err := g.cmd.Start(); err != nil {
		return err
	}
	g.done = make(chan struct{})
	go func() { _ = g.cmd.Wait(); close(g.done) }()

	rootPath := filepath.Join(g.data, "pki", "authorities", "local", "root.crt")
	exited := false
	// Every 100 ms: the process says nothing when it serves.
	if pollEvery(60*time.Second, 100*time.Millisecond, func() bool {
		select {
		case <-g.done:
			exited = true
			return true
		default:
		}
		pem, err := os.ReadFile(rootPath)
		if err != nil {
			return false
		}
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(pem)
		g.Client = &http.Client{Transport: &http.Transport{
			TLSClientConfig:     &tls.Config{RootCAs: pool},
			MaxIdleConnsPerHost: 64,
		}}
		// A bounded wait: when another program holds the port, the
		// connection may be accepted and never answered.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, "GET", g.Base+"/healthz", nil)
		resp, err := g.Client.Do(req)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	}) {
		if exited {
			return fmt.Errorf("llmedge exited early:\n%s", g.log)
		}
		return nil
	}
	_ = g.cmd.Process.Kill()
	<-g.done
	return fmt.Errorf("llmedge did not become healthy:\n%s", g.log)
}

// Stop sends SIGTERM and waits for the process to exit.
func (g *Gateway) Stop(t testing.TB) {
	select {
	case <-g.done:
		return
	default:
	}
	_ = g.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-g.done:
	case <-time.After(15 * time.Second):
		_ = g.cmd.Process.Kill()
		<-g.done
		t.Errorf("llmedge did not stop on SIGTERM")
	}
	if strings.Contains(g.log.String(), "DATA RACE") {
		t.Errorf("data race in llmedge:\n%s", g.log)
	}
	if t.Failed() {
		t.Logf("llmedge log:\n%s", lastLines(g.log.String(), 60))
	}
}

// Restart stops the process and starts it again on the same config and storage.
func (g *Gateway) Restart(t testing.TB) {
	t.Helper()
	g.Stop(t)
	g.start(t)
}

// Token gets an access token for user with password.
func (g *Gateway) Token(t testing.TB, user, password, scope string) string {
	t.Helper()
	form := url.Values{"username": {user}, "password": {password}, "grant_type": {"password"}}
	if scope != "" {
		form.Set("scope", scope)
	}
	resp, err := g.Client.PostForm(g.Base+"/auth/token", form)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var tok struct {
		AccessToken string `json:"access_token"`
		TokenType   string `json:"token_type"`
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || json.Unmarshal(body, &tok) != nil || tok.AccessToken == "" || tok.TokenType != "bearer" {
		t.Fatalf("token: %s %s", resp.Status, body)
	}
	return tok.AccessToken
}

// Infer posts body to the inference endpoint with token (none when empty).
func (g *Gateway) Infer(t testing.TB, token string, body any) *http.Response {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		j, _ := json.Marshal(b)
		rd = bytes.NewReader(j)
	}
	req, _ := http.NewRequest("POST", g.Base+"/tasks/assistant_inference", rd)
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := g.Client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// ---- helpers ----

func readJSON(t testing.TB, resp *http.Response, v any) []byte {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if v != nil {
		if err := json.Unmarshal(b, v); err != nil {
			t.Fatalf("body is not JSON (%v): %s", err, b)
		}
	}
	return b
}

// Event is one server-sent event.
type Event struct {
	Name, Data string
	Comment    bool
}

// readEvents reads a whole SSE stream.
func readEvents(t testing.TB, r io.Reader) []Event {
	t.Helper()
	var evs []Event
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var cur Event
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if cur != (Event{}) {
				evs = append(evs, cur)
			}
			cur = Event{}
		case strings.HasPrefix(line, ":"):
			evs = append(evs, Event{Comment: true, Data: strings.TrimSpace(line[1:])})
		case strings.HasPrefix(line, "event: "):
			cur.Name = line[len("event: "):]
		case strings.HasPrefix(line, "data: "):
			cur.Data = line[len("data: "):]
		default:
			t.Fatalf("unexpected SSE line %q", line)
		}
	}
	return evs
}

func lastLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func staticModel(sims ...*Sim) string {
	var urls []string
	for _, s := range sims {
		urls = append(urls, s.URL)
	}
	return "\t\t\tstatic " + strings.Join(urls, " ")
}

func base64URL(s string) ([]byte, error) { return base64.RawURLEncoding.DecodeString(s) }
