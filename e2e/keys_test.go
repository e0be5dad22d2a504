package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/oauth2"
)

// llmedgeCmd runs the llmedge binary with args and returns its stdout and
// stderr.
func llmedgeCmd(t *testing.T, stdin string, args ...string) (string, string, error) {
	t.Helper()
	cmd := exec.Command(filepath.Join(binDir, "llmedge"), args...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	err := cmd.Run()
	return out.String(), errOut.String(), err
}

// adminAddr is the --address of g's admin API.
func (g *Gateway) adminAddr() string { return strings.TrimPrefix(g.Admin, "http://") }

// createKey runs `llmedge create-key` against g and returns the key.
func createKey(t *testing.T, g *Gateway, args ...string) string {
	t.Helper()
	out, errOut, err := llmedgeCmd(t, "", append([]string{"create-key", "--address", g.adminAddr()}, args...)...)
	if err != nil {
		t.Fatalf("create-key %v: %v\n%s", args, err, errOut)
	}
	key := strings.TrimSpace(out)
	if !strings.HasPrefix(key, "llme_") || len(key) != 48 || strings.Contains(key, "\n") {
		t.Fatalf("create-key printed %q", out)
	}
	if strings.Contains(errOut, key) {
		t.Fatal("create-key repeated the key on stderr")
	}
	return key
}

// infer answers the status and body of an inference for model with cred.
func inferWith(t *testing.T, g *Gateway, cred, model string) (int, errorBody, http.Header) {
	t.Helper()
	resp := g.Infer(t, cred, withModel(model))
	var e errorBody
	b := readJSON(t, resp, nil)
	_ = json.Unmarshal(b, &e)
	return resp.StatusCode, e, resp.Header
}

// TestAPIKeysAcrossInstances: a key made with the real create-key command
// on gateway A works on A and, at once, on B (they share a storage); it
// is scoped, listed without the key, expires, and once revoked on A is
// refused by A at once and by B within api_keys_refresh.
func TestAPIKeysAcrossInstances(t *testing.T) {
	sim := startSim(t)
	data := t.TempDir()
	const refresh = 500 * time.Millisecond
	cfg := GatewayConfig{
		Models:  map[string]string{"qwen": staticModel(sim), "gemma": staticModel(sim)},
		Data:    data,
		Options: "\t\tapi_keys_refresh " + refresh.String(),
	}
	a := startGateway(t, cfg)
	b := startGateway(t, cfg)

	key := createKey(t, a, "--user", "demo", "--models", "qwen", "--name", "ci-bot", "--expires", "1h")
	for name, g := range map[string]*Gateway{"A": a, "B": b} {
		if s, e, _ := inferWith(t, g, key, "qwen"); s != 200 {
			t.Fatalf("key on gateway %s: %d %s", name, s, e.Detail)
		}
		// Scoped to qwen, though demo may use gemma too.
		s, e, h := inferWith(t, g, key, "gemma")
		if s != 403 || !strings.Contains(h.Get("WWW-Authenticate"), `error="insufficient_scope"`) ||
			e.detailText() != "Not enough permissions: missing scope model:gemma" {
			t.Fatalf("key outside its models on gateway %s: %d %s %q", name, s, e.Detail, h.Get("WWW-Authenticate"))
		}
	}

	// The storage holds the hash, never the key.
	stored, err := os.ReadFile(filepath.Join(data, "llmedge", "api_keys.json"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(stored), key) || strings.Contains(string(stored), key[5:]) {
		t.Fatal("the storage holds the key")
	}

	// Listing, on either instance, never shows the key.
	for _, g := range []*Gateway{a, b} {
		out, errOut, err := llmedgeCmd(t, "", "list-keys", "--address", g.adminAddr())
		if err != nil {
			t.Fatalf("list-keys: %v %s", err, errOut)
		}
		if strings.Contains(out+errOut, key) || strings.Contains(out+errOut, key[5:]) {
			t.Fatal("list-keys shows the key")
		}
		for _, want := range []string{"NAME", "LAST USED", "ci-bot", "demo", "qwen"} {
			if !strings.Contains(out, want) {
				t.Fatalf("list-keys lacks %q:\n%s", want, out)
			}
		}
	}
	out, _, err := llmedgeCmd(t, "", "list-keys", "--json", "--address", a.adminAddr())
	var list struct {
		Keys []struct {
			ID, Name, User   string
			Models           []string
			Created, Expires time.Time
			LastUsed         *time.Time `json:"last_used"`
			Expired          bool
		}
	}
	if err != nil || json.Unmarshal([]byte(out), &list) != nil || len(list.Keys) != 1 {
		t.Fatalf("list-keys --json: %v %s", err, out)
	}
	k := list.Keys[0]
	if k.Name != "ci-bot" || k.User != "demo" || len(k.Models) != 1 || k.LastUsed == nil || k.Expired ||
		k.Expires.Sub(k.Created) != time.Hour || k.ID == "" {
		t.Fatalf("listed %+v", k)
	}

	// Refusals name the problem; nothing is created.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--user", "alice", "--models", "gemma"}, `may not use model`},
		{[]string{"--user", "nobody"}, `no user`},
		{[]string{"--user", "demo", "--name", "ci-bot"}, "HTTP 409"},
		{[]string{"--user", "demo", "--expires", "soon"}, "want a positive duration"},
		{[]string{"--user", "demo", "--name", "two words"}, "may only hold letters"},
	} {
		_, errOut, err := llmedgeCmd(t, "", append([]string{"create-key", "--address", a.adminAddr()}, tc.args...)...)
		if err == nil || !strings.Contains(errOut, tc.want) {
			t.Fatalf("create-key %v: %v, stderr %s; want %q", tc.args, err, errOut, tc.want)
		}
	}

	// Expiry, on both instances. 5s: the command that makes the key and
	// the first request took over 2s in a loaded CI run.
	short := createKey(t, a, "--user", "demo", "--expires", "5s")
	if s, _, h := inferWith(t, b, short, "gemma"); s != 200 {
		t.Fatalf("short-lived key on B: %d %q", s, h.Get("WWW-Authenticate"))
	}
	// Once A refuses it as expired (a request every 100 ms, for at most
	// a few seconds past its 5), B must refuse it too.
	if !pollEvery(15*time.Second, 100*time.Millisecond, func() bool {
		s, _, h := inferWith(t, a, short, "gemma")
		return s == 401 && strings.Contains(h.Get("WWW-Authenticate"), "the API key expired")
	}) {
		t.Fatal("the key made to expire in 5s still works 15s later")
	}
	for _, g := range []*Gateway{a, b} {
		s, _, h := inferWith(t, g, short, "gemma")
		if s != 401 || !strings.Contains(h.Get("WWW-Authenticate"), "the API key expired") {
			t.Fatalf("expired key: %d %q", s, h.Get("WWW-Authenticate"))
		}
	}

	// Revoked by name on A: A refuses at once, B within its refresh.
	revoked := time.Now()
	if _, errOut, err := llmedgeCmd(t, "", "revoke-key", "ci-bot", "--address", a.adminAddr()); err != nil || !strings.Contains(errOut, "revoked API key") {
		t.Fatalf("revoke-key: %v %s", err, errOut)
	}
	if s, _, h := inferWith(t, a, key, "qwen"); s != 401 || !strings.Contains(h.Get("WWW-Authenticate"), "invalid or revoked") {
		t.Fatalf("revoked key on A: %d %q", s, h.Get("WWW-Authenticate"))
	}
	waitFor(t, 2*refresh+time.Second, func() bool {
		s, _, _ := inferWith(t, b, key, "qwen")
		return s == 401
	})
	t.Logf("B refused the revoked key %v after revoke-key started (api_keys_refresh %v)", time.Since(revoked).Round(time.Millisecond), refresh)
	if _, errOut, err := llmedgeCmd(t, "", "revoke-key", "--name", "ci-bot", "--address", b.adminAddr()); err == nil || !strings.Contains(errOut, "HTTP 404") {
		t.Fatalf("revoking twice: %v %s", err, errOut)
	}

	// Last use is written back when an instance stops: a key used only
	// on A shows its use in B's listing once A has stopped.
	onlyA := createKey(t, a, "--user", "demo", "--name", "only-a")
	if s, _, _ := inferWith(t, a, onlyA, "qwen"); s != 200 {
		t.Fatalf("key on A: %d", s)
	}
	a.Stop(t)
	out, _, err = llmedgeCmd(t, "", "list-keys", "--json", "--address", b.adminAddr())
	if err != nil || json.Unmarshal([]byte(out), &list) != nil {
		t.Fatalf("list-keys on B: %v %s", err, out)
	}
	for _, k := range list.Keys {
		if k.Name == "only-a" && k.LastUsed == nil {
			t.Fatalf("A's use of only-a was not written back: %+v", k)
		}
	}
	for _, g := range []*Gateway{a, b} {
		if strings.Contains(g.Log(), key[5:]) || strings.Contains(g.Log(), onlyA[5:]) {
			t.Fatal("a gateway logged a key")
		}
	}
}

// TestAPIKeyAdminAPI: the admin endpoints answer bad requests with a 4xx
// that names the problem.
func TestAPIKeyAdminAPI(t *testing.T) {
	g := startGateway(t, GatewayConfig{})
	do := func(method, path, body string) (int, string) {
		req, _ := http.NewRequest(method, g.Admin+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b := readJSON(t, resp, nil)
		return resp.StatusCode, string(b)
	}
	tests := []struct {
		method, path, body string
		status             int
		want               string
	}{
		{"POST", "/llmedge/keys", `{"user":"demo","modles":["qwen"]}`, 400, `unknown field \"modles\"`},
		{"POST", "/llmedge/keys", `[]`, 400, "must be a JSON object"},
		{"POST", "/llmedge/keys", `{"user":"demo"} {}`, 400, "unexpected data"},
		{"POST", "/llmedge/keys", `{"user":"demo","expires":"-1h"}`, 400, "positive duration"},
		{"POST", "/llmedge/keys", `{"user":"demo","models":["llama"]}`, 400, `may not use model \"llama\"`},
		{"POST", "/llmedge/keys", `{"user":"demo","name":"` + strings.Repeat("x", 70<<10) + `"}`, 413, "over"},
		{"PUT", "/llmedge/keys", ``, 405, "not allowed"},
		{"GET", "/llmedge/keys/abc", ``, 405, "not allowed"},
		{"DELETE", "/llmedge/keys/", ``, 400, "want DELETE /llmedge/keys/"},
		{"DELETE", "/llmedge/keys/nope", ``, 404, `no key has the id or name \"nope\"`},
		{"POST", "/llmedge/keys", `{"user":"demo","name":"ok"}`, 201, `"key":"llme_`},
		{"GET", "/llmedge/keys", ``, 200, `"name":"ok"`},
	}
	for _, tt := range tests {
		status, body := do(tt.method, tt.path, tt.body)
		if status != tt.status || !strings.Contains(body, tt.want) {
			t.Errorf("%s %s %.60s: %d %.300s; want %d %q", tt.method, tt.path, tt.body, status, body, tt.status, tt.want)
		}
	}
	// Caddy's admin protections hold: a foreign Origin is refused.
	req, _ := http.NewRequest("GET", g.Admin+"/llmedge/keys", nil)
	req.Header.Set("Origin", "https://evil.example")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	readJSON(t, resp, nil)
	if resp.StatusCode != 403 {
		t.Fatalf("admin API from a foreign origin: %d", resp.StatusCode)
	}
}

// TestRefreshOAuth2Client: Go's x/oauth2 client logs in with the password
// grant (as a confidential client) on gateway A and refreshes there; the
// replaced refresh token, replayed on gateway B, revokes the whole login,
// including the token A issued in exchange.
func TestRefreshOAuth2Client(t *testing.T) {
	sim := startSim(t)
	data := t.TempDir()
	cfg := GatewayConfig{
		Models:  map[string]string{"qwen": staticModel(sim), "gemma": staticModel(sim)},
		Data:    data,
		Options: "\t\tclient cli " + demoHash, // client secret "demo"
	}
	a := startGateway(t, cfg)
	b := startGateway(t, cfg)
	conf := func(g *Gateway) (*oauth2.Config, context.Context) {
		return &oauth2.Config{
			ClientID: "cli", ClientSecret: "demo",
			Endpoint: oauth2.Endpoint{TokenURL: g.Base + "/auth/token", AuthStyle: oauth2.AuthStyleInHeader},
			Scopes:   []string{"model:qwen"},
		}, context.WithValue(context.Background(), oauth2.HTTPClient, g.Client)
	}
	confA, ctxA := conf(a)
	login, err := confA.PasswordCredentialsToken(ctxA, "demo", "demo")
	if err != nil {
		t.Fatal(err)
	}
	if login.RefreshToken == "" || !strings.HasPrefix(login.RefreshToken, "llmr_") || login.Extra("scope") != "model:qwen" {
		t.Fatalf("login %+v", login)
	}
	// The refresh token is no access token.
	if s, _, h := inferWith(t, a, login.RefreshToken, "qwen"); s != 401 || !strings.Contains(h.Get("WWW-Authenticate"), "refresh token") {
		t.Fatalf("refresh token as Bearer: %d", s)
	}

	// x/oauth2 refreshes an expired token on its own.
	stale := &oauth2.Token{AccessToken: login.AccessToken, RefreshToken: login.RefreshToken, Expiry: time.Now().Add(-time.Minute)}
	fresh, err := confA.TokenSource(ctxA, stale).Token()
	if err != nil {
		t.Fatal(err)
	}
	if fresh.RefreshToken == "" || fresh.RefreshToken == login.RefreshToken || fresh.AccessToken == login.AccessToken {
		t.Fatalf("refresh did not rotate: %+v", fresh)
	}
	for _, g := range []*Gateway{a, b} {
		if s, _, _ := inferWith(t, g, fresh.AccessToken, "qwen"); s != 200 {
			t.Fatalf("refreshed access token: %d", s)
		}
		if s, _, _ := inferWith(t, g, fresh.AccessToken, "gemma"); s != 403 {
			t.Fatalf("refreshed access token beyond the login's scope: %d", s)
		}
	}

	// The replaced token, replayed on B.
	confB, ctxB := conf(b)
	_, err = confB.TokenSource(ctxB, stale).Token()
	var re *oauth2.RetrieveError
	if !errors.As(err, &re) || re.ErrorCode != "invalid_grant" || re.Response.StatusCode != 400 ||
		!strings.Contains(re.ErrorDescription, "already used") {
		t.Fatalf("replayed refresh token on B: %v", err)
	}
	// The whole login is revoked: the token A issued in exchange is dead
	// on A as well.
	_, err = confA.TokenSource(ctxA, &oauth2.Token{RefreshToken: fresh.RefreshToken, Expiry: time.Now().Add(-time.Minute)}).Token()
	if !errors.As(err, &re) || re.ErrorCode != "invalid_grant" || !strings.Contains(re.ErrorDescription, "revoked") {
		t.Fatalf("the family's current token after the replay: %v", err)
	}
	// Another login is untouched.
	other, err := confA.PasswordCredentialsToken(ctxA, "demo", "demo")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := confB.TokenSource(ctxB, &oauth2.Token{RefreshToken: other.RefreshToken, Expiry: time.Now().Add(-time.Minute)}).Token(); err != nil {
		t.Fatalf("another login's refresh on B: %v", err)
	}
	// The replay is logged by B, without the token.
	waitFor(t, 2*time.Second, func() bool { return strings.Contains(b.Log(), "refresh token reused") })
	for _, g := range []*Gateway{a, b} {
		for _, tok := range []string{login.RefreshToken, fresh.RefreshToken, other.RefreshToken} {
			if strings.Contains(g.Log(), tok[len(tok)-43:]) {
				t.Fatal("a gateway logged a refresh token")
			}
		}
	}
}

// postRefresh posts a refresh grant to g.
func postRefresh(t *testing.T, g *Gateway, rt, scope string) (int, map[string]any) {
	t.Helper()
	form := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {rt}}
	if scope != "" {
		form.Set("scope", scope)
	}
	resp, err := g.Client.PostForm(g.Base+"/auth/token", form)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	readJSON(t, resp, &m)
	return resp.StatusCode, m
}

func loginRefresh(t *testing.T, g *Gateway, user, password string) string {
	t.Helper()
	resp, err := g.Client.PostForm(g.Base+"/auth/token", url.Values{"username": {user}, "password": {password}})
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		RefreshToken string `json:"refresh_token"`
	}
	if readJSON(t, resp, &m); resp.StatusCode != 200 || m.RefreshToken == "" {
		t.Fatalf("login: %d", resp.StatusCode)
	}
	return m.RefreshToken
}

