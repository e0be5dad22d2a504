package guests

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/auth"
	"github.com/llmedge/llmedge/modules/llmadmitter"
	"github.com/llmedge/llmedge/modules/llmauthenticator"
	"github.com/llmedge/llmedge/tenancy"
)

// The end-to-end test (e2e/xcaddy_test.go in llmedge) runs every module in
// a gateway built with xcaddy; these check the parts one by one.

func TestCaddyfileOptions(t *testing.T) {
	for _, c := range []struct {
		in  string
		mod caddyfile.Unmarshaler
		ok  bool
	}{
		{"least_kv {\nheadroom 0.2\n}", new(LeastKV), true},
		{"lmstudio {\nhealth_path /api/v0/models\n}", new(LMStudio), true},
		{"lmstudio {\nhealth_path v1/models\n}", new(LMStudio), false},
		{"file /etc/replicas {\nrefresh 2s\n}", new(File), true},
		{"file /etc/replicas {\nrefresh off\n}", new(File), true},
		{"file", new(File), false},
		{"shared_secret {\nsecret 0123456789abcdef ci qwen\n}", new(SharedSecret), true},
		{"shared_secret {\nsecret 0123456789abcdef ci\n}", new(SharedSecret), false},
		{"prompt_cap {\nmax_prompt_tokens 100\nmodel gemma 50\n}", new(PromptCap), true},
		{"prompt_cap {\nmax_prompt_tokens 0\n}", new(PromptCap), false},
		{"prompt_cap", new(PromptCap), false},
	} {
		err := c.mod.UnmarshalCaddyfile(caddyfile.NewTestDispenser(c.in))
		if (err == nil) != c.ok {
			t.Errorf("%q: %v", c.in, err)
		}
	}
}

func TestReplicaFile(t *testing.T) {
	list, err := parseReplicaFile([]byte("# comment\n\nhttp://10.0.0.5:8000/  # first\n  lmstudio+http://10.0.0.9:1234\n"))
	if err != nil || len(list) != 2 || list[0].URL != "http://10.0.0.5:8000" || list[1].Protocol != "lmstudio" ||
		list[1].URL != "http://10.0.0.9:1234" {
		t.Fatalf("%+v %v", list, err)
	}
	for _, bad := range []string{"10.0.0.5:8000", "http://a:1 http://b:2", "http://a:1\nhttp://a:1/"} {
		if _, err := parseReplicaFile([]byte(bad)); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

func TestPlainDecode(t *testing.T) {
	c := plainCodec{limits: api.Limits{}.WithDefaults(), models: []string{"qwen", "gemma"}, defaultModel: "qwen"}
	req := httptest.NewRequest("POST", "/plain/chat?stream=1", strings.NewReader("Hello?"))
	req.Header.Set("Content-Type", "text/plain; charset=UTF-8")
	chat, _, err := c.Decode(req)
	if err != nil || chat.Model != "qwen" || !chat.Stream || len(chat.Messages) != 1 || chat.Messages[0].Content != "Hello?" {
		t.Fatalf("%+v %v", chat, err)
	}
	for _, tc := range []struct {
		target, ct, body string
		status           int
	}{
		{"/plain/chat?model=nope", "text/plain", "hi", 404},
		{"/plain/chat", "application/json", "{}", 415},
		{"/plain/chat", "text/plain; charset=latin1", "hi", 415},
		{"/plain/chat?stream=maybe", "", "hi", 400},
		{"/plain/chat", "", " ", 400},
		{"/plain/chat", "", "\xff", 400},
	} {
		req := httptest.NewRequest("POST", tc.target, strings.NewReader(tc.body))
		if tc.ct != "" {
			req.Header.Set("Content-Type", tc.ct)
		}
		if _, _, err := c.Decode(req); err == nil || err.Status != tc.status {
			t.Errorf("%s %q %q: %v, want %d", tc.target, tc.ct, tc.body, err, tc.status)
		}
	}
}

func TestPlainStreamDropsPings(t *testing.T) {
	rec := httptest.NewRecorder()
	s := &plainStream{ResponseWriter: rec}
	s.Header().Set("Content-Type", "text/event-stream")
	s.WriteHeader(200)
	for _, b := range []string{": ping\n\n", "Hello", ",", ": ping\n\n", "\n"} {
		_, _ = s.Write([]byte(b))
	}
	if ct := rec.Header().Get("Content-Type"); ct != plainContentType {
		t.Errorf("Content-Type %q", ct)
	}
	// A ping is dropped only before the text: after it, the same bytes
	// are text.
	if got := rec.Body.String(); got != "Hello,: ping\n\n\n" {
		t.Errorf("body %q", got)
	}
}

func TestSharedSecret(t *testing.T) {
	s := &SharedSecret{Secrets: []Secret{{Value: "0123456789abcdef", User: "ci", Models: []string{"qwen"}}}}
	a, err := s.Authenticator(llmauthenticator.Env{Realm: "llmedge"})
	if err != nil {
		t.Fatal(err)
	}
	ask := func(h http.Header) (*auth.Principal, *api.Error) {
		r := httptest.NewRequest("POST", "/", nil)
		r.Header = h
		return a.Authenticate(r)
	}
	if p, e := ask(http.Header{"X-Gateway-Token": {"0123456789abcdef"}}); e != nil || p.Subject != "ci" || !p.HasScope("model:qwen") {
		t.Errorf("the secret: %+v %v", p, e)
	}
	if _, e := ask(http.Header{}); e == nil || !auth.IsNotAuthenticated(e) {
		t.Errorf("no header: %v, want not authenticated", e)
	}
	if _, e := ask(http.Header{"X-Gateway-Token": {"0123456789abcdeX"}}); e == nil || auth.IsNotAuthenticated(e) ||
		e.Status != 401 || !strings.Contains(e.Headers["WWW-Authenticate"], `error="invalid_token"`) {
		t.Errorf("a wrong secret: %v %v", e, e.Headers)
	}
	short := &SharedSecret{Secrets: []Secret{{Value: "short", User: "ci", Models: []string{"qwen"}}}}
	if _, err := short.Authenticator(llmauthenticator.Env{}); err == nil {
		t.Error("a short secret was accepted")
	}
}

func TestPromptCap(t *testing.T) {
	ad, _ := (&PromptCap{MaxPromptTokens: 100, Models: map[string]int{"gemma": 20}}).Admitter(llmadmitter.Env{})
	for _, c := range []struct {
		model        string
		bytes, msgs  int
		wantRefused  bool
		wantCapInMsg string
	}{
		{"qwen", 200, 1, false, ""},     // 67+4+3 = 74
		{"qwen", 300, 1, true, "100"},   // 100+4+3 = 107
		{"gemma", 30, 1, false, ""},     // 10+4+3 = 17
		{"gemma", 60, 1, true, "is 20"}, // 20+4+3 = 27
	} {
		tk, e := ad.Admit(context.Background(), &tenancy.Admission{Model: c.model, PromptBytes: c.bytes, Messages: c.msgs}, http.Header{})
		if tk != nil || (e != nil) != c.wantRefused || (e != nil && (e.Status != 413 || !strings.Contains(e.Error(), c.wantCapInMsg))) {
			t.Errorf("%+v: %v %v", c, tk, e)
		}
	}
}
