package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"text/template"
	"time"

	"github.com/llmedge/llmedge/internal/freeport"
)

// proxy is a running bin/llmedge process, configured as stock Caddy or as
// llmedge.
type proxy struct {
	*process
	base   string // https://localhost:PORT
	addr   string // 127.0.0.1:PORT
	admin  string // http://127.0.0.1:ADMINPORT
	rootCA string // the internal CA's root certificate
}

// startProxy writes the Caddyfile tmpl for cfg into dir, runs bin with it
// and waits until healthPath answers over HTTPS. Its ports are free when
// picked, but the proxy binds them later: when another process took one
// in between, it starts again on new ones.
func startProxy(ctx context.Context, name, bin, dir string, tmpl *template.Template, cfg proxyConfig, healthPath string) (*proxy, error) {
	for try := 1; ; try++ {
		px, err := startProxyOnce(ctx, name, bin, dir, tmpl, cfg, healthPath)
		if err == nil || try == 5 || !errors.Is(err, errAddrInUse) {
			return px, err
		}
	}
}

// errAddrInUse marks a proxy that could not bind its ports.
var errAddrInUse = errors.New("address in use")

func startProxyOnce(ctx context.Context, name, bin, dir string, tmpl *template.Template, cfg proxyConfig, healthPath string) (*proxy, error) {
	var err error
	if cfg.Port, err = freeport.Get(); err != nil {
		return nil, err
	}
	if cfg.AdminPort, err = freeport.Get(); err != nil {
		return nil, err
	}
	dir = filepath.Join(dir, name)
	// A storage folder of its own unless cfg names one: instances of one
	// cluster share theirs, so that a token of one is good at the others.
	if cfg.Data == "" {
		cfg.Data = filepath.Join(dir, "data")
	}
	conf, err := cfg.render(tmpl)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	confPath := filepath.Join(dir, "Caddyfile")
	if err := os.WriteFile(confPath, conf, 0o600); err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "run", "--config", confPath, "--adapter", "caddyfile")
	cmd.Env = append(os.Environ(), "HOME="+dir, "XDG_DATA_HOME="+dir, "XDG_CONFIG_HOME="+dir)
	p, err := start(name, cmd)
	if err != nil {
		return nil, err
	}
	px := &proxy{
		process: p,
		base:    fmt.Sprintf("https://localhost:%d", cfg.Port),
		addr:    fmt.Sprintf("127.0.0.1:%d", cfg.Port),
		admin:   fmt.Sprintf("http://127.0.0.1:%d", cfg.AdminPort),
		rootCA:  filepath.Join(cfg.Data, "pki", "authorities", "local", "root.crt"),
	}
	if err := px.waitHealthy(ctx, healthPath); err != nil {
		p.stop()
		log := p.log.tail(30)
		if freeport.AddrInUse(log) {
			err = fmt.Errorf("%w: %w", errAddrInUse, err)
		}
		return nil, fmt.Errorf("%s: %w\n%s", name, err, log)
	}
	return px, nil
}

// waitHealthy waits for the CA root and a 200 from path.
func (px *proxy) waitHealthy(ctx context.Context, path string) error {
	deadline := time.Now().Add(60 * time.Second)
	var last error
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if px.exited() {
			return fmt.Errorf("exited early")
		}
		if _, err := os.Stat(px.rootCA); err == nil {
			// A bounded wait: when another program holds the port, the
			// connection may be accepted and never answered.
			actx, cancel := context.WithTimeout(ctx, 5*time.Second)
			last = px.get(actx, path)
			cancel()
			if last == nil {
				return nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("not healthy in time (last error: %v)", last)
}

// target returns the Target for this proxy; the caller fills the bodies
// and headers.
func (px *proxy) target(name, path string) *Target {
	return &Target{Name: name, URL: px.base + path, RootCA: px.rootCA, DialAddr: px.addr, PID: px.pid(), Header: http.Header{}}
}

// get checks that GET path answers 200.
func (px *proxy) get(ctx context.Context, path string) error {
	c, err := px.target("health", path).client(1)
	if err != nil {
		return err
	}
	defer c.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, px.base+path, nil)
	if err != nil {
		return err
	}
	_, err = drain(c, req)
	return err
}

// token gets an access token for user/password from llmedge.
func (px *proxy) token(ctx context.Context, user, password string) (string, error) {
	c, err := px.target("token", "/auth/token").client(1)
	if err != nil {
		return "", err
	}
	defer c.CloseIdleConnections()
	form := url.Values{"username": {user}, "password": {password}, "grant_type": {"password"}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, px.base+"/auth/token", strings.NewReader(form.Encode()))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := c.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var tok struct {
		AccessToken string `json:"access_token"`
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &tok) != nil || tok.AccessToken == "" {
		return "", fmt.Errorf("token: %s %s", resp.Status, body)
	}
	return tok.AccessToken, nil
}

// cpuProfile fetches a CPU profile of d from the admin endpoint into file.
func (px *proxy) cpuProfile(ctx context.Context, d time.Duration, file string) error {
	secs := max(int((d+time.Second-1)/time.Second), 1)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", px.admin, secs), nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("pprof: %s", resp.Status)
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
