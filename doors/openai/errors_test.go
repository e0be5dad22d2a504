package openai

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/llmedge/llmedge/api"
)

// TestWriteError maps the errors every stage produces to OpenAI's status,
// type, code and param, keeping their headers.
func TestWriteError(t *testing.T) {
	withCode := func(e *api.Error, code, param string) *api.Error { e.Code, e.Param = code, param; return e }
	tests := []struct {
		name         string
		err          *api.Error
		status       int
		typ          string
		code, param  any // nil: JSON null
		header, hval string
	}{
		{"missing credential", api.NewError(401, "Not authenticated").WithHeader("WWW-Authenticate", `Bearer realm="llmedge"`),
			401, "invalid_request_error", "invalid_api_key", nil, "WWW-Authenticate", `Bearer realm="llmedge"`},
		{"model outside the scope", withCode(api.NewError(403, "Not enough permissions: missing scope model:gemma"), "model_not_allowed", "model"),
			403, "invalid_request_error", "model_not_allowed", "model", "", ""},
		{"other scope", api.NewError(403, "Not enough permissions: missing scope admin"),
			403, "invalid_request_error", "insufficient_scope", nil, "", ""},
		{"unknown model", modelNotFound("llama"), 404, "invalid_request_error", "model_not_found", "model", "", ""},
		{"bad field", invalid(codeInvalidValue, "temperature", "bad"), 400, "invalid_request_error", "invalid_value", "temperature", "", ""},
		{"too large", api.NewError(413, "Request body too large"), 413, "invalid_request_error", "request_too_large", nil, "", ""},
		{"headers too large", api.NewError(431, "Request header fields too large"), 431, "invalid_request_error", "headers_too_large", nil, "", ""},
		{"replica refusal", api.NewError(422, "The model rejected the request: nope"), 400, "invalid_request_error", nil, nil, "", ""},
		{"context length", withCode(api.NewError(422, "The model rejected the request: maximum context length"), "context_length_exceeded", "messages"),
			400, "invalid_request_error", "context_length_exceeded", "messages", "", ""},
		{"saturated", api.NewError(429, "at capacity").WithHeader("Retry-After", "1"), 429, "requests", "rate_limit_exceeded", nil, "Retry-After", "1"},
		{"replicas failed", api.NewError(502, "failed"), 502, "server_error", "upstream_error", nil, "", ""},
		{"no replica", api.NewError(503, "none").WithHeader("Retry-After", "5"), 503, "server_error", "model_unavailable", nil, "Retry-After", "5"},
		{"timeout", api.NewError(504, "slow"), 504, "server_error", "upstream_timeout", nil, "", ""},
		{"internal", api.NewError(500, "oops"), 500, "server_error", "internal_error", nil, "", ""},
		{"pydantic list", api.ValidationError(api.FieldError{Type: "missing", Loc: []any{"body", "messages", 0}, Msg: "Field required"}),
			400, "invalid_request_error", nil, nil, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			testDoor().WriteError(rec, tt.err)
			var body struct {
				Error map[string]any `json:"error"`
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
				t.Fatalf("%v: %s", err, rec.Body)
			}
			e := body.Error
			if rec.Code != tt.status || e["type"] != tt.typ || e["code"] != tt.code || e["param"] != tt.param ||
				e["message"] == "" || len(e) != 4 {
				t.Fatalf("%d %s", rec.Code, rec.Body)
			}
			if tt.header != "" && rec.Header().Get(tt.header) != tt.hval {
				t.Fatalf("%s: %q", tt.header, rec.Header().Get(tt.header))
			}
			if rec.Header().Get("Content-Type") != "application/json" {
				t.Fatal("not JSON")
			}
		})
	}
}

func TestMessageOfPydanticList(t *testing.T) {
	e := api.ValidationError(api.FieldError{Loc: []any{"body", "messages", 0, "content"}, Msg: "Field required"})
	if got := message(e); got != "Field required (body.messages.0.content)" {
		t.Fatalf("%q", got)
	}
	if got := message(&api.Error{Status: http.StatusTeapot}); got != "I'm a teapot" {
		t.Fatalf("%q", got)
	}
}
