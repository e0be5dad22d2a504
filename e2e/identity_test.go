package e2e

import (
	"bufio"
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/llmedge/llmedge/internal/freeport"
)

// ---- the OpenID provider (tools/oidcprovider) ----

// IdP is an oidcprovider process: zitadel/oidc's OpenID provider with
// client-credentials clients that get JWT access tokens.
type IdP struct {
	Issuer string
	cmd    *exec.Cmd
	done   chan struct{}
}

var (
	idpBuild     sync.Once
	idpBinary    string
	idpBuildErr  error
	idpBuildDir  string
	idpBuildLock sync.Mutex
)

// oidcProviderBinary is bin/oidcprovider (`make oidcprovider`), or one
// built from tools/oidcprovider into a temporary folder when it is
// missing (seconds with a warm module cache).
func oidcProviderBinary(t testing.TB) string {
	t.Helper()
	idpBuildLock.Lock()
	defer idpBuildLock.Unlock()
	idpBuild.Do(func() {
		if p, err := filepath.Abs("../bin/oidcprovider"); err == nil {
			if _, err := os.Stat(p); err == nil {
				idpBinary = p
				return
			}
		}
		idpBuildDir, idpBuildErr = os.MkdirTemp("", "oidcprovider")
		if idpBuildErr != nil {
			return
		}
		out := filepath.Join(idpBuildDir, "oidcprovider")
		cmd := exec.Command("go", "build", "-o", out, ".")
		cmd.Dir = "../tools/oidcprovider"
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if idpBuildErr = cmd.Run(); idpBuildErr == nil {
			idpBinary = out
		}
	})
	if idpBinary == "" {
		t.Fatalf("the OpenID provider could not be built (make oidcprovider): %v", idpBuildErr)
	}
	return idpBinary
}

// idpClient is a client-credentials client of the provider.
type idpClient struct {
	ID       string         `json:"id"`
	Secret   string         `json:"secret"`
	Subject  string         `json:"subject,omitempty"`
	Audience []string       `json:"audience"`
	Claims   map[string]any `json:"claims,omitempty"`
	Lifetime string         `json:"lifetime,omitempty"`
}

func startIdP(t testing.TB, clients []idpClient, args ...string) *IdP {
	t.Helper()
	needBinaries(t)
	bin := oidcProviderBinary(t)
	file := filepath.Join(t.TempDir(), "clients.json")
	b, _ := json.Marshal(clients)
	if err := os.WriteFile(file, b, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, append([]string{"-addr", "127.0.0.1:0", "-clients", file}, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := new(syncBuffer)
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &IdP{cmd: cmd, done: make(chan struct{})}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		_ = cmd.Process.Kill()
		t.Fatalf("oidcprovider did not start: %v\n%s", err, stderr)
	}
	p.Issuer = strings.TrimSpace(strings.TrimPrefix(line, "oidcprovider listening on "))
	go func() { _, _ = io.Copy(io.Discard, out); _ = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.Kill()
		if t.Failed() {
			t.Logf("oidcprovider stderr:\n%s", lastLines(stderr.String(), 20))
		}
	})
	return p
}

