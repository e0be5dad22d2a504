package auth

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"
)

const (
	formCT      = "application/x-www-form-urlencoded"
	testPW      = "wonderland"
	badCredBody = `{"detail":"Incorrect username or password","error":"invalid_grant","error_description":"Incorrect username or password"}`
)

func testEndpoint(t testing.TB) (*TokenEndpoint, *Verifier) {
	t.Helper()
	users, err := NewUsers([]User{
		{Name: "alice", PasswordHash: mustHash(t, testPW), Models: []string{"qwen", "gemma"}},
		{Name: "bob", PasswordHash: mustHash(t, testPW), Models: []string{"qwen"}, Disabled: true},
		{Name: "carol", PasswordHash: mustHash(t, testPW)},
	})
	if err != nil {
		t.Fatal(err)
	}
	ring := NewKeyRing(testKey(1))
	return &TokenEndpoint{Users: users, Issuer: testIssuer(ring), Realm: "llmedge"}, testVerifier(ring)
}

// multipartBody encodes fields as multipart/form-data.
func multipartBody(t *testing.T, fields ...string) (string, string) {
	t.Helper()
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	for i := 0; i+1 < len(fields); i += 2 {
		if err := mw.WriteField(fields[i], fields[i+1]); err != nil {
			t.Fatal(err)
		}
	}
	fw, _ := mw.CreateFormFile("attachment", "x.txt")
	_, _ = fw.Write([]byte("file content is ignored"))
	_ = mw.Close()
	return b.String(), mw.FormDataContentType()
}

func missing(fields ...string) string {
	var parts []string
	for _, f := range fields {
		parts = append(parts, `{"type":"missing","loc":["body","`+f+`"],"msg":"Field required","input":null}`)
	}
	return strings.Join(parts, ",")
}