// TestRefreshRaceAcrossInstances: one refresh token sent to A and B at the
// same moment. The storage lock serializes the two: exactly one gets new
// tokens, the other is a reuse, and the family is revoked.
func TestRefreshRaceAcrossInstances(t *testing.T) {
	data := t.TempDir()
	a := startGateway(t, GatewayConfig{Data: data})
	b := startGateway(t, GatewayConfig{Data: data})
	for round := range 3 {
		rt := loginRefresh(t, a, "demo", "demo")
		var wg sync.WaitGroup
		statuses := make([]int, 2)
		answers := make([]map[string]any, 2)
		for i, g := range []*Gateway{a, b} {
			wg.Go(func() { statuses[i], answers[i] = postRefresh(t, g, rt, "") })
		}
		wg.Wait()
		won := -1
		for i, s := range statuses {
			switch {
			case s == 200 && won < 0:
				won = i
			case s == 400 && answers[i]["error"] == "invalid_grant":
			default:
				t.Fatalf("round %d: statuses %v, answers %v", round, statuses, answers)
			}
		}
		if won < 0 {
			t.Fatalf("round %d: neither use succeeded: %v", round, answers)
		}
		next, _ := answers[won]["refresh_token"].(string)
		if s, m := postRefresh(t, a, next, ""); s != 400 || m["error"] != "invalid_grant" {
			t.Fatalf("round %d: the winner's token after the race: %d %v", round, s, m)
		}
	}
}

