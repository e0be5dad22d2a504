package auth

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/llmedge/llmedge/api"
)

// fixed answers by the request's X-Who header: "" is no credential of
// its kind.
type fixed struct{ who, realm string }

func (f fixed) Authenticate(r *http.Request) (*Principal, *api.Error) {
	switch r.Header.Get("X-Who") {
	case "":
		return nil, NotAuthenticated(f.realm)
	case f.who:
		return &Principal{Subject: f.who}, nil
	case f.who + "-bad":
		return nil, invalidToken(f.realm, "bad")
	}
	return nil, NotAuthenticated(f.realm)
}

func TestChain(t *testing.T) {
	c := Chain{fixed{"a", "first"}, fixed{"b", "second"}}
	for _, tc := range []struct {
		who, subject string
		status       int
		challenge    string
	}{
		{"a", "a", 0, ""},
		{"b", "b", 0, ""}, // the first knows no such credential: the second decides
		{"a-bad", "", 401, `error="invalid_token"`}, // the first recognises it and refuses: final
		{"b-bad", "", 401, `error="invalid_token"`},
		{"", "", 401, `realm="first"`}, // nobody knows it: the first one's challenge
		{"c", "", 401, `realm="first"`},
	} {
		r := httptest.NewRequest("GET", "/", nil)
		if tc.who != "" {
			r.Header.Set("X-Who", tc.who)
		}
		p, err := c.Authenticate(r)
		switch {
		case tc.subject != "":
			if err != nil || p.Subject != tc.subject {
				t.Errorf("%s: %v %v", tc.who, p, err)
			}
		case err == nil || err.Status != tc.status || !strings.Contains(err.Headers["WWW-Authenticate"], tc.challenge):
			t.Errorf("%s: %v, challenge %q", tc.who, err, err.Headers["WWW-Authenticate"])
		}
	}
}