func TestTokenEndpointErrors(t *testing.T) {
	mpBody, mpCT := multipartBody(t, "username", "alice", "password", "nope")
	tests := []struct {
		name        string
		method      string
		target      string
		contentType string
		encoding    string
		body        string
		header      map[string]string
		wantStatus  int
		wantBody    string
		wantHeader  map[string]string
	}{
		{name: "GET", method: "GET", wantStatus: 405, wantBody: `{"detail":"Method Not Allowed"}`,
			wantHeader: map[string]string{"Allow": "POST"}},
		{name: "PUT", method: "PUT", contentType: formCT, body: "username=alice&password=" + testPW, wantStatus: 405,
			wantBody: `{"detail":"Method Not Allowed"}`, wantHeader: map[string]string{"Allow": "POST"}},
		{name: "empty body", contentType: formCT, wantStatus: 422,
			wantBody: `{"detail":[` + missing("username", "password") + `]}`},
		{name: "missing password", contentType: formCT, body: "username=alice", wantStatus: 422,
			wantBody: `{"detail":[` + missing("password") + `]}`},
		{name: "empty username counts as missing", contentType: formCT, body: "username=&password=x", wantStatus: 422,
			wantBody: `{"detail":[` + missing("username") + `]}`},
		{name: "bad grant_type", contentType: formCT, body: "grant_type=client_credentials&username=alice&password=x", wantStatus: 422,
			wantBody: `{"detail":[{"type":"string_pattern_mismatch","loc":["body","grant_type"],"msg":"String should match pattern '^password$'","input":"client_credentials","ctx":{"pattern":"^password$"}}]}`},
		{name: "bad grant_type and missing fields", contentType: formCT, body: "grant_type=Password", wantStatus: 422,
			wantBody: `{"detail":[{"type":"string_pattern_mismatch","loc":["body","grant_type"],"msg":"String should match pattern '^password$'","input":"Password","ctx":{"pattern":"^password$"}},` + missing("username", "password") + `]}`},
		{name: "JSON body", contentType: "application/json", body: `{"username":"alice","password":"wonderland"}`, wantStatus: 422,
			wantBody: `{"detail":[` + missing("username", "password") + `]}`},
		{name: "no content type", body: "username=alice&password=" + testPW, wantStatus: 422,
			wantBody: `{"detail":[` + missing("username", "password") + `]}`},
		{name: "fields in the query only", target: "/auth/token?username=alice&password=" + testPW, contentType: formCT, wantStatus: 422,
			wantBody: `{"detail":[` + missing("username", "password") + `]}`},
		{name: "repeated parameter", contentType: formCT, body: "username=alice&username=bob&password=x", wantStatus: 400,
			wantBody: `{"detail":"Parameter username was given more than once","error":"invalid_request","error_description":"Parameter username was given more than once"}`},
		{name: "bad percent-encoding", contentType: formCT, body: "username=%zz&password=x", wantStatus: 400,
			wantBody: `{"detail":"There was an error parsing the body","error":"invalid_request","error_description":"There was an error parsing the body"}`},
		{name: "multipart without boundary", contentType: "multipart/form-data", body: "x", wantStatus: 400,
			wantBody: `{"detail":"There was an error parsing the body","error":"invalid_request","error_description":"There was an error parsing the body"}`},
		{name: "broken multipart", contentType: "multipart/form-data; boundary=zz", body: "--zz\r\nno end", wantStatus: 400,
			wantBody: `{"detail":"There was an error parsing the body","error":"invalid_request","error_description":"There was an error parsing the body"}`},
		{name: "body too large", contentType: formCT, body: "username=alice&password=" + strings.Repeat("x", DefaultMaxTokenBodyBytes), wantStatus: 413,
			wantBody: `{"detail":"Request Entity Too Large","error":"invalid_request","error_description":"Request Entity Too Large"}`},
		{name: "gzip body", contentType: formCT, encoding: "gzip", body: gzipString("username=alice&password=x&grant_type=nope"), wantStatus: 422},
		{name: "gzip bomb", contentType: formCT, encoding: "gzip", body: gzipString("username=alice&password=" + strings.Repeat("x", 10<<20)), wantStatus: 413,
			wantBody: `{"detail":"Request Entity Too Large","error":"invalid_request","error_description":"Request Entity Too Large"}`},
		{name: "brotli body", contentType: formCT, encoding: "br", body: "username=alice&password=x", wantStatus: 415,
			wantHeader: map[string]string{"Accept-Encoding": "gzip"}},
		{name: "wrong password", contentType: formCT, body: "username=alice&password=Wonderland", wantStatus: 401,
			wantBody: badCredBody, wantHeader: map[string]string{"WWW-Authenticate": `Bearer realm="llmedge"`}},
		{name: "unknown user", contentType: formCT, body: "username=mallory&password=" + testPW, wantStatus: 401,
			wantBody: badCredBody, wantHeader: map[string]string{"WWW-Authenticate": `Bearer realm="llmedge"`}},
		{name: "disabled user", contentType: formCT, body: "username=bob&password=" + testPW, wantStatus: 401,
			wantBody: badCredBody, wantHeader: map[string]string{"WWW-Authenticate": `Bearer realm="llmedge"`}},
		{name: "multipart wrong password", contentType: mpCT, body: mpBody, wantStatus: 401, wantBody: badCredBody},
		{name: "scope the user lacks", contentType: formCT, body: "username=alice&password=" + testPW + "&scope=model:qwen+model:llama", wantStatus: 400,
			wantBody: `{"detail":"Requested scope is not allowed: model:llama","error":"invalid_scope","error_description":"Requested scope is not allowed: model:llama"}`},
		{name: "unknown scope", contentType: formCT, body: "username=alice&password=" + testPW + "&scope=admin", wantStatus: 400,
			wantBody: `{"detail":"Requested scope is not allowed: admin","error":"invalid_scope","error_description":"Requested scope is not allowed: admin"}`},
		{name: "bare model name is not a scope", contentType: formCT, body: "username=alice&password=" + testPW + "&scope=qwen", wantStatus: 400,
			wantBody: `{"detail":"Requested scope is not allowed: qwen","error":"invalid_scope","error_description":"Requested scope is not allowed: qwen"}`},
		{name: "malformed scope is not echoed", contentType: formCT, body: "username=alice&password=" + testPW + "&scope=model:q%22wen", wantStatus: 400,
			wantBody: `{"detail":"Requested scope is malformed","error":"invalid_scope","error_description":"Requested scope is malformed"}`},
	}
	ep, _ := testEndpoint(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			method := tt.method
			if method == "" {
				method = http.MethodPost
			}
			target := tt.target
			if target == "" {
				target = "/auth/token"
			}
			r := httptest.NewRequest(method, target, strings.NewReader(tt.body))
			if tt.contentType != "" {
				r.Header.Set("Content-Type", tt.contentType)
			}
			if tt.encoding != "" {
				r.Header.Set("Content-Encoding", tt.encoding)
			}
			for k, v := range tt.header {
				r.Header.Set(k, v)
			}
			w := httptest.NewRecorder()
			ep.ServeHTTP(w, r)
			// Every JSON answer ends with a newline.
			if w.Code != tt.wantStatus || (tt.wantBody != "" && w.Body.String() != tt.wantBody+"\n") {
				t.Fatalf("got %d %s\nwant %d %s", w.Code, w.Body, tt.wantStatus, tt.wantBody)
			}
			want := map[string]string{"Content-Type": "application/json", "Cache-Control": "no-store", "Pragma": "no-cache"}
			for k, v := range tt.wantHeader {
				want[k] = v
			}
			for k, v := range want {
				if got := w.Header().Get(k); got != v {
					t.Errorf("%s = %q, want %q", k, got, v)
				}
			}
			if tt.wantStatus != 401 && w.Header().Get("WWW-Authenticate") != "" {
				t.Errorf("unexpected WWW-Authenticate on %d", tt.wantStatus)
			}
			if strings.Contains(w.Body.String(), testPW) || strings.Contains(w.Body.String(), "Wonderland") {
				t.Error("the answer echoes the password")
			}
		})
	}
}

