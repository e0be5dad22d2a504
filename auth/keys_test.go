package auth

import (
	"context"
	"crypto/ed25519"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io/fs"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

func TestThumbprintRFC8037(t *testing.T) {
	// RFC 8037 appendix A.2/A.3.
	x, _ := base64.RawURLEncoding.DecodeString("11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo")
	if got, want := Thumbprint(ed25519.PublicKey(x)), "kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k"; got != want {
		t.Fatalf("Thumbprint = %s, want %s", got, want)
	}
}

func TestLoadOrCreateKeyRingReload(t *testing.T) {
	ctx := context.Background()
	st := newMemStorage()
	first, err := LoadOrCreateKeyRing(ctx, st, "llmedge/signing_keys.json")
	if err != nil {
		t.Fatal(err)
	}
	if st.stores != 1 || !st.Exists(ctx, "llmedge/signing_keys.json") {
		t.Fatalf("stores = %d, want the new key stored once", st.stores)
	}
	iss := &Issuer{Keys: first, Issuer: "https://gw", Audience: "llmedge", TTL: time.Hour}
	tok, _, err := iss.Issue("alice", []string{"model:qwen"})
	if err != nil {
		t.Fatal(err)
	}

	// A restart (or a second instance on the same storage).
	second, err := LoadOrCreateKeyRing(ctx, st, "llmedge/signing_keys.json")
	if err != nil {
		t.Fatal(err)
	}
	if st.stores != 1 {
		t.Errorf("reload stored again (%d stores)", st.stores)
	}
	if first.ActiveKID() != second.ActiveKID() {
		t.Fatalf("kid changed across reload: %s -> %s", first.ActiveKID(), second.ActiveKID())
	}
	v := &Verifier{Keys: second, Issuer: "https://gw", Audience: "llmedge"}
	p, err := v.Verify(tok)
	if err != nil || p.Subject != "alice" {
		t.Fatalf("token issued before reload: %v, %v", p, err)
	}
	if len(st.locks) != 0 {
		t.Errorf("locks left held: %v", st.locks)
	}
}

func TestLoadOrCreateKeyRingConcurrent(t *testing.T) {
	st := newMemStorage()
	const n = 8
	kids := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ring, err := LoadOrCreateKeyRing(context.Background(), st, "")
			if err != nil {
				t.Error(err)
				return
			}
			kids[i] = ring.ActiveKID()
		}()
	}
	wg.Wait()
	for _, k := range kids {
		if k != kids[0] {
			t.Fatalf("instances disagree on the key: %v", kids)
		}
	}
	if st.stores != 1 {
		t.Errorf("stores = %d, want 1", st.stores)
	}
	if !st.Exists(context.Background(), DefaultKeysStorageKey) {
		t.Errorf("empty key name did not default to %s", DefaultKeysStorageKey)
	}
}

func TestLoadOrCreateKeyRingErrors(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name    string
		setup   func(*memStorage)
		wantErr string
	}{
		{"storage failure is not 'missing'", func(m *memStorage) { m.loadErr = errors.New("connection refused") }, "connection refused"},
		{"corrupt data", func(m *memStorage) { m.data["k"] = []byte("{not json") }, "invalid JSON"},
		{"no active key", func(m *memStorage) { m.data["k"] = []byte(`{"version":1,"active":"x","keys":[]}`) }, `active key "x" is not among the keys`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := newMemStorage()
			tt.setup(st)
			before := string(st.data["k"])
			_, err := LoadOrCreateKeyRing(ctx, st, "k")
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), "signing keys k") {
				t.Fatalf("err = %v, want it to contain %q", err, tt.wantErr)
			}
			if st.stores != 0 || string(st.data["k"]) != before {
				t.Error("stored data was overwritten")
			}
		})
	}
}