// Kill stops the provider at once.
func (p *IdP) Kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// Token gets an access token by the client credentials grant.
func (p *IdP) Token(t testing.TB, id, secret string) string {
	t.Helper()
	req, _ := http.NewRequest("POST", p.Issuer+"/oauth/token", strings.NewReader(url.Values{"grant_type": {"client_credentials"}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(id, secret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var tok struct {
		AccessToken string `json:"access_token"`
	}
	body := readJSON(t, resp, &tok)
	if resp.StatusCode != 200 || tok.AccessToken == "" {
		t.Fatalf("provider token for %s: %s %s", id, resp.Status, body)
	}
	return tok.AccessToken
}

func (p *IdP) post(t testing.TB, path string) map[string]any {
	t.Helper()
	resp, err := http.Post(p.Issuer+path, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	readJSON(t, resp, &out)
	return out
}

// Stats are the provider's request counts by endpoint (discovery, jwks,
// token).
func (p *IdP) Stats(t testing.TB) map[string]int {
	t.Helper()
	resp, err := http.Get(p.Issuer + "/test/stats")
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]int
	readJSON(t, resp, &out)
	return out
}

// publicRSAKey is the provider's first RSA key as published, for forging.
func (p *IdP) publicRSAKey(t testing.TB) (string, *rsa.PublicKey) {
	t.Helper()
	resp, err := http.Get(p.Issuer + "/keys")
	if err != nil {
		t.Fatal(err)
	}
	var set struct {
		Keys []struct{ Kid, Kty, N, E string }
	}
	readJSON(t, resp, &set)
	for _, k := range set.Keys {
		if k.Kty == "RSA" {
			n, _ := base64.RawURLEncoding.DecodeString(k.N)
			e, _ := base64.RawURLEncoding.DecodeString(k.E)
			return k.Kid, &rsa.PublicKey{N: new(big.Int).SetBytes(n), E: int(new(big.Int).SetBytes(e).Int64())}
		}
	}
	t.Fatal("no RSA key published")
	return "", nil
}

// ---- the tests ----

// identityGateway trusts idp: ml-team gets qwen and gemma, interns gemma
// under the "small" tier (2 requests a minute); keys refreshed every 2s,
// at most once a second on an unknown kid.
func identityGateway(t *testing.T, idp *IdP, sim *Sim, statusPort int) *Gateway {
	t.Helper()
	return startGateway(t, GatewayConfig{
		Options: fmt.Sprintf(`		trust %s {
			audience llmedge
			user_prefix idp:
			clock_skew 1s
			refresh 2s
			min_refresh 1s
			grant groups ml-team -> qwen gemma
			grant groups interns -> gemma
			tier groups interns -> small
		}
		tier small {
			rpm 2
		}`, idp.Issuer),
		Models: map[string]string{"qwen": staticModel(sim), "gemma": staticModel(sim)},
		Sites:  fmt.Sprintf("http://127.0.0.1:%d {\n\tbind 127.0.0.1\n\tllm_status\n}\n", statusPort),
	})
}

var identityClients = []idpClient{
	{ID: "alice-svc", Secret: "alice-secret", Subject: "alice", Audience: []string{"llmedge"}, Claims: map[string]any{"groups": []string{"ml-team"}}},
	{ID: "bob-svc", Secret: "bob-secret", Subject: "bob", Audience: []string{"llmedge"}, Claims: map[string]any{"groups": []string{"interns"}}},
	{ID: "other-aud", Secret: "x", Audience: []string{"someone-else"}, Claims: map[string]any{"groups": []string{"ml-team"}}},
	{ID: "short", Secret: "x", Audience: []string{"llmedge"}, Lifetime: "1s", Claims: map[string]any{"groups": []string{"ml-team"}}},
}

// checkInvalidToken asserts the clean 401 of a refused credential on the
// native door: FastAPI's detail, a Bearer challenge, nothing of the token.
func checkInvalidToken(t *testing.T, resp *http.Response, token string) {
	t.Helper()
	body := readJSON(t, resp, nil)
	if resp.StatusCode != 401 || string(body) != `{"detail":"Could not validate credentials"}`+"\n" {
		t.Fatalf("%s %s, want 401 Could not validate credentials", resp.Status, body)
	}
	ch := resp.Header.Get("WWW-Authenticate")
	if !strings.HasPrefix(ch, `Bearer realm="llmedge", error="invalid_token"`) {
		t.Fatalf("challenge %q", ch)
	}
	if len(token) > 20 && (strings.Contains(ch, token[len(token)-20:]) || strings.Contains(string(body), token[len(token)-20:])) {
		t.Fatal("the answer echoes the token")
	}
}

func modelIDs(t *testing.T, resp *http.Response) string {
	t.Helper()
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	body := readJSON(t, resp, &list)
	if resp.StatusCode != 200 {
		t.Fatalf("/v1/models: %s %s", resp.Status, body)
	}
	var ids []string
	for _, m := range list.Data {
		ids = append(ids, m.ID)
	}
	return strings.Join(ids, " ")
}

// TestIdentityProvider runs a real OpenID provider and a gateway that
// trusts it: tokens by client credentials on both doors, claims mapped to
// models and limits, token exchange, revocation, forged tokens, a key
// rotation, a key removal and the provider's outage.
func TestIdentityProvider(t *testing.T) {
	idp := startIdP(t, identityClients)
	sim := startSim(t)
	statusPort := freeport.Must(t)
	g := identityGateway(t, idp, sim, statusPort)
	alice := idp.Token(t, "alice-svc", "alice-secret")
	bob := idp.Token(t, "bob-svc", "bob-secret")

	t.Run("both doors", func(t *testing.T) {
		if resp := g.Infer(t, alice, withModel("qwen")); resp.StatusCode != 200 {
			t.Fatalf("native: %s %s", resp.Status, readJSON(t, resp, nil))
		}
		resp := g.v1(t, "POST", "/v1/chat/completions", alice, `{"model":"qwen","messages":[{"role":"user","content":"hi"}]}`)
		if body := readJSON(t, resp, nil); resp.StatusCode != 200 {
			t.Fatalf("openai: %s %s", resp.Status, body)
		}
		// An llmedge user's token still works beside them.
		if resp := g.Infer(t, g.Token(t, "demo", "demo", ""), withModel("qwen")); resp.StatusCode != 200 {
			t.Fatalf("local user: %s", resp.Status)
		}
	})

	t.Run("groups give models and limits", func(t *testing.T) {
		if got := modelIDs(t, g.v1(t, "GET", "/v1/models", alice, "")); got != "gemma qwen" && got != "qwen gemma" {
			t.Fatalf("alice's models %q", got)
		}
		if got := modelIDs(t, g.v1(t, "GET", "/v1/models", bob, "")); got != "gemma" {
			t.Fatalf("bob's models %q", got)
		}
		resp := g.Infer(t, bob, withModel("qwen"))
		if body := readJSON(t, resp, nil); resp.StatusCode != 403 || !strings.Contains(string(body), "missing scope model:qwen") {
			t.Fatalf("bob on qwen: %s %s", resp.Status, body)
		}
		// bob's tier allows 2 requests a minute (the 403 above counted
		// none); alice has no limit.
		for i := range 3 {
			resp := g.Infer(t, bob, withModel("gemma"))
			body := readJSON(t, resp, nil)
			switch {
			case i < 2 && resp.StatusCode != 200:
				t.Fatalf("bob #%d: %s %s", i+1, resp.Status, body)
			case i == 2 && (resp.StatusCode != 429 || !strings.Contains(string(body), "user 'idp:bob'") || !strings.Contains(string(body), "2 requests per minute")):
				t.Fatalf("bob #3: %s %s", resp.Status, body)
			}
		}
		for i := range 4 {
			if resp := g.Infer(t, alice, withModel("gemma")); resp.StatusCode != 200 {
				t.Fatalf("alice #%d: %s", i+1, resp.Status)
			}
		}
	})

	t.Run("forged and foreign tokens", func(t *testing.T) {
		kid, pub := idp.publicRSAKey(t)
		claims := func() jwt.MapClaims {
			return jwt.MapClaims{"iss": idp.Issuer, "sub": "mallory", "aud": "llmedge", "groups": []string{"ml-team"},
				"exp": time.Now().Add(time.Hour).Unix(), "iat": time.Now().Unix()}
		}
		none := jwt.NewWithClaims(jwt.SigningMethodNone, claims())
		none.Header["kid"] = kid
		noneTok, _ := none.SignedString(jwt.UnsafeAllowNoneSignatureType)
		der, _ := x509.MarshalPKIXPublicKey(pub)
		hs := jwt.NewWithClaims(jwt.SigningMethodHS256, claims())
		hs.Header["kid"] = kid
		hsTok, _ := hs.SignedString(der)
		other := startIdP(t, identityClients)
		short := idp.Token(t, "short", "x")
		time.Sleep(2500 * time.Millisecond) // past its second of life and the skew
		for _, tc := range []struct{ name, token string }{
			{"alg none", noneTok},
			{"HS256 signed with the public key", hsTok},
			{"wrong audience", idp.Token(t, "other-aud", "x")},
			{"expired", short},
		} {
			t.Run(tc.name, func(t *testing.T) {
				checkInvalidToken(t, g.Infer(t, tc.token, withModel("qwen")), tc.token)
			})
		}
		// Another provider's token: not trusted, so bearer refuses it as
		// a token of another service.
		foreign := other.Token(t, "alice-svc", "alice-secret")
		checkInvalidToken(t, g.Infer(t, foreign, withModel("qwen")), foreign)
		resp := g.v1(t, "POST", "/v1/chat/completions", foreign, `{"model":"qwen","messages":[{"role":"user","content":"hi"}]}`)
		if body := readJSON(t, resp, nil); resp.StatusCode != 401 || !strings.Contains(string(body), `"code":"invalid_api_key"`) {
			t.Fatalf("openai door, foreign token: %s %s", resp.Status, body)
		}
	})

	t.Run("unknown kid flood", func(t *testing.T) {
		// Tokens signed by another provider's key but claiming this
		// issuer, each with a new kid: at most one fetch a second.
		other := startIdP(t, identityClients)
		base := other.Token(t, "alice-svc", "alice-secret")
		parts := strings.Split(base, ".")
		before := idp.Stats(t)
		start := time.Now()
		n := 0
		for time.Since(start) < 3*time.Second {
			h, _ := json.Marshal(map[string]string{"alg": "RS256", "typ": "JWT", "kid": fmt.Sprintf("forged-%d", n)})
			payload, _ := base64.RawURLEncoding.DecodeString(parts[1])
			var c map[string]any
			_ = json.Unmarshal(payload, &c)
			c["iss"] = idp.Issuer
			p, _ := json.Marshal(c)
			tok := base64.RawURLEncoding.EncodeToString(h) + "." + base64.RawURLEncoding.EncodeToString(p) + "." + parts[2]
			resp := g.Infer(t, tok, withModel("qwen"))
			if resp.StatusCode != 401 {
				t.Fatalf("forged kid: %s", resp.Status)
			}
			resp.Body.Close()
			n++
		}
		elapsed := time.Since(start)
		after := idp.Stats(t)
		fetches := after["jwks"] - before["jwks"]
		// One a second for the unknown kids, one every 2s for the loop.
		if bound := int(elapsed/time.Second) + int(elapsed/(2*time.Second)) + 2; fetches > bound {
			t.Fatalf("%d unknown kids made %d JWKS fetches in %v (bound %d)", n, fetches, elapsed, bound)
		}
		t.Logf("%d forged kids in %v: %d JWKS fetches", n, elapsed.Round(time.Millisecond), fetches)
	})

	t.Run("token exchange", func(t *testing.T) {
		form := url.Values{"grant_type": {"urn:ietf:params:oauth:grant-type:token-exchange"}, "subject_token": {alice},
			"subject_token_type": {"urn:ietf:params:oauth:token-type:access_token"}, "scope": {"model:qwen"}}
		resp, err := g.Client.PostForm(g.Base+"/auth/token", form)
		if err != nil {
			t.Fatal(err)
		}
		var tok struct {
			AccessToken     string `json:"access_token"`
			RefreshToken    string `json:"refresh_token"`
			IssuedTokenType string `json:"issued_token_type"`
			Scope           string `json:"scope"`
		}
		body := readJSON(t, resp, &tok)
		if resp.StatusCode != 200 || tok.IssuedTokenType != "urn:ietf:params:oauth:token-type:access_token" || tok.Scope != "model:qwen" || tok.RefreshToken == "" {
			t.Fatalf("exchange: %s %s", resp.Status, body)
		}
		if resp := g.Infer(t, tok.AccessToken, withModel("qwen")); resp.StatusCode != 200 {
			t.Fatalf("exchanged token: %s", resp.Status)
		}
		if resp := g.Infer(t, tok.AccessToken, withModel("gemma")); resp.StatusCode != 403 {
			t.Fatalf("exchanged token, narrowed scope: %s", resp.Status)
		}
		resp, err = g.Client.PostForm(g.Base+"/auth/token", url.Values{"grant_type": {"refresh_token"}, "refresh_token": {tok.RefreshToken}})
		if err != nil {
			t.Fatal(err)
		}
		if body := readJSON(t, resp, nil); resp.StatusCode != 200 {
			t.Fatalf("refresh of an exchanged login: %s %s", resp.Status, body)
		}
		form.Set("subject_token", idp.Token(t, "other-aud", "x"))
		resp, _ = g.Client.PostForm(g.Base+"/auth/token", form)
		if body := readJSON(t, resp, nil); resp.StatusCode != 400 || !strings.Contains(string(body), `"error":"invalid_grant"`) {
			t.Fatalf("exchange of a token for another audience: %s %s", resp.Status, body)
		}
	})

	t.Run("rotation, removal and outage", func(t *testing.T) {
		rotated := idp.post(t, "/test/rotate?alg=ES256")["kid"].(string)
		time.Sleep(1100 * time.Millisecond) // past the minimum interval
		carol := idp.Token(t, "alice-svc", "alice-secret")
		if h, _, _ := jwt.NewParser().ParseUnverified(carol, jwt.MapClaims{}); h == nil || h.Header["kid"] != rotated {
			t.Fatalf("the provider did not sign with its new key")
		}
		if resp := g.Infer(t, carol, withModel("qwen")); resp.StatusCode != 200 {
			t.Fatalf("a token of the rotated key: %s", resp.Status)
		}
		if resp := g.Infer(t, alice, withModel("qwen")); resp.StatusCode != 200 {
			t.Fatalf("a token of the old key, still published: %s", resp.Status)
		}
		// The old key is retired: its tokens stop within a refresh period.
		idp.post(t, "/test/retire")
		deadline := time.Now().Add(10 * time.Second)
		for {
			resp := g.Infer(t, alice, withModel("qwen"))
			if resp.StatusCode == 401 {
				checkInvalidToken(t, resp, alice)
				break
			}
			resp.Body.Close()
			if time.Now().After(deadline) {
				t.Fatal("a removed key still verifies after 10s (refresh 2s)")
			}
			time.Sleep(200 * time.Millisecond)
		}
		// The provider stops: the keys in hand keep working, and
		// operators see it.
		idp.Kill()
		time.Sleep(3 * time.Second)
		if resp := g.Infer(t, carol, withModel("qwen")); resp.StatusCode != 200 {
			t.Fatalf("cached key while the provider is down: %s", resp.Status)
		}
		// Ready (the keys in hand serve), and the public answer names no
		// issuer; the operators' report does.
		if c, b := getBody(t, g.Client, g.Base+"/readyz"); c != 200 || strings.Contains(b, idp.Issuer) {
			t.Fatalf("/readyz while the provider is down: %d %s", c, b)
		}
		resp, err := http.Get(g.Admin + "/llmedge/readyz")
		if err != nil {
			t.Fatal(err)
		}
		body := readJSON(t, resp, nil)
		if resp.StatusCode != 200 || !strings.Contains(string(body), `"status":"degraded"`) || !strings.Contains(string(body), "identity provider "+idp.Issuer) {
			t.Fatalf("the readiness report while the provider is down: %s %s", resp.Status, body)
		}
		resp, err = http.Get(fmt.Sprintf("http://127.0.0.1:%d/status.json", statusPort))
		if err != nil {
			t.Fatal(err)
		}
		var snap struct {
			Tenants struct {
				TopTokens []struct {
					User string `json:"user"`
				} `json:"top_tokens"`
			} `json:"tenants"`
			IdentityProviders []struct {
				Issuer string `json:"issuer"`
				Stale  bool   `json:"stale"`
				Keys   int    `json:"keys"`
				Line   string `json:"line"`
			} `json:"identity_providers"`
		}
		readJSON(t, resp, &snap)
		if len(snap.IdentityProviders) != 1 || !snap.IdentityProviders[0].Stale || snap.IdentityProviders[0].Keys != 1 ||
			!strings.Contains(snap.IdentityProviders[0].Line, "unreachable since") {
			t.Fatalf("status page: %+v", snap.IdentityProviders)
		}
		var users []string
		for _, u := range snap.Tenants.TopTokens {
			users = append(users, u.User)
		}
		if !slices.Contains(users, "idp:alice") || !slices.Contains(users, "idp:bob") {
			t.Fatalf("the status page's top users %v lack the provider's users", users)
		}
		metrics, err := http.Get(g.Admin + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		if m := readJSONless(t, metrics); !strings.Contains(m, `llmedge_idp_keys_stale{issuer="`+idp.Issuer+`"} 1`) {
			t.Fatalf("no stale metric:\n%s", grepLines(m, "llmedge_idp"))
		}
		if strings.Contains(g.Log(), carol) || strings.Contains(g.Log(), alice) {
			t.Fatal("a token was logged")
		}
	})
}

// TestIdentityRevokeUser: `llmedge revoke --user` refuses an identity
// provider's user's tokens issued before it, on every door.
func TestIdentityRevokeUser(t *testing.T) {
	idp := startIdP(t, identityClients)
	sim := startSim(t)
	g := identityGateway(t, idp, sim, freeport.Must(t))
	alice := idp.Token(t, "alice-svc", "alice-secret")
	if resp := g.Infer(t, alice, withModel("qwen")); resp.StatusCode != 200 {
		t.Fatalf("before: %s", resp.Status)
	}
	time.Sleep(1100 * time.Millisecond) // iat has whole seconds
	revokeCmd(t, g, "--user", "idp:alice")
	checkInvalidToken(t, g.Infer(t, alice, withModel("qwen")), alice)
	time.Sleep(1100 * time.Millisecond)
	if resp := g.Infer(t, idp.Token(t, "alice-svc", "alice-secret"), withModel("qwen")); resp.StatusCode != 200 {
		t.Fatalf("a token issued after the revocation: %s", resp.Status)
	}
}

func readJSONless(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestClientCertificates: machine clients authenticated by a client
// certificate (mutual TLS). The test makes its own CA and issues the
// client certificate; Caddy's client_auth verifies the chain against it
// (trust_pool file), the mtls authenticator maps the subject's CN.
func TestClientCertificates(t *testing.T) {
	sim := startSim(t)
	dir := t.TempDir()
	ca, caKey := newTestCA(t)
	caFile := filepath.Join(dir, "clients-ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	mtlsPort := freeport.Must(t)
	g := startGateway(t, GatewayConfig{
		Options: `		authenticator bearer
		authenticator mtls {
			user cn
			user_prefix cert:
			grant build-bot -> qwen
			grant * -> gemma
			tier build-bot -> small
		}
		tier small {
			rpm 2
		}`,
		Models: map[string]string{"qwen": staticModel(sim), "gemma": staticModel(sim)},
		Sites: fmt.Sprintf(`https://localhost:%d {
	tls internal {
		client_auth {
			mode require_and_verify
			trust_pool file %s
		}
	}
	llm_gateway
}
`, mtlsPort, caFile),
	})
	client := func(cn string, signer *x509.Certificate, key crypto.Signer) *http.Client {
		cert := issueClientCert(t, cn, signer, key)
		tr := g.Client.Transport.(*http.Transport).Clone()
		tr.TLSClientConfig.Certificates = []tls.Certificate{cert}
		return &http.Client{Transport: tr, Timeout: 30 * time.Second}
	}
	post := func(c *http.Client, model string) *http.Response {
		b, _ := json.Marshal(withModel(model))
		resp, err := c.Post(fmt.Sprintf("https://localhost:%d/tasks/assistant_inference", mtlsPort), "application/json", bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	bot := client("build-bot", ca, caKey)
	for i := range 3 {
		resp := post(bot, "qwen")
		body := readJSON(t, resp, nil)
		switch {
		case i < 2 && resp.StatusCode != 200:
			t.Fatalf("build-bot #%d: %s %s", i+1, resp.Status, body)
		case i == 2 && (resp.StatusCode != 429 || !strings.Contains(string(body), "user 'cert:build-bot'")):
			t.Fatalf("build-bot #3, over its tier: %s %s", resp.Status, body)
		}
	}
	other := client("nightly", ca, caKey)
	if resp := post(other, "gemma"); resp.StatusCode != 200 {
		t.Fatalf("another certificate on gemma: %s", resp.Status)
	}
	resp := post(other, "qwen")
	if body := readJSON(t, resp, nil); resp.StatusCode != 403 {
		t.Fatalf("another certificate on qwen: %s %s", resp.Status, body)
	}
	// A certificate of another CA does not get through the handshake.
	rogueCA, rogueKey := newTestCA(t)
	if _, err := client("build-bot", rogueCA, rogueKey).Post(fmt.Sprintf("https://localhost:%d/tasks/assistant_inference", mtlsPort),
		"application/json", strings.NewReader("{}")); err == nil {
		t.Fatal("a certificate of an untrusted CA was accepted")
	}
	// On the site without client_auth, no certificate: bearer's 401.
	resp = g.Infer(t, "", withModel("qwen"))
	if body := readJSON(t, resp, nil); resp.StatusCode != 401 || string(body) != `{"detail":"Not authenticated"}`+"\n" {
		t.Fatalf("no credential: %s %s", resp.Status, body)
	}
	// Revoking the certificate's user refuses the certificates issued
	// before.
	revokeCmd(t, g, "--user", "cert:nightly")
	resp = post(other, "gemma")
	if body := readJSON(t, resp, nil); resp.StatusCode != 401 || !strings.Contains(resp.Header.Get("WWW-Authenticate"), "invalid_token") {
		t.Fatalf("revoked certificate user: %s %s", resp.Status, body)
	}
}

func newTestCA(t *testing.T) (*x509.Certificate, crypto.Signer) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "llmedge test client CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return cert, key
}

func issueClientCert(t *testing.T, cn string, ca *x509.Certificate, caKey crypto.Signer) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, key.Public(), caKey)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// TestIdentityReload: a reload that trusts the provider alike keeps its
// key cache (no fetch, no second loop); one that changes how keys are
// fetched starts a new cache and stops the old one's loop. No goroutine
// is left behind.
func TestIdentityReload(t *testing.T) {
	idp := startIdP(t, identityClients)
	sim := startSim(t)
	g := identityGateway(t, idp, sim, freeport.Must(t))
	alice := idp.Token(t, "alice-svc", "alice-secret")
	if resp := g.Infer(t, alice, withModel("qwen")); resp.StatusCode != 200 {
		t.Fatalf("before: %s", resp.Status)
	}
	before := g.Goroutines(t)
	discovery := idp.Stats(t)["discovery"]
	for range 3 {
		g.Reload(t, func(s string) string { return s })
	}
	if n := idp.Stats(t)["discovery"]; n != discovery {
		t.Fatalf("a reload that trusts alike discovered again (%d -> %d)", discovery, n)
	}
	if resp := g.Infer(t, alice, withModel("qwen")); resp.StatusCode != 200 {
		t.Fatalf("after reloads: %s", resp.Status)
	}
	g.Reload(t, func(s string) string { return strings.Replace(s, "refresh 2s", "refresh 3s", 1) })
	if n := idp.Stats(t)["discovery"]; n != discovery+1 {
		t.Fatalf("a reload with another refresh did not start a new cache (%d -> %d)", discovery, n)
	}
	if resp := g.Infer(t, alice, withModel("qwen")); resp.StatusCode != 200 {
		t.Fatalf("after the new cache: %s", resp.Status)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		after := g.Goroutines(t)
		if after <= before+5 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("goroutines %d before the reloads, %d after", before, after)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
