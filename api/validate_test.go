package api

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func testValidator() *Validator {
	return &Validator{Models: []string{"qwen", "gemma"}, DefaultModel: "qwen",
		Limits: Limits{MaxMessages: 3, MaxContentChars: 10, MaxBodyBytes: 2048}}
}

func TestParseValid(t *testing.T) {
	v := testValidator()
	tests := []struct {
		name string
		body string
		want InferenceRequest
	}{
		{"defaults", `{"messages":[{"role":"user","content":"hi"}]}`,
			InferenceRequest{Messages: []Message{{Role: "user", Content: "hi"}}, ModelType: "qwen", Temperature: 0.3}},
		{"all fields", `{"messages":[{"role":"system","content":"s"},{"role":"assistant","content":"a"}],"model_type":"gemma","temperature":2,"stream":true,"system_message":"be brief","extra":1}`,
			InferenceRequest{Messages: []Message{{Role: "system", Content: "s"}, {Role: "assistant", Content: "a"}}, ModelType: "gemma", Temperature: 2, Stream: true, SystemMessage: ptr("be brief")}},
		{"zero temperature and null system", `{"messages":[{"role":"user","content":""}],"temperature":0,"system_message":null,"stream":false}`,
			InferenceRequest{Messages: []Message{{Role: "user", Content: ""}}, ModelType: "qwen", Temperature: 0}},
		{"lax bool", `{"messages":[{"role":"user","content":"x"}],"stream":"yes"}`,
			InferenceRequest{Messages: []Message{{Role: "user", Content: "x"}}, ModelType: "qwen", Temperature: 0.3, Stream: true}},
		{"ten characters of multibyte", `{"messages":[{"role":"user","content":"ééééééééé€"}]}`,
			InferenceRequest{Messages: []Message{{Role: "user", Content: "ééééééééé€"}}, ModelType: "qwen", Temperature: 0.3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := v.Parse([]byte(tt.body))
			if err != nil {
				t.Fatalf("unexpected error %v", mustJSON(err))
			}
			if mustJSON(got) != mustJSON(tt.want) {
				t.Fatalf("got %s\nwant %s", mustJSON(got), mustJSON(tt.want))
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	v := testValidator()
	tests := []struct {
		name string
		body string
		want []string // "type@loc" of every expected error, in order
	}{
		{"empty body", ``, []string{"missing@body"}},
		{"not an object", `[1,2]`, []string{"model_attributes_type@body"}},
		{"malformed", `{"messages":`, []string{"json_invalid@body.12"}},
		{"missing messages", `{}`, []string{"missing@body.messages"}},
		{"messages not list", `{"messages":"hi"}`, []string{"list_type@body.messages"}},
		{"messages null", `{"messages":null}`, []string{"list_type@body.messages"}},
		{"empty messages", `{"messages":[]}`, []string{"too_short@body.messages"}},
		{"too many messages", `{"messages":[{"role":"user","content":"a"},{"role":"user","content":"a"},{"role":"user","content":"a"},{"role":"user","content":"a"}]}`, []string{"too_long@body.messages"}},
		{"message not object", `{"messages":[1]}`, []string{"model_attributes_type@body.messages.0"}},
		{"bad role and missing content", `{"messages":[{"role":"robot"}]}`, []string{"literal_error@body.messages.0.role", "missing@body.messages.0.content"}},
		{"content not string", `{"messages":[{"role":"user","content":5}]}`, []string{"string_type@body.messages.0.content"}},
		{"content too long", `{"messages":[{"role":"user","content":"12345678901"}]}`, []string{"string_too_long@body.messages.0.content"}},
		{"unknown model", `{"messages":[{"role":"user","content":"x"}],"model_type":"llama"}`, []string{"literal_error@body.model_type"}},
		{"null model", `{"messages":[{"role":"user","content":"x"}],"model_type":null}`, []string{"string_type@body.model_type"}},
		{"temperature high", `{"messages":[{"role":"user","content":"x"}],"temperature":2.01}`, []string{"less_than_equal@body.temperature"}},
		{"temperature negative", `{"messages":[{"role":"user","content":"x"}],"temperature":-0.1}`, []string{"greater_than_equal@body.temperature"}},
		{"temperature string", `{"messages":[{"role":"user","content":"x"}],"temperature":"hot"}`, []string{"float_type@body.temperature"}},
		{"stream bad", `{"messages":[{"role":"user","content":"x"}],"stream":"maybe"}`, []string{"bool_type@body.stream"}},
		{"system message number", `{"messages":[{"role":"user","content":"x"}],"system_message":7}`, []string{"string_type@body.system_message"}},
		// A body that names a member twice is refused, not resolved: the
		// loc names the member.
		{"repeated member", `{"messages":[{"role":"user","content":"x"}],"model_type":"qwen","model_type":"gemma"}`, []string{"json_invalid@body.model_type"}},
		{"repeated member of a message", `{"messages":[{"role":"user","content":"x","role":"system"}]}`, []string{"json_invalid@body.messages.0.role"}},
		{"invalid UTF-8", "{\"messages\":[{\"role\":\"user\",\"content\":\"\xff\"}]}", []string{"json_invalid@body.39"}},
		{"unpaired surrogate", `{"messages":[{"role":"user","content":"\udc00"}]}`, []string{"json_invalid@body.39"}},
		{"names are case-sensitive", `{"Messages":[{"role":"user","content":"x"}]}`, []string{"missing@body.messages"}},
		{"several at once", `{"messages":[],"temperature":9,"model_type":"x"}`, []string{"too_short@body.messages", "literal_error@body.model_type", "less_than_equal@body.temperature"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := v.Parse([]byte(tt.body))
			if err == nil {
				t.Fatal("expected an error")
			}
			if err.Status != http.StatusUnprocessableEntity {
				t.Fatalf("status %d", err.Status)
			}
			fes := err.Detail.([]FieldError)
			var got []string
			for _, fe := range fes {
				parts := make([]string, len(fe.Loc))
				for i, l := range fe.Loc {
					parts[i] = strings.Trim(mustJSON(l), `"`)
				}
				got = append(got, fe.Type+"@"+strings.Join(parts, "."))
				if fe.Msg == "" {
					t.Errorf("%s has no msg", fe.Type)
				}
			}
			if strings.Join(got, ",") != strings.Join(tt.want, ",") {
				t.Fatalf("got %v want %v", got, tt.want)
			}
		})
	}
}

func TestLiteralMessage(t *testing.T) {
	_, err := testValidator().Parse([]byte(`{"messages":[{"role":"user","content":"x"}],"model_type":"llama"}`))
	fe := err.Detail.([]FieldError)[0]
	if fe.Msg != "Input should be 'qwen' or 'gemma'" || fe.Input != "llama" {
		t.Fatalf("got %+v", fe)
	}
	_, err = testValidator().Parse([]byte(`{"messages":[{"role":"x","content":"x"}]}`))
	if got := err.Detail.([]FieldError)[0].Msg; got != "Input should be 'system', 'user' or 'assistant'" {
		t.Fatalf("got %q", got)
	}
}

func TestReadRequest(t *testing.T) {
	v := testValidator()
	tests := []struct {
		name, ct, body string
		status         int
	}{
		{"json", "application/json", `{"messages":[{"role":"user","content":"x"}]}`, 0},
		{"json with charset", "application/json; charset=utf-8", `{"messages":[{"role":"user","content":"x"}]}`, 0},
		{"no content type", "", `{"messages":[{"role":"user","content":"x"}]}`, 0},
		{"form", "application/x-www-form-urlencoded", `a=b`, 422},
		{"too large", "application/json", `{"messages":[{"role":"user","content":"` + strings.Repeat("x", 3000) + `"}]}`, 413},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest("POST", "/", strings.NewReader(tt.body))
			if tt.ct != "" {
				r.Header.Set("Content-Type", tt.ct)
			}
			_, _, err := v.ReadRequest(r)
			status := 0
			if err != nil {
				status = err.Status
			}
			if status != tt.status {
				t.Fatalf("status %d want %d (%v)", status, tt.status, err)
			}
		})
	}
}

func TestErrorJSON(t *testing.T) {
	e := &Error{Status: 401, Detail: "Incorrect username or password", Extra: map[string]string{"error": "invalid_grant"}}
	w := httptest.NewRecorder()
	e.WithHeader("WWW-Authenticate", "Bearer").Write(w)
	if w.Code != 401 || w.Header().Get("WWW-Authenticate") != "Bearer" || w.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("bad response %d %v", w.Code, w.Header())
	}
	var m map[string]string
	if err := json.Unmarshal(w.Body.Bytes(), &m); err != nil || m["detail"] != "Incorrect username or password" || m["error"] != "invalid_grant" {
		t.Fatalf("body %s", w.Body)
	}
}

func ptr[T any](v T) *T { return &v }

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}