func TestLoadOrCreateKeyRingLockCancelled(t *testing.T) {
	st := newMemStorage()
	if err := st.Lock(context.Background(), "k"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := LoadOrCreateKeyRing(ctx, st, "k"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want the lock wait to end with the context", err)
	}
}

func TestStoredFormat(t *testing.T) {
	st := newMemStorage()
	ring, err := LoadOrCreateKeyRing(context.Background(), st, "k")
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Version int    `json:"version"`
		Active  string `json:"active"`
		Keys    []struct {
			KID        string    `json:"kid"`
			Alg        string    `json:"alg"`
			PrivateKey string    `json:"private_key"`
			Created    time.Time `json:"created"`
		} `json:"keys"`
	}
	if err := json.Unmarshal(st.data["k"], &f); err != nil {
		t.Fatal(err)
	}
	if f.Version != 1 || f.Active != ring.ActiveKID() || len(f.Keys) != 1 {
		t.Fatalf("stored %s", st.data["k"])
	}
	k := f.Keys[0]
	der, err := base64.StdEncoding.DecodeString(k.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	priv, err := x509.ParsePKCS8PrivateKey(der)
	if err != nil {
		t.Fatal(err)
	}
	pub := priv.(ed25519.PrivateKey).Public().(ed25519.PublicKey)
	if k.KID != ring.ActiveKID() || k.KID != Thumbprint(pub) || k.Alg != "EdDSA" || k.Created.IsZero() {
		t.Fatalf("stored key %+v", k)
	}
}

// storedKeyJSON renders one stored key entry for parseKeyFile tests.
func storedKeyJSON(t *testing.T, priv ed25519.PrivateKey, withPriv bool, extra string) string {
	t.Helper()
	pub := priv.Public().(ed25519.PublicKey)
	s := `{"kid":"` + Thumbprint(pub) + `","alg":"EdDSA","created":"2025-01-01T00:00:00Z"`
	if withPriv {
		der, err := x509.MarshalPKCS8PrivateKey(priv)
		if err != nil {
			t.Fatal(err)
		}
		s += `,"private_key":"` + base64.StdEncoding.EncodeToString(der) + `"`
	} else {
		s += `,"public_key":"` + b64url(pub) + `"`
	}
	return s + extra + `}`
}

func TestParseKeyFileRotation(t *testing.T) {
	active, retired, expired := testKey(1), testKey(2), testKey(3)
	doc := `{"version":1,"active":"` + Thumbprint(active.Public().(ed25519.PublicKey)) + `","keys":[` +
		storedKeyJSON(t, retired, false, `,"not_after":"2025-07-01T00:00:00Z"`) + `,` +
		storedKeyJSON(t, expired, true, `,"not_after":"2025-05-01T00:00:00Z"`) + `,` +
		storedKeyJSON(t, active, true, "") + `]}`
	ring, err := parseKeyFile([]byte(doc), testNow)
	if err != nil {
		t.Fatal(err)
	}
	kids := ring.KIDs()
	if len(kids) != 2 || kids[0] != NewKeyRing(active).ActiveKID() || kids[1] != NewKeyRing(retired).ActiveKID() {
		t.Fatalf("kids = %v, want active then retired, expired dropped", kids)
	}
	// A token signed by the retired key still verifies; one by the
	// expired key does not.
	v := &Verifier{Keys: ring, Issuer: "i", Audience: "a", Now: fixedNow}
	for _, tc := range []struct {
		key  ed25519.PrivateKey
		want bool
	}{{retired, true}, {expired, false}, {active, true}} {
		tok, _, err := (&Issuer{Keys: NewKeyRing(tc.key), Issuer: "i", Audience: "a", Now: fixedNow}).Issue("u", nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := v.Verify(tok); (err == nil) != tc.want {
			t.Errorf("key %s: Verify err = %v, want ok=%v", Thumbprint(tc.key.Public().(ed25519.PublicKey)), err, tc.want)
		}
	}
}

func TestParseKeyFileErrors(t *testing.T) {
	k := testKey(1)
	kid := Thumbprint(k.Public().(ed25519.PublicKey))
	good := storedKeyJSON(t, k, true, "")
	other := testKey(2)
	der, _ := x509.MarshalPKCS8PrivateKey(k)
	privB64 := base64.StdEncoding.EncodeToString(der)
	tests := []struct {
		name, doc, wantErr string
	}{
		{"newer version", `{"version":2,"active":"` + kid + `","keys":[` + good + `]}`, "format version 2 is newer"},
		{"wrong alg", `{"active":"` + kid + `","keys":[{"kid":"` + kid + `","alg":"ES256","private_key":"` + privB64 + `"}]}`, `alg "ES256" does not fit an Ed25519 key`},
		{"kid not thumbprint", `{"active":"abc","keys":[{"kid":"abc","alg":"EdDSA","private_key":"` + privB64 + `"}]}`, "kid is not the key's thumbprint"},
		{"bad base64", `{"active":"` + kid + `","keys":[{"kid":"` + kid + `","alg":"EdDSA","private_key":"@@@"}]}`, "private_key is not base64"},
		{"not pkcs8", `{"active":"` + kid + `","keys":[{"kid":"` + kid + `","alg":"EdDSA","private_key":"AAAA"}]}`, "not a PKCS#8 key"},
		{"public mismatch", `{"active":"` + kid + `","keys":[{"kid":"` + kid + `","alg":"EdDSA","private_key":"` + privB64 + `","public_key":"` + b64url(other.Public().(ed25519.PublicKey)) + `"}]}`, "does not match"},
		{"no key material", `{"active":"` + kid + `","keys":[{"kid":"` + kid + `","alg":"EdDSA"}]}`, "neither private_key nor public_key"},
		{"duplicate kid", `{"active":"` + kid + `","keys":[` + good + `,` + good + `]}`, "duplicate kid"},
		{"active verify-only", `{"active":"` + kid + `","keys":[` + storedKeyJSON(t, k, false, "") + `]}`, "has no private_key"},
		{"active missing", `{"active":"nope","keys":[` + good + `]}`, `active key "nope" is not among the keys`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseKeyFile([]byte(tt.doc), testNow)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want it to contain %q", err, tt.wantErr)
			}
		})
	}
}

