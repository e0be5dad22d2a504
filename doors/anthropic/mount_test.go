package anthropic

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/auth"
	"github.com/llmedge/llmedge/backends/pool"
	"github.com/llmedge/llmedge/gateway"
	"github.com/llmedge/llmedge/routing"
)

// scopesAuth takes "Bearer <scope>,<scope>" as a credential with those
// scopes.
type scopesAuth struct{}

func (scopesAuth) Authenticate(r *http.Request) (*auth.Principal, *api.Error) {
	cred, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return nil, api.NewError(http.StatusUnauthorized, auth.DetailNotAuthenticated).WithHeader("WWW-Authenticate", "Bearer")
	}
	if cred == "bad" {
		return nil, api.NewError(http.StatusUnauthorized, "Could not validate credentials").WithHeader("WWW-Authenticate", "Bearer")
	}
	return &auth.Principal{Subject: "u", Scopes: strings.Split(cred, ",")}, nil
}

// testPipeline is a pipeline whose gateway has the door's models, but no
// replica of any: a request that reaches routing is answered 503.
func testPipeline(t *testing.T) *gateway.Pipeline {
	g := &gateway.Gateway{Models: map[string]*gateway.Model{}, PingInterval: -1}
	for _, name := range []string{"qwen", "gemma", "llama"} {
		p := pool.New(t.Name()+"/"+name, &routing.RoundRobin{})
		t.Cleanup(p.Close)
		g.Models[name] = &gateway.Model{Name: name, Pool: p}
	}
	return &gateway.Pipeline{Auth: scopesAuth{}, Gateway: g}
}

// TestMount runs requests through the door's paths and the pipeline's
// stages up to the gateway, whose models have no replica (503): what the
// door answers before a replica is asked.
func TestMount(t *testing.T) {
	const body = `{"model":"qwen","max_tokens":5,"messages":[{"role":"user","content":"Hi"}]}`
	for _, c := range []struct {
		name, method, path, body string
		header                   []string
		status                   int
		typ, msg                 string
	}{
		{"x-api-key", "POST", PathMessages, body, []string{"X-Api-Key", "model:qwen"}, 503, "overloaded_error", "No healthy replica"},
		{"bearer", "POST", PathMessages, body, []string{"Authorization", "Bearer model:qwen"}, 503, "overloaded_error", "No healthy replica"},
		{"authorization wins", "POST", PathMessages, body, []string{"Authorization", "Bearer model:qwen", "X-Api-Key", "bad"}, 503, "overloaded_error", ""},
		{"no credential", "POST", PathMessages, body, nil, 401, "authentication_error", "Not authenticated"},
		{"bad key", "POST", PathMessages, body, []string{"X-Api-Key", "bad"}, 401, "authentication_error", "Could not validate credentials"},
		{"out of scope", "POST", PathMessages, body, []string{"X-Api-Key", "model:gemma"}, 403, "permission_error", "model:qwen"},
		{"bad body, authenticated", "POST", PathMessages, `{"model":"qwen"}`, []string{"X-Api-Key", "model:qwen"}, 400, "invalid_request_error", "max_tokens: Field required"},
		{"bad body, unauthenticated", "POST", PathMessages, `{"model":"qwen"}`, nil, 401, "authentication_error", ""},
		{"GET", "GET", PathMessages, "", nil, 405, "invalid_request_error", "takes POST"},
		{"batches", "POST", "/v1/messages/batches", body, nil, 404, "not_found_error", "POST /v1/messages/batches is not served here"},
		{"count", "POST", PathCountTokens, `{"model":"qwen","messages":[{"role":"user","content":"Hi"}]}`, []string{"X-Api-Key", "model:qwen"}, 503, "overloaded_error", ""},
		{"count, translated model", "POST", PathCountTokens, `{"model":"gemma","messages":[{"role":"user","content":"Hi"}]}`,
			[]string{"X-Api-Key", "model:gemma"}, 503, "overloaded_error", "No healthy replica"}, // counted by a replica's tokenizer
		{"count, translated model out of scope", "POST", PathCountTokens, `{"model":"gemma","messages":[{"role":"user","content":"Hi"}]}`,
			[]string{"X-Api-Key", "model:qwen"}, 403, "permission_error", ""},
		{"count, no max_tokens needed but messages", "POST", PathCountTokens, `{"model":"qwen"}`,
			[]string{"X-Api-Key", "model:qwen"}, 400, "invalid_request_error", "messages: Field required"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := testPipeline(t)
			site := &gateway.Site{Mounts: []gateway.Mount{NewMount(p, testDoor(), nil)}}
			r := httptest.NewRequest(c.method, c.path, strings.NewReader(c.body))
			for i := 0; i+1 < len(c.header); i += 2 {
				r.Header.Set(c.header[i], c.header[i+1])
			}
			w := httptest.NewRecorder()
			site.ServeHTTP(w, r, nil)
			var e struct {
				Type  string `json:"type"`
				Error struct {
					Type, Message string
				} `json:"error"`
				RequestID *string `json:"request_id"`
			}
			if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil {
				t.Fatalf("%v: %s", err, w.Body)
			}
			if w.Code != c.status || e.Type != "error" || e.Error.Type != c.typ || !strings.Contains(e.Error.Message, c.msg) {
				t.Fatalf("%d %s", w.Code, w.Body)
			}
			if id := w.Header().Get("X-Request-ID"); id != "" && (w.Header().Get("Request-Id") != id || e.RequestID == nil || *e.RequestID != id) {
				t.Fatalf("request ids: %q %q %v", id, w.Header().Get("Request-Id"), e.RequestID)
			}
			if c.status == 401 && w.Header().Get("WWW-Authenticate") == "" {
				t.Fatal("401 without its challenge")
			}
		})
	}
}