func TestTokenEndpointSuccess(t *testing.T) {
	mpBody, mpCT := multipartBody(t, "username", "alice", "password", testPW, "scope", "model:qwen")
	tests := []struct {
		name, contentType, body string
		header                  map[string]string
		wantScope               string
		wantSub                 string
	}{
		{"all models by default", formCT, "username=alice&password=" + testPW, nil, "model:gemma model:qwen", "alice"},
		{"one scope", formCT, "grant_type=password&username=alice&password=" + testPW + "&scope=model:qwen", nil, "model:qwen", "alice"},
		{"scopes sorted and deduplicated", formCT, "username=alice&password=" + testPW + "&scope=model:qwen%20model:gemma%20model:qwen", nil, "model:gemma model:qwen", "alice"},
		{"empty grant_type and scope", formCT, "grant_type=&username=alice&password=" + testPW + "&scope=", nil, "model:gemma model:qwen", "alice"},
		{"client credentials ignored", formCT, "username=alice&password=" + testPW + "&client_id=cli&client_secret=s3cret", nil, "model:gemma model:qwen", "alice"},
		{"empty Basic header tolerated", formCT, "username=alice&password=" + testPW, map[string]string{"Authorization": "Basic Og=="}, "model:gemma model:qwen", "alice"},
		{"content type with charset", formCT + "; charset=UTF-8", "username=alice&password=" + testPW, nil, "model:gemma model:qwen", "alice"},
		{"multipart", mpCT, mpBody, nil, "model:qwen", "alice"},
		{"user without models", formCT, "username=carol&password=" + testPW, nil, "", "carol"},
		{"unknown form fields ignored", formCT, "username=alice&password=" + testPW + "&foo=bar&foo=baz", nil, "model:gemma model:qwen", "alice"},
	}
	ep, v := testEndpoint(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, "/auth/token", strings.NewReader(tt.body))
			r.Header.Set("Content-Type", tt.contentType)
			for k, val := range tt.header {
				r.Header.Set(k, val)
			}
			w := httptest.NewRecorder()
			ep.ServeHTTP(w, r)
			if w.Code != 200 {
				t.Fatalf("got %d %s", w.Code, w.Body)
			}
			for k, val := range map[string]string{"Content-Type": "application/json", "Cache-Control": "no-store", "Pragma": "no-cache"} {
				if got := w.Header().Get(k); got != val {
					t.Errorf("%s = %q, want %q", k, got, val)
				}
			}
			var raw map[string]any
			if err := json.Unmarshal(w.Body.Bytes(), &raw); err != nil || len(raw) != 4 {
				t.Fatalf("body = %s (%v)", w.Body, err)
			}
			var resp TokenResponse
			_ = json.Unmarshal(w.Body.Bytes(), &resp)
			if resp.TokenType != "bearer" || resp.ExpiresIn != 3600 || resp.Scope != tt.wantScope {
				t.Errorf("response = %+v, want scope %q", resp, tt.wantScope)
			}
			p, err := v.Verify(resp.AccessToken)
			if err != nil {
				t.Fatal(err)
			}
			if p.Subject != tt.wantSub || strings.Join(p.Scopes, " ") != tt.wantScope {
				t.Errorf("principal = %+v", p)
			}
		})
	}
}