func TestJWKS(t *testing.T) {
	ring := NewKeyRing(testKey(7))
	b, err := ring.JWKS()
	if err != nil {
		t.Fatal(err)
	}
	var set struct {
		Keys []map[string]string `json:"keys"`
	}
	if err := json.Unmarshal(b, &set); err != nil {
		t.Fatal(err)
	}
	if len(set.Keys) != 1 {
		t.Fatalf("JWKS = %s", b)
	}
	k := set.Keys[0]
	want := map[string]string{"kty": "OKP", "crv": "Ed25519", "kid": ring.ActiveKID(), "use": "sig", "alg": "EdDSA"}
	for f, v := range want {
		if k[f] != v {
			t.Errorf("%s = %q, want %q", f, k[f], v)
		}
	}
	if len(k) != 6 {
		t.Errorf("unexpected members: %v", k)
	}
	// The published key alone verifies a token, found by kid.
	x, err := base64.RawURLEncoding.DecodeString(k["x"])
	if err != nil || len(x) != ed25519.PublicKeySize {
		t.Fatalf("x = %q: %v", k["x"], err)
	}
	if Thumbprint(x) != k["kid"] {
		t.Error("kid is not the thumbprint of x")
	}
	tok, _, err := (&Issuer{Keys: ring, Issuer: "i", Audience: "a"}).Issue("alice", nil)
	if err != nil {
		t.Fatal(err)
	}
	parsed, err := jwt.Parse(tok, func(tk *jwt.Token) (any, error) {
		if tk.Header["kid"] != k["kid"] {
			return nil, errors.New("kid mismatch")
		}
		return ed25519.PublicKey(x), nil
	}, jwt.WithValidMethods([]string{"EdDSA"}))
	if err != nil || !parsed.Valid {
		t.Fatalf("JWK does not verify the token: %v", err)
	}
}

func TestMemStorageNotExist(t *testing.T) {
	_, err := newMemStorage().Load(context.Background(), "x")
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
}
