package e2e

import (
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func jwksKeys(t *testing.T, g *Gateway) []map[string]string {
	t.Helper()
	resp, err := g.Client.Get(g.Base + "/.well-known/jwks.json")
	if err != nil {
		t.Fatal(err)
	}
	var set struct{ Keys []map[string]string }
	readJSON(t, resp, &set)
	return set.Keys
}

func inferStatus(t *testing.T, g *Gateway, token string) int {
	t.Helper()
	resp := g.Infer(t, token, withModel("qwen"))
	readJSON(t, resp, nil)
	return resp.StatusCode
}

// TestSharedStorageAndRotation: two gateways sharing a storage verify each
// other's tokens, and a key rotated on one is honoured by the other at once.
func TestSharedStorageAndRotation(t *testing.T) {
	sim := startSim(t)
	data := t.TempDir()
	models := map[string]string{"qwen": staticModel(sim), "gemma": staticModel(sim)}
	a := startGateway(t, GatewayConfig{Models: models, Data: data})
	b := startGateway(t, GatewayConfig{Models: models, Data: data})

	oldTok := a.Token(t, "demo", "demo", "")
	if s := inferStatus(t, b, oldTok); s != 200 {
		t.Fatalf("token of gateway A on gateway B: %d", s)
	}
	out, err := exec.Command(filepath.Join(binDir, "llmedge"), "rotate-keys", "--address", strings.TrimPrefix(a.Admin, "http://")).CombinedOutput()
	if err != nil {
		t.Fatalf("rotate-keys: %v %s", err, out)
	}
	var rotated struct {
		ActiveKID string   `json:"active_kid"`
		KIDs      []string `json:"kids"`
	}
	if err := json.Unmarshal(out, &rotated); err != nil || len(rotated.KIDs) != 2 {
		t.Fatalf("rotate-keys said %s", out)
	}
	if keys := jwksKeys(t, a); len(keys) != 2 || keys[0]["kid"] != rotated.ActiveKID {
		t.Fatalf("JWKS after rotation: %v", keys)
	}
	newTok := a.Token(t, "demo", "demo", "")
	for name, g := range map[string]*Gateway{"A": a, "B": b} {
		for which, tok := range map[string]string{"old": oldTok, "new": newTok} {
			if s := inferStatus(t, g, tok); s != 200 {
				t.Fatalf("%s token on gateway %s: %d", which, name, s)
			}
		}
	}
	if keys := jwksKeys(t, b); len(keys) != 2 {
		t.Fatalf("gateway B's JWKS did not follow the rotation: %v", keys)
	}
}

// TestUsersFileReload: users added, or disabled, with `llmedge add-user`
// take effect without a restart.
func TestUsersFileReload(t *testing.T) {
	sim := startSim(t)
	file := filepath.Join(t.TempDir(), "users.json")
	addUser := func(name, password string, extra ...string) {
		t.Helper()
		cmd := exec.Command(filepath.Join(binDir, "llmedge"), append([]string{"add-user", "--file", file, "--username", name}, extra...)...)
		cmd.Stdin = strings.NewReader(password + "\n")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("add-user: %v %s", err, out)
		}
	}
	addUser("ann", "ann-pw", "--models", "qwen")
	g := startGateway(t, GatewayConfig{
		Options: "\t\tusers_file " + file + "\n\t\tusers_file_refresh 100ms",
		Models:  map[string]string{"qwen": staticModel(sim), "gemma": staticModel(sim)},
	})
	tok := g.Token(t, "ann", "ann-pw", "")
	if s := inferStatus(t, g, tok); s != 200 {
		t.Fatalf("ann: %d", s)
	}
	tokenStatus := func(user, pw string) int {
		resp, err := g.Client.PostForm(g.Base+"/auth/token", map[string][]string{"username": {user}, "password": {pw}})
		if err != nil {
			t.Fatal(err)
		}
		readJSON(t, resp, nil)
		return resp.StatusCode
	}
	if s := tokenStatus("ben", "ben-pw"); s != 401 {
		t.Fatalf("ben before being added: %d", s)
	}
	// Waited for in the log, not by asking for tokens until one comes:
	// each refusal counts towards the user's lockout, and on a busy
	// machine enough of them come before the reload to lock ben out.
	const reloaded = "reloaded the users file"
	since := g.logCount(reloaded)
	addUser("ben", "ben-pw")
	g.waitLog(t, reloaded, since, 30*time.Second)
	if s := tokenStatus("ben", "ben-pw"); s != 200 {
		t.Fatalf("ben once added: %d", s)
	}
	since = g.logCount(reloaded)
	addUser("ann", "ann-pw", "--disabled")
	g.waitLog(t, reloaded, since, 30*time.Second)
	if s := tokenStatus("ann", "ann-pw"); s != 401 {
		t.Fatalf("ann once disabled: %d", s)
	}
	// A broken file keeps the users as they were, once the gateway has
	// read it (and said it keeps them).
	const kept = "users file not reloaded; keeping the current users"
	before := g.logCount(kept)
	if err := os.WriteFile(file, []byte("{broken"), 0o600); err != nil {
		t.Fatal(err)
	}
	g.waitLog(t, kept, before, 10*time.Second)
	if s := tokenStatus("ben", "ben-pw"); s != 200 {
		t.Fatalf("ben after a broken users file: %d", s)
	}
}

