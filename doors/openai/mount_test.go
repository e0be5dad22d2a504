package openai

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/auth"
	"github.com/llmedge/llmedge/gateway"
)

// scopesAuth takes "Bearer <scope>,<scope>" as a credential with those
// scopes: the model list depends only on the principal's scopes.
type scopesAuth struct{}

func (scopesAuth) Authenticate(r *http.Request) (*auth.Principal, *api.Error) {
	cred, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return nil, api.NewError(http.StatusUnauthorized, auth.DetailNotAuthenticated).WithHeader("WWW-Authenticate", "Bearer")
	}
	return &auth.Principal{Subject: "u", Scopes: strings.Split(cred, ",")}, nil
}

func testSite() (*gateway.Site, *Mount) {
	p := &gateway.Pipeline{Auth: scopesAuth{}, Gateway: &gateway.Gateway{}}
	oa := NewMount(p, testDoor(), nil)
	return &gateway.Site{Mounts: []gateway.Mount{oa}}, oa
}

func TestModelsAndPaths(t *testing.T) {
	type list struct {
		Object string `json:"object"`
		Data   []struct {
			ID      string `json:"id"`
			Object  string `json:"object"`
			Created int64  `json:"created"`
			OwnedBy string `json:"owned_by"`
		} `json:"data"`
	}
	tests := []struct {
		name, method, path, cred string
		passthrough              bool
		status                   int
		want                     string // substring of the body
	}{
		{"list, every model", "GET", "/v1/models", "model:gemma,model:qwen", false, 200, `"data":[{"id":"qwen","object":"model","created":`},
		{"list, the scope's models", "GET", "/v1/models", "model:gemma", false, 200, `"data":[{"id":"gemma",`},
		{"list, no model", "GET", "/v1/models", "other", false, 200, `{"object":"list","data":[]}`},
		{"list without a credential", "GET", "/v1/models", "", false, 401, `"code":"invalid_api_key"`},
		{"one model", "GET", "/v1/models/gemma", "model:gemma", false, 200, `{"id":"gemma","object":"model"`},
		{"a model outside the scope", "GET", "/v1/models/qwen", "model:gemma", false, 404, `"param":"model","code":"model_not_found"`},
		{"an unknown model", "GET", "/v1/models/llama/3", "model:gemma", false, 404, `'llama/3' does not exist`},
		{"one model without a credential", "GET", "/v1/models/qwen", "", false, 401, `"invalid_api_key"`},
		{"list by POST", "POST", "/v1/models", "model:qwen", false, 405, `"code":"method_not_allowed"`},
		{"chat by GET", "GET", "/v1/chat/completions", "model:qwen", false, 405, `"code":"method_not_allowed"`},
		{"unknown /v1 path", "POST", "/v1/audio/speech", "model:qwen", false, 404, `"message":"Invalid URL (POST /v1/audio/speech)"`},
		{"unknown /v1 path, passthrough", "POST", "/v1/audio/speech", "model:qwen", true, 299, "next"},
		{"unknown path", "GET", "/v2/x", "", false, 404, `{"detail":"Not Found"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, _ := testSite()
			a.Passthrough = tt.passthrough
			r := httptest.NewRequest(tt.method, tt.path, nil)
			if tt.cred != "" {
				r.Header.Set("Authorization", "Bearer "+tt.cred)
			}
			w := httptest.NewRecorder()
			a.ServeHTTP(w, r, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.WriteHeader(299)
				_, _ = w.Write([]byte("next"))
			}))
			if w.Code != tt.status || !strings.Contains(w.Body.String(), tt.want) {
				t.Fatalf("%d %s", w.Code, w.Body)
			}
			if w.Code == 200 && tt.path == "/v1/models" {
				var l list
				if err := json.Unmarshal(w.Body.Bytes(), &l); err != nil || l.Object != "list" {
					t.Fatalf("%v %s", err, w.Body)
				}
				for _, m := range l.Data {
					if m.Object != "model" || m.Created == 0 || m.OwnedBy != OwnedBy {
						t.Fatalf("model %+v", m)
					}
				}
				if w.Header().Get("Cache-Control") != "no-store" {
					t.Fatal("a credential's list must not be cached")
				}
			}
			if w.Code == 405 && w.Header().Get("Allow") == "" {
				t.Fatal("405 without Allow")
			}
		})
	}
}
