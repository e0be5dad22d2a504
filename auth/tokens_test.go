package auth

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

const (
	testIss = "https://gw.example.com"
	testAud = "llmedge"
)

func testIssuer(ring *KeyRing) *Issuer {
	return &Issuer{Keys: ring, Issuer: testIss, Audience: testAud, TTL: time.Hour, Now: fixedNow}
}

func testVerifier(ring *KeyRing) *Verifier {
	return &Verifier{Keys: ring, Issuer: testIss, Audience: testAud, Now: fixedNow}
}

// decodeSegment decodes part i of a JWT into a map.
func decodeSegment(t *testing.T, tok string, i int) map[string]any {
	t.Helper()
	b, err := base64.RawURLEncoding.DecodeString(strings.Split(tok, ".")[i])
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]any{}
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestIssueClaims(t *testing.T) {
	ring := NewKeyRing(testKey(1))
	iss := testIssuer(ring)
	iss.Now = func() time.Time { return testNow.Add(700 * time.Millisecond) }
	tok, exp, err := iss.Issue("alice", []string{"model:gemma", "model:qwen"})
	if err != nil {
		t.Fatal(err)
	}
	h := decodeSegment(t, tok, 0)
	if h["alg"] != "EdDSA" || h["kid"] != ring.ActiveKID() || h["typ"] != "JWT" {
		t.Errorf("header = %v", h)
	}
	c := decodeSegment(t, tok, 1)
	now := float64(testNow.Unix())
	want := map[string]any{
		"iss": testIss, "aud": []any{testAud}, "sub": "alice", "scope": "model:gemma model:qwen",
		"iat": now, "nbf": now, "exp": now + 3600,
	}
	for k, v := range want {
		gb, _ := json.Marshal(c[k])
		wb, _ := json.Marshal(v)
		if string(gb) != string(wb) {
			t.Errorf("claim %s = %s, want %s", k, gb, wb)
		}
	}
	if jti, _ := c["jti"].(string); len(jti) < 20 {
		t.Errorf("jti = %q, want a random id", jti)
	}
	if !exp.Equal(testNow.Add(time.Hour)) {
		t.Errorf("expiresAt = %v", exp)
	}
	tok2, _, _ := iss.Issue("alice", nil)
	if decodeSegment(t, tok2, 1)["jti"] == c["jti"] {
		t.Error("jti repeats")
	}
	if _, ok := decodeSegment(t, tok2, 1)["scope"]; ok {
		t.Error("empty scope should be omitted")
	}
}

func TestIssueErrors(t *testing.T) {
	ring := NewKeyRing(testKey(1))
	tests := []struct {
		name string
		iss  Issuer
		sub  string
	}{
		{"no keys", Issuer{Issuer: "i", Audience: "a"}, "u"},
		{"no issuer", Issuer{Keys: ring, Audience: "a"}, "u"},
		{"no audience", Issuer{Keys: ring, Issuer: "i"}, "u"},
		{"no subject", Issuer{Keys: ring, Issuer: "i", Audience: "a"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, _, err := tt.iss.Issue(tt.sub, nil); err == nil {
				t.Fatal("Issue succeeded")
			}
		})
	}
	tok, exp, err := (&Issuer{Keys: ring, Issuer: "i", Audience: "a", Now: fixedNow}).Issue("u", nil)
	if err != nil || tok == "" || !exp.Equal(testNow.Add(DefaultTTL)) {
		t.Fatalf("zero TTL: exp %v err %v, want DefaultTTL", exp, err)
	}
}

