package auth

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/golang-jwt/jwt/v5"
)

// FuzzVerify feeds arbitrary strings to Verify and Bearer: they must never
// panic, and accept only the exact token our key signed (strict base64
// makes the encoding canonical).
func FuzzVerify(f *testing.F) {
	ring := NewKeyRing(testKey(1))
	// Fixed claims: fuzz workers must build the very same token.
	tok := signClaims(f, jwt.SigningMethodEdDSA, testKey(1), ring.ActiveKID(), jwt.MapClaims{
		"iss": testIss, "aud": testAud, "sub": "alice", "scope": "model:qwen", "jti": "fuzz",
		"iat": testNow.Unix(), "nbf": testNow.Unix(), "exp": testNow.Unix() + 3600})
	for _, s := range []string{tok, "", "a.b.c", "eyJhbGciOiJub25lIn0.e30.", tok[:len(tok)-2], strings.ToUpper(tok)} {
		f.Add(s)
	}
	v := testVerifier(ring)
	f.Fuzz(func(t *testing.T, s string) {
		if _, err := v.Verify(s); err == nil && s != tok {
			t.Fatalf("accepted a token we did not sign: %q", s)
		}
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.Header["Authorization"] = []string{"Bearer " + s}
		if p, apiErr := Bearer(r, v, "llmedge"); apiErr == nil && (p == nil || strings.TrimSpace(s) != tok) {
			t.Fatalf("Bearer accepted %q", s)
		}
	})
}

// FuzzTokenEndpoint posts arbitrary bodies, of either grant: the endpoint
// must answer with a known status and never echo the password.
func FuzzTokenEndpoint(f *testing.F) {
	f.Add(formCT, "username=alice&password=wonderland")
	f.Add(formCT, "username=alice&password=wonderland&scope=model:qwen%20model:x")
	f.Add(formCT, "grant_type=x&username=&password=")
	f.Add("multipart/form-data; boundary=b", "--b\r\nContent-Disposition: form-data; name=\"username\"\r\n\r\nalice\r\n--b--\r\n")
	f.Add("application/json", `{"username":"alice"}`)
	f.Add(formCT, "grant_type=refresh_token&refresh_token=llmr_0123456789abcdef0123456789abcdef_0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefg")
	f.Add(formCT, "grant_type=refresh_token&refresh_token=x&scope=model:qwen&refresh_token=y")
	f.Add(formCT, "grant_type=refresh_token")
	// Refresh tokens on, so both grants' parsing is fuzzed.
	ep, _ := refreshEndpoint(f, newClock())
	known := map[int]bool{200: true, 400: true, 401: true, 413: true, 422: true}
	f.Fuzz(func(t *testing.T, ct, body string) {
		r := httptest.NewRequest(http.MethodPost, "/auth/token", strings.NewReader(body))
		r.Header.Set("Content-Type", ct)
		w := httptest.NewRecorder()
		ep.ServeHTTP(w, r)
		if !known[w.Code] {
			t.Fatalf("status %d: %s", w.Code, w.Body)
		}
		if w.Code != 200 && strings.Contains(w.Body.String(), testPW) {
			t.Fatalf("answer echoes the password: %s", w.Body)
		}
	})
}