// TestStageHandlers: a handler that runs the pipeline's stages through the
// door (llm_auth anthropic) takes x-api-key too.
func TestStageHandlers(t *testing.T) {
	p := testPipeline(t)
	r := httptest.NewRequest("POST", PathMessages, strings.NewReader(`{"model":"qwen","max_tokens":5,"messages":[{"role":"user","content":"Hi"}]}`))
	r.Header.Set("X-Api-Key", "model:qwen")
	w := httptest.NewRecorder()
	_, ex, ok := p.Through(w, r, testDoor(), gateway.StageAuthorized)
	if !ok || ex.Principal == nil || ex.Chat.Model != "qwen" {
		t.Fatalf("%v %d %s", ok, w.Code, w.Body)
	}
}

func TestDescribe(t *testing.T) {
	for status, want := range map[int]struct {
		status int
		typ    string
	}{
		400: {400, "invalid_request_error"}, 422: {400, "invalid_request_error"}, 401: {401, "authentication_error"},
		403: {403, "permission_error"}, 404: {404, "not_found_error"}, 405: {405, "invalid_request_error"},
		413: {413, "request_too_large"}, 429: {429, "rate_limit_error"}, 431: {431, "invalid_request_error"},
		500: {500, "api_error"}, 502: {502, "api_error"}, 503: {503, "overloaded_error"}, 504: {504, "timeout_error"},
	} {
		s, typ := describe(api.NewError(status, "x"))
		if s != want.status || typ != want.typ {
			t.Errorf("%d: %d %s, want %d %s", status, s, typ, want.status, want.typ)
		}
	}
	// A native validator's list, placed before this door's route.
	e := api.ValidationError(api.FieldError{Type: "missing", Loc: []any{"body", "messages", 0}, Msg: "Field required"})
	if m := message(e); m != "body.messages.0: Field required" {
		t.Fatal(m)
	}
	// Headers go with the error.
	w := httptest.NewRecorder()
	writeError(w, api.NewError(429, "Rate limit reached").WithHeader("Retry-After", "3"))
	if w.Code != 429 || w.Header().Get("Retry-After") != "3" ||
		w.Body.String() != `{"type":"error","error":{"type":"rate_limit_error","message":"Rate limit reached"},"request_id":null}`+"\n" {
		t.Fatalf("%d %v %s", w.Code, w.Header(), w.Body)
	}
	// A replica's 404 on count_tokens is the model's 404.
	w = httptest.NewRecorder()
	u := api.NewError(400, "Unsupported parameter: ...")
	u.Code, u.Param = "unsupported_parameter", string(api.FormatAnthropicCountTokens)
	CountTokens{testDoor()}.WriteError(w, u)
	if w.Code != 404 || !strings.Contains(w.Body.String(), `"not_found_error"`) {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	// So is a protocol's refusal of the whole API (ollama's, native).
	w = httptest.NewRecorder()
	u = api.NewError(400, "Unsupported parameter: this model's replicas speak the ollama protocol, which cannot carry ...")
	u.Code = "unsupported_parameter"
	CountTokens{testDoor()}.WriteError(w, u)
	if w.Code != 404 || !strings.Contains(w.Body.String(), `"not_found_error"`) {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
}
