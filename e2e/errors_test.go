package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

type errorBody struct {
	Detail           json.RawMessage `json:"detail"`
	Error            string          `json:"error"`
	ErrorDescription string          `json:"error_description"`
}

func (e errorBody) detailText() string {
	var s string
	if json.Unmarshal(e.Detail, &s) == nil {
		return s
	}
	return string(e.Detail)
}

// TestErrorRows checks each error row of the README's error table against the real server.
func TestErrorRows(t *testing.T) {
	ok := startSim(t)
	failing := startSim(t, "-error-rate", "1", "-error-status", "500")
	hanging := startSim(t, "-hang")
	short := startSim(t, "-max-model-len", "5")
	g := startGateway(t, GatewayConfig{
		Options: "\t\tmax_body_size 4KB",
		Models: map[string]string{
			"qwen":    staticModel(ok),
			"gemma":   staticModel(ok),
			"broken":  staticModel(failing),
			"slow":    staticModel(hanging) + "\n\t\t\tfirst_token_timeout 500ms\n\t\t\tresponse_timeout 500ms",
			"watched": staticModel(hanging) + "\n\t\t\tfirst_token_timeout 500ms\n\t\t\tstream_upstream always",
			"busy":    staticModel(hanging) + "\n\t\t\tmax_concurrency 1",
			"empty":   "\t\t\tprotocol openai",
			"tiny":    staticModel(short),
		},
	})
	demo := g.Token(t, "demo", "demo", "")
	alice := g.Token(t, "alice", "demo", "")

	// Hold busy's only slot.
	holdCtx, release := context.WithCancel(context.Background())
	defer release()
	go func() {
		body, _ := json.Marshal(withModel("busy"))
		req, _ := http.NewRequestWithContext(holdCtx, "POST", g.Base+"/tasks/assistant_inference", strings.NewReader(string(body)))
		req.Header.Set("Authorization", "Bearer "+demo)
		if resp, err := g.Client.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	waitFor(t, 5*time.Second, func() bool { return hanging.Stats(t).InFlight == 1 })

	big := `{"messages":[{"role":"user","content":"` + strings.Repeat("x", 5000) + `"}]}`
	tests := []struct {
		name       string
		token      string
		body       any
		status     int
		detail     string // substring of detail
		authHeader string // substring of WWW-Authenticate
		retryAfter bool
	}{
		{"no token", "", withModel("qwen"), 401, "Not authenticated", "Bearer", false},
		{"garbage token", "not.a.token", withModel("qwen"), 401, "Could not validate credentials", `error="invalid_token"`, false},
		{"scope missing", alice, withModel("gemma"), 403, "", `error="insufficient_scope"`, false},
		{"too large", demo, big, 413, "too large", "", false},
		{"empty messages", demo, `{"messages":[]}`, 422, `"too_short"`, "", false},
		{"malformed json", demo, `{"messages":[`, 422, `"json_invalid"`, "", false},
		{"unknown model", demo, withModel("llama"), 422, `"literal_error"`, "", false},
		{"saturated", demo, withModel("busy"), 429, "busy", "", true},
		{"replica 500s", demo, withModel("broken"), 502, "broken", "", false},
		{"no replicas", demo, withModel("empty"), 503, "'empty'", "", true},
		{"response timeout", demo, withModel("slow"), 504, "slow", "", false},
		{"first token timeout", demo, withModel("watched"), 504, "watched", "", false},
		{"first token timeout, streamed", demo, withModel("slow", "stream", true), 504, "slow", "", false},
		{"context length", demo, withModel("tiny"), 422, "context", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := g.Infer(t, tt.token, tt.body)
			var e errorBody
			raw := readJSON(t, resp, &e)
			if resp.StatusCode != tt.status {
				t.Fatalf("status %s, want %d: %s", resp.Status, tt.status, raw)
			}
			if !strings.Contains(e.detailText(), tt.detail) || len(e.Detail) == 0 {
				t.Fatalf("detail %s lacks %q", e.Detail, tt.detail)
			}
			if got := resp.Header.Get("WWW-Authenticate"); !strings.Contains(got, tt.authHeader) ||
				(tt.authHeader == "" && got != "") {
				t.Fatalf("WWW-Authenticate %q, want %q", got, tt.authHeader)
			}
			if tt.name == "no token" && strings.Contains(resp.Header.Get("WWW-Authenticate"), "error=") {
				t.Fatal("a missing token must not carry error=")
			}
			if (resp.Header.Get("Retry-After") != "") != tt.retryAfter {
				t.Fatalf("Retry-After %q", resp.Header.Get("Retry-After"))
			}
		})
	}
}

