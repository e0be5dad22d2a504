package e2e

import (
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"
)

// TestCredentialsNeverLogged: a gateway with an access log to a file (the
// site's plain `log`, no filter) and Caddy's debug logging. Every
// credential it accepts, on every door and the token endpoint (a
// password and a client secret in the grant's form, the access and
// refresh tokens it answers, an API key, an identity provider's token and
// the token exchanged for it; in Authorization, X-Api-Key, Api-Key and
// Basic), goes through; then neither the access log nor the process's
// own log holds any of them.
func TestCredentialsNeverLogged(t *testing.T) {
	sim := startSim(t)
	idp := startIdP(t, identityClients)
	const password = "pw-Zq8vKx3mLr0t"
	const clientSecret = "cs-Wn4pGh7yTb2e"
	hash := func(s string) string {
		h, err := bcrypt.GenerateFromPassword([]byte(s), 4)
		if err != nil {
			t.Fatal(err)
		}
		return string(h)
	}
	accessLog := filepath.Join(t.TempDir(), "access.log")
	g := startGateway(t, GatewayConfig{
		Global: "\tdebug",
		Options: fmt.Sprintf("\t\tuser carol %s qwen\n\t\tclient cli %s\n"+
			"\t\ttrust %s {\n\t\t\taudience llmedge\n\t\t\tuser_prefix idp:\n\t\t\tgrant groups ml-team -> qwen\n\t\t}",
			hash(password), hash(clientSecret), idp.Issuer),
		Models: map[string]string{"qwen": staticModel(sim)},
		Site:   fmt.Sprintf("log {\n\t\toutput file %s\n\t}\n\tllm_gateway", accessLog),
	})

	secrets := map[string]string{"password": password, "client secret": clientSecret}
	form := func(v url.Values, basic bool) map[string]any {
		t.Helper()
		req, _ := http.NewRequest("POST", g.Base+"/auth/token", strings.NewReader(v.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if basic {
			req.SetBasicAuth("cli", clientSecret)
		}
		resp, err := g.Client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if body := readJSON(t, resp, &m); resp.StatusCode != 200 {
			t.Fatalf("token endpoint: %s %s", resp.Status, body)
		}
		return m
	}
	// The password grant, with the client's secret in the form and then
	// in Basic; a wrong password too (logged as a failure, never quoted).
	login := form(url.Values{"grant_type": {"password"}, "username": {"carol"}, "password": {password},
		"client_id": {"cli"}, "client_secret": {clientSecret}}, false)
	access, refresh := login["access_token"].(string), login["refresh_token"].(string)
	if access == "" || refresh == "" {
		t.Fatalf("login: %v", login)
	}
	secrets["access token"], secrets["refresh token"] = access, refresh
	again := form(url.Values{"grant_type": {"refresh_token"}, "refresh_token": {refresh}}, true)
	secrets["refreshed access token"], secrets["refreshed refresh token"] = again["access_token"].(string), again["refresh_token"].(string)
	wrong, _ := http.NewRequest("POST", g.Base+"/auth/token", strings.NewReader(url.Values{
		"username": {"carol"}, "password": {password + "-wrong"}, "client_id": {"cli"}, "client_secret": {clientSecret}}.Encode()))
	wrong.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if resp, err := g.Client.Do(wrong); err != nil || resp.StatusCode != 401 {
		t.Fatalf("wrong password: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	secrets["API key"] = createKey(t, g, "--user", "carol")
	// An identity provider's token, and the llmedge token a token
	// exchange gives for it (the subject token in the form).
	secrets["provider token"] = idp.Token(t, "alice-svc", "alice-secret")
	exchanged := form(url.Values{"grant_type": {"urn:ietf:params:oauth:grant-type:token-exchange"},
		"subject_token": {secrets["provider token"]}, "subject_token_type": {"urn:ietf:params:oauth:token-type:access_token"},
		"client_id": {"cli"}, "client_secret": {clientSecret}}, false)
	secrets["exchanged token"] = exchanged["access_token"].(string)

	chat := `{"model":"qwen","messages":[{"role":"user","content":"hi"}]}`
	messages := `{"model":"qwen","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}`
	native := `{"model":"qwen","messages":[{"role":"user","content":"hi"}]}`
	doors := []struct{ path, body string }{
		{"/tasks/assistant_inference", native},
		{"/v1/chat/completions", chat},
		{"/v1/messages", messages},
		{"/v1/models", ""},
	}
	headers := []func(h http.Header, cred string){
		func(h http.Header, cred string) { h.Set("Authorization", "Bearer "+cred) },
		func(h http.Header, cred string) { h.Set("X-Api-Key", cred) },
		func(h http.Header, cred string) { h.Set("Api-Key", cred) },
	}
	for name, cred := range secrets {
		for _, d := range doors {
			for i, set := range headers {
				method := "POST"
				if d.body == "" {
					method = "GET"
				}
				req, _ := http.NewRequest(method, g.Base+d.path, strings.NewReader(d.body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Anthropic-Version", "2023-06-01")
				set(req.Header, cred)
				resp, err := g.Client.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				body := readJSON(t, resp, nil)
				// The credentials the doors take must have worked, so
				// that the test covers the paths that log a principal:
				// Authorization everywhere, X-Api-Key on Anthropic's.
				usable := name == "API key" || name == "refreshed access token" || name == "provider token" || name == "exchanged token"
				if usable && (i == 0 || i == 1 && d.path == "/v1/messages") && resp.StatusCode != 200 {
					t.Fatalf("%s in header %d on %s: %s %s", name, i, d.path, resp.Status, body)
				}
			}
		}
	}
	// The access log is written when each request ends: wait for the
	// last one's line.
	waitFor(t, 5*time.Second, func() bool {
		b, _ := os.ReadFile(accessLog)
		return strings.Count(string(b), `"/v1/models"`) >= len(secrets)*len(headers)
	})
	logs := map[string]string{"the access log": "", "the process's log": g.Log()}
	b, err := os.ReadFile(accessLog)
	if err != nil {
		t.Fatal(err)
	}
	logs["the access log"] = string(b)
	if !strings.Contains(logs["the access log"], `"X-Api-Key":["REDACTED"]`) {
		t.Errorf("the access log has no redacted X-Api-Key:\n%s", lastLines(logs["the access log"], 3))
	}
	if !strings.Contains(logs["the process's log"], `"level":"debug"`) {
		t.Fatal("the gateway did not log at debug level")
	}
	for where, text := range logs {
		for name, secret := range secrets {
			if strings.Contains(text, secret) {
				t.Errorf("%s holds the %s", where, name)
			}
		}
	}
}