func TestSigningAlgorithms(t *testing.T) {
	sim := startSim(t)
	models := map[string]string{"qwen": staticModel(sim), "gemma": staticModel(sim)}
	tests := []struct {
		name, options string
		jwks          int
		kty           string
	}{
		{"ES256", "\t\tsigning_alg ES256", 1, "EC"},
		{"HS256", "\t\tsigning_alg HS256\n\t\thmac_secret 0123456789abcdef0123456789abcdef-test", 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := startGateway(t, GatewayConfig{Options: tt.options, Models: models})
			tok := g.Token(t, "demo", "demo", "")
			var header struct{ Alg string }
			h, _ := jwtPart(tok, 0)
			if json.Unmarshal(h, &header) != nil || header.Alg != tt.name {
				t.Fatalf("token header %s", h)
			}
			if s := inferStatus(t, g, tok); s != 200 {
				t.Fatalf("inference with a %s token: %d", tt.name, s)
			}
			keys := jwksKeys(t, g)
			if len(keys) != tt.jwks || (tt.jwks > 0 && (keys[0]["kty"] != tt.kty || keys[0]["alg"] != tt.name)) {
				t.Fatalf("JWKS %v", keys)
			}
		})
	}
}

func TestAuthorizationHeaderAttacks(t *testing.T) {
	sim := startSim(t)
	g := startGateway(t, GatewayConfig{Models: map[string]string{"qwen": staticModel(sim), "gemma": staticModel(sim)}})
	tok := g.Token(t, "demo", "demo", "")
	parts := strings.Split(tok, ".")
	noneHeader := "eyJhbGciOiJub25lIiwidHlwIjoiSldUIn0" // {"alg":"none","typ":"JWT"}
	tests := []struct {
		name, header string
		detail       string
	}{
		{"basic scheme", "Basic ZGVtbzpkZW1v", "Not authenticated"},
		{"oversized", "Bearer " + strings.Repeat("a", 10000), "Could not validate credentials"},
		{"alg none", "Bearer " + noneHeader + "." + parts[1] + ".", "Could not validate credentials"},
		{"tampered payload", "Bearer " + parts[0] + "." + parts[1] + "x." + parts[2], "Could not validate credentials"},
		{"garbage", "Bearer \x01\x02", "Could not validate credentials"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest("POST", g.Base+"/tasks/assistant_inference", strings.NewReader(`{"messages":[{"role":"user","content":"x"}]}`))
			req.Header.Set("Authorization", tt.header)
			resp, err := g.Client.Do(req)
			if err != nil {
				t.Skipf("the client refused to send it: %v", err)
			}
			var e errorBody
			readJSON(t, resp, &e)
			if resp.StatusCode != 401 || e.detailText() != tt.detail || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
				t.Fatalf("%s %s %q", resp.Status, e.Detail, resp.Header.Get("WWW-Authenticate"))
			}
		})
	}
}

func jwtPart(tok string, i int) ([]byte, error) {
	p := strings.Split(tok, ".")
	return base64URL(p[i])
}