func TestTokenEndpointBodyLimit(t *testing.T) {
	ep, _ := testEndpoint(t)
	ep.MaxBodyBytes = 64
	tests := []struct {
		name          string
		body          string
		contentType   string
		unknownLength bool
		want          int
	}{
		{"fits", "username=alice&password=" + testPW, formCT, false, 200},
		{"declared too long", "username=alice&password=" + testPW + strings.Repeat("x", 64), formCT, false, 413},
		{"chunked too long", "username=alice&password=" + testPW + strings.Repeat("x", 64), formCT, true, 413},
		{"multipart too long", "--b\r\nContent-Disposition: form-data; name=\"username\"\r\n\r\n" + strings.Repeat("x", 100) + "\r\n--b--\r\n", "multipart/form-data; boundary=b", true, 413},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var body io.Reader = strings.NewReader(tt.body)
			if tt.unknownLength {
				body = io.MultiReader(body) // hides the length
			}
			r := httptest.NewRequest(http.MethodPost, "/auth/token", body)
			if tt.unknownLength {
				r.ContentLength = -1
			}
			r.Header.Set("Content-Type", tt.contentType)
			w := httptest.NewRecorder()
			ep.ServeHTTP(w, r)
			if w.Code != tt.want {
				t.Fatalf("got %d %s, want %d", w.Code, w.Body, tt.want)
			}
		})
	}
}

func TestTokenEndpointLimiter(t *testing.T) {
	now := testNow
	clock := func() time.Time { return now }
	ep, _ := testEndpoint(t)
	ep.UserLimiter = NewFailureLimiter(3, time.Minute, clock)
	ep.AddrLimiter = NewFailureLimiter(5, time.Minute, clock)
	post := func(user, pw, addr string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodPost, "/auth/token", strings.NewReader(url.Values{"username": {user}, "password": {pw}}.Encode()))
		r.Header.Set("Content-Type", formCT)
		r.RemoteAddr = net.JoinHostPort(addr, "1234")
		w := httptest.NewRecorder()
		ep.ServeHTTP(w, r)
		return w
	}
	steps := []struct {
		name        string
		user, pw    string
		addr        string
		advance     time.Duration
		want        int
		wantRetryAt string
	}{
		{"fail 1", "alice", "x", "10.0.0.1", 0, 401, ""},
		{"fail 2", "alice", "x", "10.0.0.2", 0, 401, ""},
		{"fail 3", "alice", "x", "10.0.0.3", 0, 401, ""},
		{"user blocked, even with the right password", "alice", testPW, "10.0.0.4", 10 * time.Second, 429, "50"},
		{"other users unaffected", "carol", testPW, "10.0.0.4", 0, 200, ""},
		{"window over", "alice", testPW, "10.0.0.4", 50 * time.Second, 200, ""},
		{"addr fail 1", "u1", "x", "10.9.9.9", 0, 401, ""},
		{"addr fail 2", "u2", "x", "10.9.9.9", 0, 401, ""},
		{"addr fail 3", "u3", "x", "10.9.9.9", 0, 401, ""},
		{"addr fail 4", "u4", "x", "10.9.9.9", 0, 401, ""},
		{"addr fail 5", "u5", "x", "10.9.9.9", 0, 401, ""},
		{"addr blocked", "alice", testPW, "10.9.9.9", 500 * time.Millisecond, 429, "60"},
		{"other addr fine", "alice", testPW, "10.0.0.5", 0, 200, ""},
		// An IPv6 client is counted by its /64: rotating addresses
		// within it does not start a new count.
		{"v6 fail 1", "u1", "x", "2001:db8:1:2::1", 0, 401, ""},
		{"v6 fail 2", "u2", "x", "2001:db8:1:2::2", 0, 401, ""},
		{"v6 fail 3", "u3", "x", "2001:db8:1:2:aaaa::3", 0, 401, ""},
		{"v6 fail 4", "u4", "x", "2001:db8:1:2:bbbb::4", 0, 401, ""},
		{"v6 fail 5", "u5", "x", "2001:db8:1:2:cccc:dddd:eeee:5", 0, 401, ""},
		{"v6 blocked from another address of the /64", "alice", testPW, "2001:db8:1:2:ffff::9", 0, 429, "60"},
		{"the next /64 is fine", "alice", testPW, "2001:db8:1:3::1", 0, 200, ""},
	}
	for _, s := range steps {
		now = now.Add(s.advance)
		w := post(s.user, s.pw, s.addr)
		if w.Code != s.want {
			t.Fatalf("%s: got %d %s, want %d", s.name, w.Code, w.Body, s.want)
		}
		if s.want == 429 {
			if got := w.Header().Get("Retry-After"); got != s.wantRetryAt {
				t.Errorf("%s: Retry-After = %q, want %q", s.name, got, s.wantRetryAt)
			}
			if want := `{"detail":"` + DetailTooManyFails + `","error":"temporarily_unavailable","error_description":"` + DetailTooManyFails + `"}` + "\n"; w.Body.String() != want {
				t.Errorf("%s: body = %s", s.name, w.Body)
			}
		}
	}
}

