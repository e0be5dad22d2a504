package e2e

import (
	"bytes"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
)

// TestOpenAPIMatchesServer loads GET /openapi.json with a real OpenAPI 3.1
// library, validates the document, then sends requests to every path (the
// native API's and OpenAI's under /v1, the Responses API included; the
// Anthropic door's are TestAnthropicOpenAPI's) and checks each request and
// answer, errors included, against it.
func TestOpenAPIMatchesServer(t *testing.T) {
	sim := startSim(t, "-tokens", "3")
	g := startGateway(t, GatewayConfig{Models: map[string]string{"qwen": staticModel(sim), "gemma": "\t\t\tprotocol openai"}})

	resp, err := g.Client.Get(g.Base + "/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	spec := readJSON(t, resp, nil)
	doc, err := libopenapi.NewDocument(spec)
	if err != nil {
		t.Fatal(err)
	}
	v, errs := validator.NewValidator(doc)
	if len(errs) > 0 {
		t.Fatalf("validator: %v", errs)
	}
	if ok, verrs := v.ValidateDocument(); !ok {
		for _, e := range verrs {
			t.Errorf("document: %s: %s", e.Message, e.Reason)
		}
		t.FailNow()
	}

	tok := g.Token(t, "demo", "demo", "")
	aliceTok := g.Token(t, "alice", "demo", "") // qwen only
	rt := loginRefresh(t, g, "demo", "demo")
	used := loginRefresh(t, g, "demo", "demo")
	if s, _ := postRefresh(t, g, used, ""); s != 200 {
		t.Fatalf("refresh: %d", s)
	}
	apiKey := createKey(t, g, "--user", "demo")
	form := func(vals url.Values) (string, string) {
		return "application/x-www-form-urlencoded", vals.Encode()
	}
	jsonBody := func(s string) (string, string) { return "application/json", s }
	cases := []struct {
		name, method, path string
		ct, body           string
		token              string
		status             int
		checkRequest       bool // the request itself must match the spec
		specRefuses        bool // the spec must refuse the request too
	}{
		{name: "token", method: "POST", path: "/auth/token", status: 200, checkRequest: true},
		{name: "token missing fields", method: "POST", path: "/auth/token", status: 422},
		{name: "token bad password", method: "POST", path: "/auth/token", status: 401},
		{name: "token bad scope", method: "POST", path: "/auth/token", status: 400},
		{name: "token refresh", method: "POST", path: "/auth/token", status: 200, checkRequest: true},
		{name: "token refresh reused", method: "POST", path: "/auth/token", status: 400, checkRequest: true},
		{name: "inference api key", method: "POST", path: "/tasks/assistant_inference", token: apiKey, status: 200, checkRequest: true},
		{name: "inference", method: "POST", path: "/tasks/assistant_inference", token: tok, status: 200, checkRequest: true},
		{name: "inference stream", method: "POST", path: "/tasks/assistant_inference", token: tok, status: 200, checkRequest: true},
		{name: "inference no token", method: "POST", path: "/tasks/assistant_inference", status: 401},
		{name: "inference invalid", method: "POST", path: "/tasks/assistant_inference", token: tok, status: 422},
		{name: "inference no replica", method: "POST", path: "/tasks/assistant_inference", token: tok, status: 503, checkRequest: true},
		{name: "jwks", method: "GET", path: "/.well-known/jwks.json", status: 200, checkRequest: true},
		{name: "healthz", method: "GET", path: "/healthz", status: 200, checkRequest: true},
		{name: "readyz", method: "GET", path: "/readyz", status: 200, checkRequest: true}, // gemma, down, is not required
		{name: "readyz model", method: "GET", path: "/readyz/qwen", status: 200, checkRequest: true},
		{name: "readyz model down", method: "GET", path: "/readyz/gemma", status: 503, checkRequest: true},
		{name: "readyz model unknown", method: "GET", path: "/readyz/llama", status: 404, checkRequest: true},
		{name: "openapi", method: "GET", path: "/openapi.json", status: 200, checkRequest: true},
		{name: "openai chat", method: "POST", path: "/v1/chat/completions", token: tok, status: 200, checkRequest: true},
		{name: "openai stream", method: "POST", path: "/v1/chat/completions", token: tok, status: 200, checkRequest: true},
		{name: "openai no token", method: "POST", path: "/v1/chat/completions", status: 401},
		{name: "openai invalid", method: "POST", path: "/v1/chat/completions", token: tok, status: 400},
		{name: "openai unknown model", method: "POST", path: "/v1/chat/completions", token: tok, status: 404},
		{name: "openai scope", method: "POST", path: "/v1/chat/completions", token: aliceTok, status: 403, checkRequest: true},
		{name: "openai no replica", method: "POST", path: "/v1/chat/completions", token: tok, status: 503, checkRequest: true},
		{name: "openai models", method: "GET", path: "/v1/models", token: tok, status: 200, checkRequest: true},
		{name: "openai models no token", method: "GET", path: "/v1/models", status: 401},
		{name: "openai model", method: "GET", path: "/v1/models/qwen", token: tok, status: 200, checkRequest: true},
		{name: "openai model unknown", method: "GET", path: "/v1/models/llama", token: tok, status: 404, checkRequest: true},
		// Carried through (issue 20): the request is open, the answer the
		// replica's.
		{name: "openai chat tools", method: "POST", path: "/v1/chat/completions", token: tok, status: 200, checkRequest: true},
		{name: "openai chat n and logprobs", method: "POST", path: "/v1/chat/completions", token: tok, status: 200, checkRequest: true},
		{name: "openai chat tools stream", method: "POST", path: "/v1/chat/completions", token: tok, status: 200, checkRequest: true},
		{name: "openai completion", method: "POST", path: "/v1/completions", token: tok, status: 200, checkRequest: true},
		{name: "openai completion stream", method: "POST", path: "/v1/completions", token: tok, status: 200, checkRequest: true},
		{name: "openai completion invalid", method: "POST", path: "/v1/completions", token: tok, status: 400},
		{name: "openai completion scope", method: "POST", path: "/v1/completions", token: aliceTok, status: 403, checkRequest: true},
		{name: "openai embeddings", method: "POST", path: "/v1/embeddings", token: tok, status: 200, checkRequest: true},
		{name: "openai embeddings base64", method: "POST", path: "/v1/embeddings", token: tok, status: 200, checkRequest: true},
		{name: "openai embeddings no token", method: "POST", path: "/v1/embeddings", status: 401},
		{name: "openai embeddings no replica", method: "POST", path: "/v1/embeddings", token: tok, status: 503, checkRequest: true},
		// The Responses API, carried through and stateless.
		{name: "responses", method: "POST", path: "/v1/responses", token: apiKey, status: 200, checkRequest: true},
		{name: "responses stream", method: "POST", path: "/v1/responses", token: tok, status: 200, checkRequest: true},
		{name: "responses tools", method: "POST", path: "/v1/responses", token: tok, status: 200, checkRequest: true},
		{name: "responses json schema", method: "POST", path: "/v1/responses", token: tok, status: 200, checkRequest: true},
		{name: "responses no token", method: "POST", path: "/v1/responses", status: 401},
		{name: "responses invalid", method: "POST", path: "/v1/responses", token: tok, status: 400, specRefuses: true},
		{name: "responses stateful", method: "POST", path: "/v1/responses", token: tok, status: 400, specRefuses: true},
		{name: "responses unknown model", method: "POST", path: "/v1/responses", token: tok, status: 404},
		{name: "responses scope", method: "POST", path: "/v1/responses", token: aliceTok, status: 403, checkRequest: true},
		{name: "responses no replica", method: "POST", path: "/v1/responses", token: tok, status: 503, checkRequest: true},
	}
	bodies := map[string]func() (string, string){
		"token":                func() (string, string) { return form(url.Values{"username": {"demo"}, "password": {"demo"}}) },
		"token missing fields": func() (string, string) { return form(url.Values{"username": {"demo"}}) },
		"token bad password":   func() (string, string) { return form(url.Values{"username": {"demo"}, "password": {"x"}}) },
		"token bad scope": func() (string, string) {
			return form(url.Values{"username": {"alice"}, "password": {"demo"}, "scope": {"model:gemma"}})
		},
		"token refresh": func() (string, string) {
			return form(url.Values{"grant_type": {"refresh_token"}, "refresh_token": {rt}})
		},
		"token refresh reused": func() (string, string) {
			return form(url.Values{"grant_type": {"refresh_token"}, "refresh_token": {used}})
		},
		"inference":         func() (string, string) { return jsonBody(`{"messages":[{"role":"user","content":"hi"}]}`) },
		"inference api key": func() (string, string) { return jsonBody(`{"messages":[{"role":"user","content":"hi"}]}`) },
		"inference stream": func() (string, string) {
			return jsonBody(`{"messages":[{"role":"user","content":"hi"}],"stream":true}`)
		},
		"inference no token": func() (string, string) { return jsonBody(`{"messages":[{"role":"user","content":"hi"}]}`) },
		"inference invalid":  func() (string, string) { return jsonBody(`{"messages":[],"temperature":5}`) },
		"inference no replica": func() (string, string) {
			return jsonBody(`{"messages":[{"role":"user","content":"hi"}],"model_type":"gemma"}`)
		},
		"openai chat": func() (string, string) {
			return jsonBody(`{"model":"qwen","messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}],"temperature":0.5,"max_completion_tokens":5,"stop":["x"]}`)
		},
		"openai stream": func() (string, string) {
			return jsonBody(`{"model":"qwen","messages":[{"role":"user","content":"hi"}],"stream":true,"stream_options":{"include_usage":true}}`)
		},
		"openai no token": func() (string, string) {
			return jsonBody(`{"model":"qwen","messages":[{"role":"user","content":"hi"}]}`)
		},
		"openai invalid": func() (string, string) { return jsonBody(`{"model":"qwen","messages":[],"temperature":5}`) },
		"openai unknown model": func() (string, string) {
			return jsonBody(`{"model":"llama","messages":[{"role":"user","content":"hi"}]}`)
		},
		"openai scope": func() (string, string) {
			return jsonBody(`{"model":"gemma","messages":[{"role":"user","content":"hi"}]}`)
		},
		"openai no replica": func() (string, string) {
			return jsonBody(`{"model":"gemma","messages":[{"role":"user","content":"hi"}]}`)
		},
		"openai chat tools": func() (string, string) {
			return jsonBody(`{"model":"qwen","messages":[{"role":"user","content":[{"type":"text","text":"look"},{"type":"image_url","image_url":{"url":"https://example.com/cat.png"}}]},` +
				`{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c1","content":"ok"}],` +
				`"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"x":{"type":"integer"}},"required":["x"]}}}],"tool_choice":"required","chat_template_kwargs":{"a":1}}`)
		},
		"openai chat n and logprobs": func() (string, string) {
			return jsonBody(`{"model":"qwen","messages":[{"role":"developer","content":"hi"},{"role":"user","content":"hi"}],"n":2,"logprobs":true,"top_logprobs":2,"response_format":{"type":"json_object"}}`)
		},
		"openai chat tools stream": func() (string, string) {
			return jsonBody(`{"model":"qwen","messages":[{"role":"user","content":"hi"}],"stream":true,"tools":[{"type":"function","function":{"name":"f"}}]}`)
		},
		"openai completion": func() (string, string) {
			return jsonBody(`{"model":"qwen","prompt":["a b","c"],"max_tokens":3,"logprobs":1,"echo":true}`)
		},
		"openai completion stream": func() (string, string) {
			return jsonBody(`{"model":"qwen","prompt":"a b","stream":true,"stream_options":{"include_usage":true}}`)
		},
		"openai completion invalid": func() (string, string) { return jsonBody(`{"model":"qwen","prompt":[]}`) },
		"openai completion scope": func() (string, string) {
			return jsonBody(`{"model":"gemma","prompt":"hi"}`)
		},
		"openai embeddings": func() (string, string) { return jsonBody(`{"model":"qwen","input":["a","b c"]}`) },
		"openai embeddings base64": func() (string, string) {
			return jsonBody(`{"model":"qwen","input":"a","encoding_format":"base64","dimensions":4}`)
		},
		"openai embeddings no token": func() (string, string) {
			return jsonBody(`{"model":"qwen","input":"a"}`)
		},
		"openai embeddings no replica": func() (string, string) { return jsonBody(`{"model":"gemma","input":"a"}`) },
		"responses": func() (string, string) {
			return jsonBody(`{"model":"qwen","input":[{"role":"developer","content":"Be brief."},{"role":"user","content":[{"type":"input_text","text":"hi"}]}],` +
				`"instructions":"Answer in English.","max_output_tokens":2,"temperature":0.5,"top_p":1,"metadata":{"k":"v"},"truncation":"disabled"}`)
		},
		"responses stream": func() (string, string) {
			return jsonBody(`{"model":"qwen","input":"hi","stream":true,"store":false}`)
		},
		"responses tools": func() (string, string) {
			return jsonBody(`{"model":"qwen","input":[{"role":"user","content":"Weather in Paris?"},` +
				`{"type":"function_call","call_id":"c1","name":"get_weather","arguments":"{\"city\":\"Paris\"}"},{"type":"function_call_output","call_id":"c1","output":"{\"temp\":21}"}],` +
				`"tools":[{"type":"function","name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}],"tool_choice":"auto"}`)
		},
		"responses json schema": func() (string, string) {
			return jsonBody(`{"model":"qwen","input":"A city.","text":{"format":{"type":"json_schema","name":"city","schema":{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}}}}`)
		},
		"responses no token": func() (string, string) { return jsonBody(`{"model":"qwen","input":"hi"}`) },
		"responses invalid":  func() (string, string) { return jsonBody(`{"model":"qwen","input":[],"temperature":5}`) },
		"responses stateful": func() (string, string) {
			return jsonBody(`{"model":"qwen","input":"hi","previous_response_id":"resp_1"}`)
		},
		"responses unknown model": func() (string, string) { return jsonBody(`{"model":"llama","input":"hi"}`) },
		"responses scope":         func() (string, string) { return jsonBody(`{"model":"gemma","input":"hi"}`) },
		"responses no replica":    func() (string, string) { return jsonBody(`{"model":"gemma","input":"hi"}`) },
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var ct, body string
			if f := bodies[tc.name]; f != nil {
				ct, body = f()
			}
			build := func() *http.Request {
				req, _ := http.NewRequest(tc.method, g.Base+tc.path, strings.NewReader(body))
				if ct != "" {
					req.Header.Set("Content-Type", ct)
				}
				if tc.token != "" {
					req.Header.Set("Authorization", "Bearer "+tc.token)
				}
				return req
			}
			if tc.checkRequest {
				if ok, verrs := v.ValidateHttpRequest(build()); !ok {
					for _, e := range verrs {
						t.Errorf("request: %s: %s", e.Message, e.Reason)
					}
				}
			}
			if tc.specRefuses {
				if ok, _ := v.ValidateHttpRequest(build()); ok {
					t.Errorf("the description takes a request the server refuses: %s", body)
				}
			}
			resp, err := g.Client.Do(build())
			if err != nil {
				t.Fatal(err)
			}
			raw, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.status, raw)
			}
			resp.Body = io.NopCloser(bytes.NewReader(raw))
			if ok, verrs := v.ValidateHttpResponse(build(), resp); !ok {
				for _, e := range verrs {
					t.Errorf("response %d: %s: %s", resp.StatusCode, e.Message, e.Reason)
				}
			}
		})
	}
}
