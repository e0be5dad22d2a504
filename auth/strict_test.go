package auth

import (
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/golang-jwt/jwt/v5"
)

// signRaw signs header and payload, JSON texts given as they are, with
// priv: tokens no JWT library would write, signed with the real key.
func signRaw(priv ed25519.PrivateKey, header, payload string) string {
	in := base64.RawURLEncoding.EncodeToString([]byte(header)) + "." + base64.RawURLEncoding.EncodeToString([]byte(payload))
	return in + "." + base64.RawURLEncoding.EncodeToString(ed25519.Sign(priv, []byte(in)))
}

// TestVerifyMemberTypes signs, with the ring's own key, tokens whose
// header or claims are of a JSON type llmedge never writes: each is
// refused as malformed, one table row per member the verifier reads.
func TestVerifyMemberTypes(t *testing.T) {
	ring := NewKeyRing(testKey(1))
	kid := ring.ActiveKID()
	priv := testKey(1)
	now := testNow.Unix()
	header := fmt.Sprintf(`{"alg":"EdDSA","kid":%q,"typ":"JWT"}`, kid)
	// claims renders the claims with member name set to raw JSON
	// ("" removes it).
	claims := func(edits ...string) string {
		m := map[string]string{
			"iss": fmt.Sprintf("%q", testIss), "aud": fmt.Sprintf("[%q]", testAud), "sub": `"alice"`,
			"scope": `"model:qwen"`, "iat": fmt.Sprint(now), "nbf": fmt.Sprint(now), "exp": fmt.Sprint(now + 3600),
			"jti": `"x1"`, "llmedge_tier": `"gold"`, "llmedge_idp": `"https://idp"`,
		}
		order := []string{"iss", "aud", "sub", "scope", "iat", "nbf", "exp", "jti", "llmedge_tier", "llmedge_idp"}
		for i := 0; i+1 < len(edits); i += 2 {
			if _, ok := m[edits[i]]; !ok {
				order = append(order, edits[i])
			}
			m[edits[i]] = edits[i+1]
		}
		var parts []string
		for _, k := range order {
			if v := m[k]; v != "" {
				parts = append(parts, fmt.Sprintf("%q:%s", k, v))
			}
		}
		return "{" + strings.Join(parts, ",") + "}"
	}
	withHeader := func(extra string) string {
		return fmt.Sprintf(`{"alg":"EdDSA","kid":%q,"typ":"JWT"%s}`, kid, extra)
	}

	type row struct {
		name            string
		header, payload string
		wantErr         error // nil: accepted
	}
	rows := []row{
		{"valid", header, claims(), nil},
		{"aud as one string", header, claims("aud", fmt.Sprintf("%q", testAud)), nil},
		{"a fractional exp", header, claims("exp", fmt.Sprint(now+3600)+".5"), nil},
		{"an unknown claim of any type", header, claims("x_extra", `{"a":[1,true,null]}`), nil},
		{"an unknown header member", withHeader(`,"x5u":"https://evil/certs"`), claims(), nil},
		{"typ in lower case", fmt.Sprintf(`{"alg":"EdDSA","kid":%q,"typ":"jwt"}`, kid), claims(), nil},
		{"no typ", fmt.Sprintf(`{"alg":"EdDSA","kid":%q}`, kid), claims(), nil},

		// The header.
		{"crit naming a claim", withHeader(`,"crit":["exp"]`), claims(), ErrCritical},
		{"crit naming an unknown extension", withHeader(`,"crit":["x-ext"],"x-ext":true`), claims(), ErrCritical},
		{"crit empty", withHeader(`,"crit":[]`), claims(), ErrCritical},
		{"crit not an array", withHeader(`,"crit":"b64"`), claims(), ErrCritical},
		{"kid a number", `{"alg":"EdDSA","kid":1,"typ":"JWT"}`, claims(), ErrClaimType},
		{"kid an array", fmt.Sprintf(`{"alg":"EdDSA","kid":[%q],"typ":"JWT"}`, kid), claims(), ErrClaimType},
		{"alg an array", fmt.Sprintf(`{"alg":["EdDSA"],"kid":%q}`, kid), claims(), ErrClaimType},
		{"typ a number", fmt.Sprintf(`{"alg":"EdDSA","kid":%q,"typ":1}`, kid), claims(), ErrClaimType},
		{"typ another type", fmt.Sprintf(`{"alg":"EdDSA","kid":%q,"typ":"at+jwt"}`, kid), claims(), ErrClaimType},
		{"header member twice", fmt.Sprintf(`{"alg":"EdDSA","kid":%q,"kid":"other"}`, kid), claims(), jwt.ErrTokenMalformed},
		{"header an array", `["EdDSA"]`, claims(), ErrClaimType},
		{"header with trailing data", header + `{}`, claims(), ErrClaimType},

		// The claims: exp, nbf, iat are NumericDates (JSON numbers).
		{"exp a string", header, claims("exp", fmt.Sprintf(`"%d"`, now+3600)), ErrClaimType},
		{"exp a far-future string", header, claims("exp", `"99999999999"`), ErrClaimType},
		{"exp a boolean", header, claims("exp", `true`), ErrClaimType},
		{"exp null", header, claims("exp", `null`), ErrClaimType},
		{"exp an object", header, claims("exp", `{"t":1}`), ErrClaimType},
		{"exp an array", header, claims("exp", fmt.Sprintf(`[%d]`, now+3600)), ErrClaimType},
		{"nbf a string", header, claims("nbf", fmt.Sprintf(`"%d"`, now)), ErrClaimType},
		{"nbf null", header, claims("nbf", `null`), ErrClaimType},
		{"iat a string", header, claims("iat", fmt.Sprintf(`"%d"`, now)), ErrClaimType},
		{"iat a boolean", header, claims("iat", `false`), ErrClaimType},
		// iss, sub, jti, scope and llmedge's own are strings.
		{"iss an array", header, claims("iss", fmt.Sprintf(`[%q]`, testIss)), ErrClaimType},
		{"iss a number", header, claims("iss", `1`), ErrClaimType},
		{"iss null", header, claims("iss", `null`), ErrClaimType},
		{"sub a number", header, claims("sub", `42`), ErrClaimType},
		{"sub an array", header, claims("sub", `["alice"]`), ErrClaimType},
		{"sub an object", header, claims("sub", `{"name":"alice"}`), ErrClaimType},
		{"jti a number", header, claims("jti", `7`), ErrClaimType},
		{"jti null", header, claims("jti", `null`), ErrClaimType},
		{"scope an array", header, claims("scope", `["model:qwen"]`), ErrClaimType},
		{"scope a number", header, claims("scope", `1`), ErrClaimType},
		{"scope null", header, claims("scope", `null`), ErrClaimType},
		{"llmedge_tier a number", header, claims("llmedge_tier", `1`), ErrClaimType},
		{"llmedge_tier an array", header, claims("llmedge_tier", `["gold"]`), ErrClaimType},
		{"llmedge_idp an object", header, claims("llmedge_idp", `{}`), ErrClaimType},
		{"llmedge_idp a boolean", header, claims("llmedge_idp", `true`), ErrClaimType},
		// aud is a string or an array of strings.
		{"aud a number", header, claims("aud", `1`), ErrClaimType},
		{"aud an array with a number", header, claims("aud", fmt.Sprintf(`[%q,1]`, testAud)), ErrClaimType},
		{"aud an array with null", header, claims("aud", fmt.Sprintf(`[%q,null]`, testAud)), ErrClaimType},
		{"aud an object", header, claims("aud", fmt.Sprintf(`{"a":%q}`, testAud)), ErrClaimType},
		{"aud null", header, claims("aud", `null`), ErrClaimType},
		// The payload as a whole.
		{"a claim twice", header, strings.TrimSuffix(claims(), "}") + `,"sub":"root"}`, jwt.ErrTokenMalformed},
		{"a claim twice, nested", header, claims("x_extra", `{"a":1,"a":2}`), jwt.ErrTokenMalformed},
		{"payload an array", header, `[` + claims() + `]`, ErrClaimType},
		{"payload a string", header, `"x"`, ErrClaimType},
		{"payload with trailing data", header, claims() + ` {}`, ErrClaimType},
		{"payload with invalid UTF-8", header, claims("sub", "\"al\xffice\""), jwt.ErrTokenMalformed},
	}
	for _, tt := range rows {
		t.Run(tt.name, func(t *testing.T) {
			tok := signRaw(priv, tt.header, tt.payload)
			p, err := testVerifier(ring).Verify(tok)
			if tt.wantErr == nil {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("accepted: %+v", p)
			}
			if !errors.Is(err, tt.wantErr) || !errors.Is(err, jwt.ErrTokenMalformed) {
				t.Errorf("err = %v, want %v (and malformed)", err, tt.wantErr)
			}
		})
	}
}

// The issuer's own tokens pass the strict checks, with every claim it
// writes.
func TestIssuedTokensAreStrict(t *testing.T) {
	ring := NewKeyRing(testKey(1))
	tok, _, err := testIssuer(ring).IssueFor(&Principal{Subject: "alice", Scopes: []string{"model:qwen"}, Tier: "gold", Provider: "https://idp"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkMembers(tok); err != nil {
		t.Fatal(err)
	}
	p, err := testVerifier(ring).Verify(tok)
	if err != nil || p.Tier != "gold" || p.Provider != "https://idp" {
		t.Fatalf("%+v %v", p, err)
	}
}