// TestKeysAndRefreshOfDisabledUser: disabling a user (in the users file)
// stops its API keys and refresh tokens, without a restart. Enabled
// again, its keys work again but its earlier logins stay ended: a
// session stolen before the suspension must not come back with it.
func TestKeysAndRefreshOfDisabledUser(t *testing.T) {
	sim := startSim(t)
	file := filepath.Join(t.TempDir(), "users.json")
	addUser := func(extra ...string) {
		t.Helper()
		if _, errOut, err := llmedgeCmd(t, "ann-pw\n", append([]string{"add-user", "--file", file, "--username", "ann", "--models", "qwen"}, extra...)...); err != nil {
			t.Fatalf("add-user: %v %s", err, errOut)
		}
	}
	addUser()
	g := startGateway(t, GatewayConfig{
		Options: "\t\tusers_file " + file + "\n\t\tusers_file_refresh 100ms",
		Models:  map[string]string{"qwen": staticModel(sim), "gemma": staticModel(sim)},
	})
	key := createKey(t, g, "--user", "ann")
	rt := loginRefresh(t, g, "ann", "ann-pw")
	if s, _, _ := inferWith(t, g, key, "qwen"); s != 200 {
		t.Fatalf("ann's key: %d", s)
	}
	addUser("--disabled")
	waitFor(t, 5*time.Second, func() bool { s, _, _ := inferWith(t, g, key, "qwen"); return s == 401 })
	if s, m := postRefresh(t, g, rt, ""); s != 400 || m["error"] != "invalid_grant" {
		t.Fatalf("disabled user's refresh: %d %v", s, m)
	}
	addUser() // enabled again
	waitFor(t, 5*time.Second, func() bool { s, _, _ := inferWith(t, g, key, "qwen"); return s == 200 })
	if s, m := postRefresh(t, g, rt, ""); s != 400 || m["error"] != "invalid_grant" {
		t.Fatalf("re-enabled user's refresh token from before the suspension: %d %v", s, m)
	}
	nextSecond() // the revocation ends the logins of its whole second
	if s, m := postRefresh(t, g, loginRefresh(t, g, "ann", "ann-pw"), ""); s != 200 {
		t.Fatalf("re-enabled user's new login, refreshed: %d %v", s, m)
	}
}
