package auth

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/golang-jwt/jwt/v5"
)

func TestBearer(t *testing.T) {
	ring := NewKeyRing(testKey(1))
	v := testVerifier(ring)
	tok, _, err := testIssuer(ring).Issue("alice", []string{"model:qwen"})
	if err != nil {
		t.Fatal(err)
	}
	expired := signClaims(t, jwt.SigningMethodEdDSA, testKey(1), ring.ActiveKID(), jwt.MapClaims{
		"iss": testIss, "aud": testAud, "sub": "alice", "iat": testNow.Unix() - 7200, "exp": testNow.Unix() - 3600})
	foreign, _, _ := testIssuer(NewKeyRing(testKey(2))).Issue("alice", nil)

	const (
		noCreds = `Bearer realm="llmedge"`
		invalid = `Bearer realm="llmedge", error="invalid_token", error_description=`
	)
	tests := []struct {
		name       string
		headers    []string // Authorization values
		realm      string
		wantStatus int
		wantDetail string
		wantAuth   string // exact, or a prefix when it ends in "="
	}{
		{"valid", []string{"Bearer " + tok}, "llmedge", 0, "", ""},
		{"lower-case scheme", []string{"bearer " + tok}, "llmedge", 0, "", ""},
		{"upper-case scheme", []string{"BEARER " + tok}, "llmedge", 0, "", ""},
		{"extra spaces", []string{"  Bearer   " + tok + " "}, "llmedge", 0, "", ""},
		{"missing", nil, "llmedge", 401, DetailNotAuthenticated, noCreds},
		{"empty", []string{""}, "llmedge", 401, DetailNotAuthenticated, noCreds},
		{"basic scheme", []string{"Basic x"}, "llmedge", 401, DetailNotAuthenticated, noCreds},
		{"token without scheme", []string{tok}, "llmedge", 401, DetailNotAuthenticated, noCreds},
		{"no realm", nil, "", 401, DetailNotAuthenticated, "Bearer"},
		{"scheme only", []string{"Bearer"}, "llmedge", 401, DetailInvalidToken, invalid + `"the access token is missing"`},
		{"scheme and space", []string{"Bearer  "}, "llmedge", 401, DetailInvalidToken, invalid + `"the access token is missing"`},
		{"token with space", []string{"Bearer a b"}, "llmedge", 401, DetailInvalidToken, invalid + `"the access token is malformed"`},
		{"non-b64token chars", []string{`Bearer a"b`}, "llmedge", 401, DetailInvalidToken, invalid + `"the access token is malformed"`},
		{"garbage", []string{"Bearer abc.def.ghi"}, "llmedge", 401, DetailInvalidToken, invalid + `"the access token is malformed"`},
		{"expired", []string{"Bearer " + expired}, "llmedge", 401, DetailInvalidToken, invalid + `"the access token expired"`},
		{"foreign key", []string{"Bearer " + foreign}, "llmedge", 401, DetailInvalidToken, invalid + `"the access token signature is invalid"`},
		{"oversized", []string{"Bearer " + strings.Repeat("a", MaxAuthorizationBytes)}, "llmedge", 401, DetailInvalidToken, invalid + `"Authorization header too long"`},
		{"two headers", []string{"Bearer " + tok, "Bearer " + tok}, "llmedge", 401, DetailInvalidToken, invalid + `"more than one Authorization header"`},
		{"realm quoting", nil, `a"b\c`, 401, DetailNotAuthenticated, `Bearer realm="a\"b\\c"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, "/tasks/assistant_inference", nil)
			for _, h := range tt.headers {
				r.Header.Add("Authorization", h)
			}
			p, apiErr := Bearer(r, v, tt.realm)
			if tt.wantStatus == 0 {
				if apiErr != nil || p == nil || p.Subject != "alice" || !p.HasScope("model:qwen") {
					t.Fatalf("Bearer = %+v, %v", p, apiErr)
				}
				return
			}
			if apiErr == nil || p != nil {
				t.Fatalf("Bearer accepted: %+v", p)
			}
			if apiErr.Status != tt.wantStatus || apiErr.Detail != tt.wantDetail {
				t.Errorf("got %d %v, want %d %q", apiErr.Status, apiErr.Detail, tt.wantStatus, tt.wantDetail)
			}
			if got := apiErr.Headers["WWW-Authenticate"]; got != tt.wantAuth {
				t.Errorf("WWW-Authenticate = %s\nwant %s", got, tt.wantAuth)
			}
			for _, h := range tt.headers {
				if tok := strings.TrimSpace(strings.TrimPrefix(h, "Bearer")); len(tok) > 8 && strings.Contains(apiErr.Headers["WWW-Authenticate"], tok) {
					t.Error("challenge echoes the token")
				}
			}
			// The body is FastAPI's {"detail": ...}.
			w := httptest.NewRecorder()
			apiErr.Write(w)
			var body map[string]any
			if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil || len(body) != 1 || body["detail"] != tt.wantDetail {
				t.Errorf("body = %s", w.Body)
			}
		})
	}
}

func TestForbidden(t *testing.T) {
	tests := []struct {
		realm, scope, wantAuth string
	}{
		{"llmedge", "model:qwen", `Bearer realm="llmedge", error="insufficient_scope", scope="model:qwen"`},
		{"", "model:gemma", `Bearer error="insufficient_scope", scope="model:gemma"`},
	}
	for _, tt := range tests {
		e := Forbidden(tt.realm, tt.scope)
		w := httptest.NewRecorder()
		e.Write(w)
		if w.Code != 403 || w.Header().Get("WWW-Authenticate") != tt.wantAuth {
			t.Errorf("got %d %q, want 403 %q", w.Code, w.Header().Get("WWW-Authenticate"), tt.wantAuth)
		}
		want := `{"detail":"Not enough permissions: missing scope ` + tt.scope + `"}` + "\n"
		if w.Body.String() != want {
			t.Errorf("body = %s, want %s", w.Body, want)
		}
	}
}
