package llmadmin

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestHealthcheck(t *testing.T) {
	status := http.StatusOK
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" {
			http.NotFound(w, r)
			return
		}
		w.WriteHeader(status)
	}))
	defer srv.Close()
	// A loopback gateway's own certificate is not verified.
	if err := healthcheck(srv.URL+"/healthz", time.Second); err != nil {
		t.Fatalf("healthy: %v", err)
	}
	status = http.StatusServiceUnavailable
	if err := healthcheck(srv.URL+"/healthz", time.Second); err == nil || !strings.Contains(err.Error(), "503") {
		t.Fatalf("unhealthy: %v", err)
	}
	srv.Close()
	if err := healthcheck(srv.URL+"/healthz", time.Second); err == nil {
		t.Fatal("nothing listening: no error")
	}
	for _, bad := range []string{"localhost:1/healthz", "ftp://x/y", "://"} {
		if err := healthcheck(bad, time.Second); err == nil || !strings.Contains(err.Error(), "want http") {
			t.Errorf("%q: %v", bad, err)
		}
	}
	if got := defaultHealthURL(""); got != "https://localhost:"+defaultPort+"/healthz" {
		t.Errorf("default: %s", got)
	}
	if got := defaultHealthURL("9443"); got != "https://localhost:9443/healthz" {
		t.Errorf("LLMEDGE_PORT: %s", got)
	}
	for host, want := range map[string]bool{"localhost": true, "127.0.0.1": true, "::1": true, "10.0.0.1": false, "example.com": false} {
		if isLoopback(host) != want {
			t.Errorf("isLoopback(%s) != %v", host, want)
		}
	}
}