func TestTokenEndpointErrors(t *testing.T) {
	sim := startSim(t)
	g := startGateway(t, GatewayConfig{Models: map[string]string{"qwen": staticModel(sim), "gemma": staticModel(sim)}})
	tests := []struct {
		name   string
		form   url.Values
		status int
		detail string
		oauth  string
	}{
		{"missing fields", url.Values{}, 422, `"loc":["body","username"]`, ""},
		{"wrong grant type", url.Values{"username": {"demo"}, "password": {"demo"}, "grant_type": {"client_credentials"}}, 422, "string_pattern_mismatch", ""},
		{"wrong password", url.Values{"username": {"demo"}, "password": {"nope"}}, 401, "Incorrect username or password", "invalid_grant"},
		{"unknown user", url.Values{"username": {"mallory"}, "password": {"demo"}}, 401, "Incorrect username or password", "invalid_grant"},
		{"scope not allowed", url.Values{"username": {"alice"}, "password": {"demo"}, "scope": {"model:gemma"}}, 400, "model:gemma", "invalid_scope"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := g.Client.PostForm(g.Base+"/auth/token", tt.form)
			if err != nil {
				t.Fatal(err)
			}
			var e errorBody
			raw := readJSON(t, resp, &e)
			if resp.StatusCode != tt.status || !strings.Contains(string(raw), tt.detail) || e.Error != tt.oauth {
				t.Fatalf("%s %s", resp.Status, raw)
			}
			if tt.status == 401 && resp.Header.Get("WWW-Authenticate") == "" {
				t.Fatal("401 without WWW-Authenticate")
			}
		})
	}
	t.Run("scoped token", func(t *testing.T) {
		tok := g.Token(t, "demo", "demo", "model:qwen")
		resp := g.Infer(t, tok, withModel("gemma"))
		readJSON(t, resp, nil)
		if resp.StatusCode != 403 {
			t.Fatalf("a model:qwen token used for gemma: %s", resp.Status)
		}
	})
	t.Run("lockout after repeated failures", func(t *testing.T) {
		bad := url.Values{"username": {"alice"}, "password": {"wrong"}}
		var last *http.Response
		for i := 0; i < 11; i++ {
			resp, err := g.Client.PostForm(g.Base+"/auth/token", bad)
			if err != nil {
				t.Fatal(err)
			}
			readJSON(t, resp, nil)
			last = resp
		}
		if last.StatusCode != 429 || last.Header.Get("Retry-After") == "" {
			t.Fatalf("after 11 failures: %s Retry-After %q", last.Status, last.Header.Get("Retry-After"))
		}
		// The right password does not get through while locked out either.
		resp, _ := g.Client.PostForm(g.Base+"/auth/token", url.Values{"username": {"alice"}, "password": {"demo"}})
		readJSON(t, resp, nil)
		if resp.StatusCode != 429 {
			t.Fatalf("locked user with the right password: %s", resp.Status)
		}
		g.Token(t, "demo", "demo", "") // another user is unaffected
	})
	t.Run("method and path", func(t *testing.T) {
		resp, _ := g.Client.Get(g.Base + "/auth/token")
		readJSON(t, resp, nil)
		if resp.StatusCode != 405 {
			t.Fatalf("GET /auth/token: %s", resp.Status)
		}
		resp, _ = g.Client.Get(g.Base + "/nope")
		var e errorBody
		readJSON(t, resp, &e)
		if resp.StatusCode != 404 || e.detailText() != "Not Found" {
			t.Fatalf("unknown path: %s %s", resp.Status, e.Detail)
		}
	})
}