func TestVerifyOK(t *testing.T) {
	ring := NewKeyRing(testKey(1))
	tok, exp, err := testIssuer(ring).Issue("alice", []string{"model:qwen", "model:gemma"})
	if err != nil {
		t.Fatal(err)
	}
	p, err := testVerifier(ring).Verify(tok)
	if err != nil {
		t.Fatal(err)
	}
	if p.Subject != "alice" || !p.ExpiresAt.Equal(exp) || !p.HasScope("model:qwen") || !p.HasScope(ModelScope("gemma")) || p.HasScope("model:llama") {
		t.Fatalf("principal = %+v", p)
	}
	var nilP *Principal
	if nilP.HasScope("model:qwen") {
		t.Error("nil principal has a scope")
	}
	if ModelScope("qwen") != "model:qwen" {
		t.Error("ModelScope")
	}
}

// signClaims signs arbitrary claims with method and key, setting kid.
func signClaims(t testing.TB, method jwt.SigningMethod, key any, kid string, c jwt.MapClaims) string {
	t.Helper()
	tk := jwt.NewWithClaims(method, c)
	if kid != "" {
		tk.Header["kid"] = kid
	}
	s, err := tk.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestVerifyAttacks(t *testing.T) {
	ring := NewKeyRing(testKey(1))
	kid := ring.ActiveKID()
	priv := testKey(1)
	pub := priv.Public().(ed25519.PublicKey)
	now := testNow.Unix()
	claims := func(mod func(jwt.MapClaims)) jwt.MapClaims {
		c := jwt.MapClaims{"iss": testIss, "aud": testAud, "sub": "alice", "scope": "model:qwen",
			"iat": now, "nbf": now, "exp": now + 3600, "jti": "x"}
		if mod != nil {
			mod(c)
		}
		return c
	}
	valid := signClaims(t, jwt.SigningMethodEdDSA, priv, kid, claims(nil))
	parts := strings.Split(valid, ".")
	tamperedPayload, _ := json.Marshal(claims(func(c jwt.MapClaims) { c["scope"] = "model:qwen model:gemma" }))

	tests := []struct {
		name    string
		token   string
		leeway  time.Duration
		wantErr error // nil: must succeed
	}{
		{"valid", valid, 0, nil},
		{"alg none", signClaims(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, kid, claims(nil)), 0, jwt.ErrTokenSignatureInvalid},
		{"HS256 keyed with public key bytes", signClaims(t, jwt.SigningMethodHS256, []byte(pub), kid, claims(nil)), 0, jwt.ErrTokenSignatureInvalid},
		{"HS256 keyed with base64 public key", signClaims(t, jwt.SigningMethodHS256, []byte(b64url(pub)), kid, claims(nil)), 0, jwt.ErrTokenSignatureInvalid},
		{"expired", signClaims(t, jwt.SigningMethodEdDSA, priv, kid, claims(func(c jwt.MapClaims) { c["exp"] = now - 10 })), 0, jwt.ErrTokenExpired},
		{"expired within leeway", signClaims(t, jwt.SigningMethodEdDSA, priv, kid, claims(func(c jwt.MapClaims) { c["exp"] = now - 10 })), 30 * time.Second, nil},
		{"no exp", signClaims(t, jwt.SigningMethodEdDSA, priv, kid, claims(func(c jwt.MapClaims) { delete(c, "exp") })), 0, jwt.ErrTokenRequiredClaimMissing},
		{"nbf in the future", signClaims(t, jwt.SigningMethodEdDSA, priv, kid, claims(func(c jwt.MapClaims) { c["nbf"] = now + 600 })), 0, jwt.ErrTokenNotValidYet},
		{"iat in the future", signClaims(t, jwt.SigningMethodEdDSA, priv, kid, claims(func(c jwt.MapClaims) { c["iat"] = now + 600 })), 0, jwt.ErrTokenUsedBeforeIssued},
		{"wrong iss", signClaims(t, jwt.SigningMethodEdDSA, priv, kid, claims(func(c jwt.MapClaims) { c["iss"] = "https://evil" })), 0, jwt.ErrTokenInvalidIssuer},
		{"no iss", signClaims(t, jwt.SigningMethodEdDSA, priv, kid, claims(func(c jwt.MapClaims) { delete(c, "iss") })), 0, jwt.ErrTokenRequiredClaimMissing},
		{"wrong aud", signClaims(t, jwt.SigningMethodEdDSA, priv, kid, claims(func(c jwt.MapClaims) { c["aud"] = []string{"other"} })), 0, jwt.ErrTokenInvalidAudience},
		{"no aud", signClaims(t, jwt.SigningMethodEdDSA, priv, kid, claims(func(c jwt.MapClaims) { delete(c, "aud") })), 0, jwt.ErrTokenRequiredClaimMissing},
		{"no sub", signClaims(t, jwt.SigningMethodEdDSA, priv, kid, claims(func(c jwt.MapClaims) { delete(c, "sub") })), 0, ErrNoSubject},
		{"tampered payload", parts[0] + "." + base64.RawURLEncoding.EncodeToString(tamperedPayload) + "." + parts[2], 0, jwt.ErrTokenSignatureInvalid},
		{"non-canonical base64 signature", parts[0] + "." + parts[1] + "." + nonCanonical(parts[2]), 0, jwt.ErrTokenMalformed},
		{"newline inside the signature", parts[0] + "." + parts[1] + "." + parts[2][:20] + "\n" + parts[2][20:], 0, jwt.ErrTokenMalformed},
		{"standard base64 padding", valid + "==", 0, jwt.ErrTokenMalformed},
		{"tampered signature", parts[0] + "." + parts[1] + "." + b64url(make([]byte, 64)), 0, jwt.ErrTokenSignatureInvalid},
		{"unknown kid", signClaims(t, jwt.SigningMethodEdDSA, priv, "nope", claims(nil)), 0, ErrUnknownKey},
		{"no kid", signClaims(t, jwt.SigningMethodEdDSA, priv, "", claims(nil)), 0, ErrUnknownKey},
		{"another key, our kid", signClaims(t, jwt.SigningMethodEdDSA, testKey(2), kid, claims(nil)), 0, jwt.ErrTokenSignatureInvalid},
		{"another key, its kid", signClaims(t, jwt.SigningMethodEdDSA, testKey(2), NewKeyRing(testKey(2)).ActiveKID(), claims(nil)), 0, ErrUnknownKey},
		{"garbage", "not.a.jwt", 0, jwt.ErrTokenMalformed},
		{"empty", "", 0, jwt.ErrTokenMalformed},
		{"two segments", parts[0] + "." + parts[1], 0, jwt.ErrTokenMalformed},
		{"too long", valid + strings.Repeat("A", MaxTokenBytes), 0, jwt.ErrTokenMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := testVerifier(ring)
			v.Leeway = tt.leeway
			p, err := v.Verify(tt.token)
			if tt.wantErr == nil {
				if err != nil || p == nil {
					t.Fatalf("Verify = %v, %v; want success", p, err)
				}
				return
			}
			if err == nil || p != nil {
				t.Fatalf("Verify accepted the token: %+v", p)
			}
			if !errors.Is(err, tt.wantErr) {
				t.Errorf("err = %v, want %v", err, tt.wantErr)
			}
		})
	}
}

func TestVerifierConfig(t *testing.T) {
	ring := NewKeyRing(testKey(1))
	tok, _, err := testIssuer(ring).Issue("alice", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []*Verifier{
		{Issuer: testIss, Audience: testAud},
		{Keys: ring, Audience: testAud, Now: fixedNow},
		{Keys: ring, Issuer: testIss, Now: fixedNow},
	} {
		if _, err := v.Verify(tok); err == nil {
			t.Errorf("%+v: Verify succeeded without full configuration", v)
		}
	}
}

// nonCanonical changes the unused low bits of the last base64url character
// of seg, giving another spelling of the same bytes.
func nonCanonical(seg string) string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	i := strings.IndexByte(alphabet, seg[len(seg)-1])
	return seg[:len(seg)-1] + string(alphabet[i^1])
}
