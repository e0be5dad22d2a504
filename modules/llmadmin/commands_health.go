package llmadmin

import (
	"crypto/tls"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"time"

	caddycmd "github.com/caddyserver/caddy/v2/cmd"
)

func init() {
	caddycmd.RegisterCommand(caddycmd.Command{
		Name:  "healthcheck",
		Usage: "[--url <url>] [--timeout <duration>]",
		Short: "Exits 0 when the gateway's /healthz answers 200 (a container's HEALTHCHECK)",
		Long: `
GETs the gateway's /healthz and exits 0 on a 200, 1 otherwise: for a
container's HEALTHCHECK, where no curl is at hand. The default URL is
https://localhost:$LLMEDGE_PORT/healthz (8443 when unset). The certificate
of a loopback address is not verified (it is this machine's own gateway,
usually with a certificate of Caddy's internal CA); any other is.`,
		Flags: func() *flag.FlagSet {
			fs := flag.NewFlagSet("healthcheck", flag.ExitOnError)
			fs.String("url", "", "The URL to GET (default https://localhost:$LLMEDGE_PORT/healthz)")
			fs.Duration("timeout", 3*time.Second, "How long to wait for the answer")
			return fs
		}(),
		Func: cmdHealthcheck,
	})
}

func cmdHealthcheck(fl caddycmd.Flags) (int, error) {
	target := fl.String("url")
	if target == "" {
		target = defaultHealthURL(os.Getenv("LLMEDGE_PORT"))
	}
	if err := healthcheck(target, fl.Duration("timeout")); err != nil {
		return exitFailure, err
	}
	return 0, nil
}

// defaultHealthURL is /healthz on localhost at port (8443 when empty).
func defaultHealthURL(port string) string {
	if port == "" {
		port = defaultPort
	}
	return "https://localhost:" + port + "/healthz"
}

// defaultPort is the HTTPS port of the example configurations when
// LLMEDGE_PORT is unset.
const defaultPort = "8443"

// healthcheck GETs target and wants a 200.
func healthcheck(target string, timeout time.Duration) error {
	u, err := url.Parse(target)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("--url %q: want http(s)://host[:port]/path", target)
	}
	tr := &http.Transport{Proxy: nil}
	if isLoopback(u.Hostname()) {
		tr.TLSClientConfig = &tls.Config{InsecureSkipVerify: true} //nolint:gosec // this machine's own gateway
	}
	client := &http.Client{Transport: tr, Timeout: timeout}
	resp, err := client.Get(target)
	if err != nil {
		return fmt.Errorf("%s: %w", target, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", target, resp.Status)
	}
	return nil
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
