package e2e

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestPrincipalsBySource: an identity provider's user named like a local
// user ("alice" from a provider trusted without user_prefix) is another
// principal: its own rate limit counter (2 rpm each, not 2 together), its
// own budget counter, its own ledger rows, under its source-qualified name; and a
// configuration whose local user lies in a provider's namespace ("kc:eve"
// beside `user_prefix kc:`) is refused at load, naming both.
func TestPrincipalsBySource(t *testing.T) {
	idp := startIdP(t, identityClients)
	sim := startSim(t)
	trust := fmt.Sprintf("\t\ttrust %s {\n\t\t\taudience llmedge\n\t\t\tgrant groups ml-team -> qwen\n\t\t}\n", idp.Issuer)
	g := startGateway(t, GatewayConfig{
		Options: trust + "\t\tlimits {\n\t\t\trpm 2\n\t\t\tbudget tokens 1000000 per day\n\t\t}\n" +
			"\t\tledger {\n\t\t\tflush_interval 100ms\n\t\t}",
		Models: map[string]string{"qwen": staticModel(sim)},
	})
	local := g.Token(t, "alice", "demo", "")
	outside := idp.Token(t, "alice-svc", "alice-secret")
	qualified := idp.Issuer + "#alice"

	// Two each within the minute: each has its own counter.
	for i, cred := range []string{local, outside, local, outside} {
		if st, e, _ := inferWith(t, g, cred, "qwen"); st != 200 {
			t.Fatalf("request %d: %d %q (the provider's alice and the local alice share a counter?)", i+1, st, e.detailText())
		}
	}
	// The third of each is refused, each under its own name.
	for cred, who := range map[string]string{local: "user 'alice'", outside: "user '" + qualified + "'"} {
		st, e, _ := inferWith(t, g, cred, "qwen")
		if st != 429 || !strings.Contains(e.detailText(), who) {
			t.Fatalf("third request of %s: %d %q", who, st, e.detailText())
		}
	}
	// Each has its own budget counter.
	m := adminMetrics(t, g)
	for _, name := range []string{"alice", qualified} {
		if !strings.Contains(m, `llmedge_budget_used_ratio{name="`+name+`",per="day",scope="user",unit="tokens"}`) {
			t.Fatalf("no budget counter of %s:\n%s", name, grepLines(m, "budget_used"))
		}
	}
	// Each has its own ledger rows: its two answers (a request the rate
	// limit refused is counted in metrics, not written).
	waitFor(t, 10*time.Second, func() bool {
		u := usageCmd(t, "--address", g.adminAddr(), "--by", "user")
		return u["alice"].Requests >= 2 && u[qualified].Requests >= 2
	})
	byUser := usageCmd(t, "--address", g.adminAddr(), "--by", "user")
	if byUser["alice"].Requests != 2 || byUser[qualified].Requests != 2 {
		t.Fatalf("ledger by user: %+v, want 2 rows for alice and 2 for %s", byUser, qualified)
	}

	// The provider's alice exchanged for an llmedge token is still the
	// provider's alice (its counter is spent: the refusal names it).
	form := url.Values{"grant_type": {"urn:ietf:params:oauth:grant-type:token-exchange"}, "subject_token": {outside},
		"subject_token_type": {"urn:ietf:params:oauth:token-type:access_token"}}
	resp, err := g.Client.PostForm(g.Base+"/auth/token", form)
	if err != nil {
		t.Fatal(err)
	}
	var tok struct {
		AccessToken  string `json:"access_token"`
		RefreshToken string `json:"refresh_token"`
	}
	if body := readJSON(t, resp, &tok); resp.StatusCode != 200 {
		t.Fatalf("exchange: %s %s", resp.Status, body)
	}
	if st, e, _ := inferWith(t, g, tok.AccessToken, "qwen"); st != 429 || !strings.Contains(e.detailText(), "user '"+qualified+"'") {
		t.Fatalf("the exchanged token: %d %q, want the provider's alice's 429", st, e.detailText())
	}
	// The provider's namespace changes: the exchanged token, whose name is
	// no longer in it (and could be someone else's), is refused, and so is
	// its refresh token.
	g.Reload(t, func(s string) string {
		return strings.Replace(s, "audience llmedge\n", "audience llmedge\n\t\t\tuser_prefix kc:\n", 1)
	})
	if st, _, _ := inferWith(t, g, tok.AccessToken, "qwen"); st != 401 {
		t.Fatalf("an exchanged token outside its provider's namespace: %d, want 401", st)
	}
	if st, body := postRefresh(t, g, tok.RefreshToken, ""); st != 400 || body["error"] != "invalid_grant" {
		t.Fatalf("its refresh token: %d %v", st, body)
	}
	// The provider's own token now names kc:alice: a new name, a new
	// counter.
	if st, e, _ := inferWith(t, g, outside, "qwen"); st != 200 {
		t.Fatalf("the provider's token after the change: %d %q", st, e.detailText())
	}

	// A local user in a provider's namespace: the configuration is refused.
	cfg := GatewayConfig{
		Options: fmt.Sprintf("\t\ttrust %s {\n\t\t\taudience llmedge\n\t\t\tuser_prefix kc:\n\t\t}\n", idp.Issuer) +
			"\t\tuser kc:eve " + demoHash + " qwen",
		Models: map[string]string{"qwen": staticModel(sim)},
	}
	dir := t.TempDir()
	conf := filepath.Join(dir, "Caddyfile")
	probe := &Gateway{dir: dir, data: filepath.Join(dir, "data"), port: pickPort(t), adminPort: pickPort(t)}
	if err := os.WriteFile(conf, probe.caddyfile(t, cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	_, errOut, err := llmedgeCmd(t, "", "validate", "--config", conf, "--adapter", "caddyfile")
	// (The log line is JSON: its quotes are escaped.)
	if err == nil || !strings.Contains(errOut, `local user \"kc:eve\" has a name in the namespace of `+idp.Issuer+` (user_prefix \"kc:\")`) {
		t.Fatalf("a local user in a provider's namespace: %v\n%s", err, lastLines(errOut, 3))
	}
}
