package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"
)

// getBody GETs url with client and returns the status and the body.
func getBody(t *testing.T, client *http.Client, url string) (int, string) {
	t.Helper()
	resp, err := client.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// readinessReport is the admin API's /llmedge/readyz.
type readinessReport struct {
	Status string
	Checks []struct {
		Name   string
		OK     bool
		Detail string
	}
	Models map[string]struct {
		Ready    bool
		Routable bool
		Via      string
		Required bool
		Reason   string
	}
	Detail []string
}

func (g *Gateway) report(t *testing.T) (int, readinessReport) {
	t.Helper()
	code, body := getBody(t, http.DefaultClient, g.Admin+"/llmedge/readyz")
	var r readinessReport
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		t.Fatalf("/llmedge/readyz: %d %s", code, body)
	}
	return code, r
}

// TestReadinessBalancerCanTrust: /readyz says whether this instance can
// serve, not whether every model is healthy. qwen is required and falls
// back to gemma; gemma is not required. Replicas die as processes:
// /readyz stays 200 while gemma is down, and while qwen is served by its
// fallback; it is 503 only when qwen has nothing routable. The public
// answers name nothing; the admin API and the status page's data say
// which check failed and why; each change is one log line (a warning
// when a model goes down), and no 503 of /readyz is logged as an error.
func TestReadinessBalancerCanTrust(t *testing.T) {
	q1, q2, gm := startSim(t), startSim(t), startSim(t)
	health := "\n\t\t\thealth_interval 100ms\n\t\t\thealth_timeout 500ms"
	g := startGateway(t, GatewayConfig{
		Models: map[string]string{
			"qwen":  staticModel(q1, q2) + health + "\n\t\t\tfallback gemma\n\t\t\trequired",
			"gemma": staticModel(gm) + health,
		},
		Site: "log\n\tllm_gateway",
	})
	const ready, notReady = `{"status":"ready"}` + "\n", `{"status":"not ready"}` + "\n"
	public := func(path string) (int, string) { return getBody(t, g.Client, g.Base+path) }
	expect := func(path string, code int, body string) {
		t.Helper()
		if c, b := public(path); c != code || b != body {
			t.Fatalf("%s: %d %q, want %d %q", path, c, b, code, body)
		}
	}
	waitModel := func(model string, cond func(ready, routable bool, via string) bool) {
		t.Helper()
		waitFor(t, 20*time.Second, func() bool {
			_, r := g.report(t)
			m := r.Models[model]
			return cond(m.Ready, m.Routable, m.Via)
		})
	}
	expect("/readyz", 200, ready)
	expect("/readyz/qwen", 200, ready)
	expect("/readyz/gemma", 200, ready)
	if c, _ := public("/readyz/llama"); c != 404 {
		t.Fatalf("/readyz of an unknown model: %d", c)
	}

	// The optional model dies: the instance stays ready.
	gm.Kill()
	waitModel("gemma", func(r, _ bool, _ string) bool { return !r })
	for range 3 {
		expect("/readyz", 200, ready)
		time.Sleep(300 * time.Millisecond)
	}
	expect("/readyz/gemma", 503, notReady)
	expect("/readyz/qwen", 200, ready)

	// It comes back; the required model's replicas die: its fallback
	// serves it, and the instance is still ready.
	gm = restartSim(t, gm, 0)
	waitModel("gemma", func(r, _ bool, _ string) bool { return r })
	q1.Kill()
	q2.Kill()
	waitModel("qwen", func(r, routable bool, via string) bool { return !r && routable && via == "gemma" })
	expect("/readyz", 200, ready)
	expect("/readyz/qwen", 200, ready)
	tok := g.Token(t, "demo", "demo", "")
	if resp := g.Infer(t, tok, withModel("qwen")); resp.StatusCode != 200 {
		t.Fatalf("qwen through its fallback: %s", resp.Status)
	} else {
		resp.Body.Close()
	}

	// The fallback dies too: nothing can serve the required model.
	gm.Kill()
	waitModel("qwen", func(_, routable bool, _ string) bool { return !routable })
	for range 3 {
		expect("/readyz", 503, notReady)
		time.Sleep(300 * time.Millisecond)
	}
	expect("/readyz/qwen", 503, notReady)
	code, rep := g.report(t)
	if code != 503 || rep.Status != "not ready" || len(rep.Detail) != 1 ||
		!strings.Contains(rep.Detail[0], "model 'qwen': required, and nothing routable: no usable replica") {
		t.Fatalf("the admin report: %d %+v", code, rep)
	}
	var snap struct {
		Readiness struct {
			Status string
			Checks []struct {
				Name   string
				OK     bool
				Detail string
			}
		}
		Models []struct {
			Name     string
			Required bool
			NotReady string `json:"not_ready"`
		}
	}
	if c, body := getBody(t, http.DefaultClient, g.Admin+"/llmedge/status.json"); c != 200 || json.Unmarshal([]byte(body), &snap) != nil {
		t.Fatalf("status.json: %d %s", c, body)
	}
	failed := ""
	for _, c := range snap.Readiness.Checks {
		if !c.OK {
			failed += c.Name + ": " + c.Detail
		}
	}
	if snap.Readiness.Status != "not ready" || !strings.HasPrefix(failed, "model qwen: required, and nothing routable") {
		t.Fatalf("the status page's readiness: %+v", snap.Readiness)
	}

	// One replica of the required model returns: ready again.
	q1 = restartSim(t, q1, 0)
	waitFor(t, 20*time.Second, func() bool { c, _ := public("/readyz"); return c == 200 })
	expect("/readyz", 200, ready)
	time.Sleep(1500 * time.Millisecond) // the watch's next round: nothing more to log

	log := g.Log()
	count := func(re string) int { return len(regexp.MustCompile(re).FindAllString(log, -1)) }
	for _, c := range []struct {
		re   string
		want int
	}{
		{`"level":"warn"[^\n]*"msg":"model not ready"[^\n]*"model_type":"gemma"[^\n]*"reason":"no usable replica`, 2},
		{`"level":"info"[^\n]*"msg":"model ready again"[^\n]*"model_type":"gemma"`, 1},
		{`"level":"warn"[^\n]*"msg":"model not ready"[^\n]*"model_type":"qwen"[^\n]*"served_by":"gemma"`, 1},
		{`"msg":"model not ready"[^\n]*"model_type":"qwen"`, 1},
		{`"level":"info"[^\n]*"msg":"model ready again"[^\n]*"model_type":"qwen"`, 1},
		{`"level":"warn"[^\n]*"msg":"instance not ready"[^\n]*required, and nothing routable`, 1},
		{`"level":"info"[^\n]*"msg":"instance ready again"`, 1},
		// The probes' answers are in the access log, none as an error.
		{`"level":"info"[^\n]*"msg":"handled request"[^\n]*"uri":"/readyz"[^\n]*"status":503`, 3},
		{`"level":"error"[^\n]*/readyz`, 0},
	} {
		n := count(c.re)
		if c.want == 3 && n >= 3 {
			continue // at least the three probes above
		}
		if n != c.want {
			t.Errorf("%d log lines match %s, want %d", n, c.re, c.want)
		}
	}
}