func TestTokenEndpointExpiresIn(t *testing.T) {
	ep, _ := testEndpoint(t)
	ep.Issuer.TTL = 15 * time.Minute
	r := httptest.NewRequest(http.MethodPost, "/auth/token", strings.NewReader("username=alice&password="+testPW))
	r.Header.Set("Content-Type", formCT)
	w := httptest.NewRecorder()
	ep.ServeHTTP(w, r)
	if !strings.Contains(w.Body.String(), `"expires_in":`+strconv.Itoa(15*60)+`,`) {
		t.Fatalf("body = %s", w.Body)
	}
}

func TestTokenEndpointNotConfigured(t *testing.T) {
	r := httptest.NewRequest(http.MethodPost, "/auth/token", strings.NewReader("username=alice&password=x"))
	r.Header.Set("Content-Type", formCT)
	w := httptest.NewRecorder()
	(&TokenEndpoint{}).ServeHTTP(w, r)
	if w.Code != 500 || w.Body.String() != `{"detail":"Internal Server Error"}`+"\n" {
		t.Fatalf("got %d %s", w.Code, w.Body)
	}
}

func TestTokenEndpointClients(t *testing.T) {
	hash, err := HashPasswordCost("s3cret", 4)
	if err != nil {
		t.Fatal(err)
	}
	clients, err := NewClients(map[string]string{"app": hash})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewClients(map[string]string{"x": "plain"}); err == nil {
		t.Fatal("non-bcrypt client hash accepted")
	}
	e, _ := testEndpoint(t)
	e.Clients = clients
	tests := []struct {
		name       string
		form       string
		basic      []string
		status     int
		oauthError string
	}{
		{"form credentials", "username=alice&password=" + testPW + "&client_id=app&client_secret=s3cret", nil, 200, ""},
		{"basic credentials", "username=alice&password=" + testPW, []string{"app", "s3cret"}, 200, ""},
		{"no credentials", "username=alice&password=" + testPW, nil, 401, "invalid_client"},
		{"wrong secret", "username=alice&password=" + testPW + "&client_id=app&client_secret=nope", nil, 401, "invalid_client"},
		{"unknown client", "username=alice&password=" + testPW, []string{"other", "s3cret"}, 401, "invalid_client"},
		{"empty basic", "username=alice&password=" + testPW, []string{"", ""}, 401, "invalid_client"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest("POST", "/auth/token", strings.NewReader(tt.form))
			r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			if tt.basic != nil {
				r.SetBasicAuth(tt.basic[0], tt.basic[1])
			}
			w := httptest.NewRecorder()
			e.ServeHTTP(w, r)
			if w.Code != tt.status || !strings.Contains(w.Body.String(), tt.oauthError) {
				t.Fatalf("%d %s", w.Code, w.Body)
			}
			if tt.status == 401 && !strings.HasPrefix(w.Header().Get("WWW-Authenticate"), "Basic") {
				t.Fatalf("challenge %q", w.Header().Get("WWW-Authenticate"))
			}
		})
	}
}

func gzipString(s string) string {
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	_, _ = zw.Write([]byte(s))
	_ = zw.Close()
	return b.String()
}