// TestReadinessWithOnlyAnIdentityProvider: when identity providers are
// the only way in (no bearer, no mtls), an instance whose provider's keys
// were never fetched can admit nobody: it is not ready until they come.
// The public answer names no issuer; the report does.
func TestReadinessWithOnlyAnIdentityProvider(t *testing.T) {
	idp := startIdP(t, identityClients)
	issuer := idp.Issuer
	idp.Kill() // down from the gateway's start
	sim := startSim(t)
	g := startGateway(t, GatewayConfig{
		Options: fmt.Sprintf("\t\tauthenticator oidc {\n\t\t\ttrust %s {\n\t\t\t\taudience llmedge\n\t\t\t\tgrant groups ml-team -> qwen\n\t\t\t\trefresh 1s\n\t\t\t\tmin_refresh 1s\n\t\t\t}\n\t\t}", issuer),
		Models:  map[string]string{"qwen": staticModel(sim)},
	})
	if c, b := getBody(t, g.Client, g.Base+"/readyz"); c != 503 || b != `{"status":"not ready"}`+"\n" {
		t.Fatalf("/readyz before the provider's keys: %d %s", c, b)
	}
	code, rep := g.report(t)
	if code != 503 || len(rep.Detail) != 1 || !strings.HasPrefix(rep.Detail[0], "credentials: no way in") || !strings.Contains(rep.Detail[0], issuer) {
		t.Fatalf("the report before the provider's keys: %d %+v", code, rep)
	}
	u, _ := url.Parse(issuer)
	startIdP(t, identityClients, "-addr", u.Host)
	waitFor(t, 20*time.Second, func() bool { c, _ := getBody(t, g.Client, g.Base+"/readyz"); return c == 200 })
}
