package api

import (
	"encoding/json"
	"testing"
)

func TestOpenAPIReflectsConfiguration(t *testing.T) {
	b, err := OpenAPI(&Validator{Models: []string{"llama", "mistral"}, DefaultModel: "mistral", Limits: Limits{MaxMessages: 7, MaxContentChars: 99}})
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		OpenAPI    string `json:"openapi"`
		Components struct {
			Schemas struct {
				ChatCompletionRequest struct {
					Properties struct {
						Model struct {
							Enum []string `json:"enum"`
						} `json:"model"`
						Messages struct {
							MaxItems int `json:"maxItems"`
						} `json:"messages"`
					} `json:"properties"`
				}
				ChatText struct {
					MaxLength int `json:"maxLength"`
				}
				InferenceRequest struct {
					Properties struct {
						ModelType struct {
							Enum    []string `json:"enum"`
							Default string   `json:"default"`
						} `json:"model_type"`
						Messages struct {
							MaxItems int `json:"maxItems"`
						} `json:"messages"`
					} `json:"properties"`
				}
			} `json:"schemas"`
			SecuritySchemes struct {
				OAuth2PasswordBearer struct {
					Flows struct {
						Password struct {
							Scopes map[string]string `json:"scopes"`
						} `json:"password"`
					} `json:"flows"`
				}
			} `json:"securitySchemes"`
		} `json:"components"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	mt := doc.Components.Schemas.InferenceRequest.Properties.ModelType
	scopes := doc.Components.SecuritySchemes.OAuth2PasswordBearer.Flows.Password.Scopes
	if doc.OpenAPI != "3.1.0" || len(mt.Enum) != 2 || mt.Enum[0] != "llama" || mt.Default != "mistral" ||
		doc.Components.Schemas.InferenceRequest.Properties.Messages.MaxItems != 7 || scopes["model:mistral"] == "" {
		t.Fatalf("document does not reflect the configuration: %s", b)
	}
	oa := doc.Components.Schemas.ChatCompletionRequest.Properties
	if len(oa.Model.Enum) != 2 || oa.Model.Enum[1] != "mistral" || oa.Messages.MaxItems != 7 || doc.Components.Schemas.ChatText.MaxLength != 99 {
		t.Fatalf("OpenAI's schemas do not reflect the configuration: %s", b)
	}
}

func TestWithoutPaths(t *testing.T) {
	full, err := OpenAPI(&Validator{Models: []string{"qwen"}, DefaultModel: "qwen"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := WithoutPaths(full, "/v1/")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Paths map[string]any `json:"paths"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Paths["/v1/chat/completions"] != nil || doc.Paths["/v1/models"] != nil || doc.Paths["/tasks/assistant_inference"] == nil {
		t.Fatalf("paths: %v", doc.Paths)
	}
	// OpenAI's door left out, Anthropic's kept: /v1/responses goes with
	// OpenAI's, /v1/messages stays.
	b, err = WithoutPaths(full, "/v1/", AnthropicPrefix)
	if err != nil {
		t.Fatal(err)
	}
	doc.Paths = nil
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Paths["/v1/responses"] != nil || doc.Paths["/v1/messages"] == nil || doc.Paths["/v1/messages/count_tokens"] == nil {
		t.Fatalf("paths: %v", doc.Paths)
	}
	if _, err := WithoutPaths([]byte("{"), "/v1/"); err == nil {
		t.Fatal("a broken document passed")
	}
}

// TestOpenAPIDoorsReflectConfiguration: the Responses and Anthropic
// schemas take the configured models and limits too, and every door's
// paths are described.
func TestOpenAPIDoorsReflectConfiguration(t *testing.T) {
	b, err := OpenAPI(&Validator{Models: []string{"llama", "mistral"}, DefaultModel: "mistral", Limits: Limits{MaxMessages: 7, MaxContentChars: 99}})
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Paths      map[string]any `json:"paths"`
		Components struct {
			Schemas map[string]json.RawMessage `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/v1/responses", "/v1/messages", "/v1/messages/count_tokens"} {
		if doc.Paths[p] == nil {
			t.Errorf("%s is not described", p)
		}
	}
	type request struct {
		Properties struct {
			Model struct {
				Enum []string `json:"enum"`
			} `json:"model"`
			Messages struct {
				MaxItems int `json:"maxItems"`
			} `json:"messages"`
			Input struct {
				OneOf []struct {
					MaxItems int `json:"maxItems"`
				} `json:"oneOf"`
			} `json:"input"`
		} `json:"properties"`
	}
	for _, c := range []struct {
		schema   string
		maxItems func(r request) int
	}{
		{"ResponseRequest", func(r request) int { return r.Properties.Input.OneOf[1].MaxItems }},
		{"AnthropicMessagesRequest", func(r request) int { return r.Properties.Messages.MaxItems }},
		{"AnthropicCountTokensRequest", func(r request) int { return r.Properties.Messages.MaxItems }},
	} {
		var r request
		if err := json.Unmarshal(doc.Components.Schemas[c.schema], &r); err != nil {
			t.Fatalf("%s: %v", c.schema, err)
		}
		if e := r.Properties.Model.Enum; len(e) != 2 || e[0] != "llama" || e[1] != "mistral" || c.maxItems(r) != 7 {
			t.Errorf("%s does not reflect the configuration: %s", c.schema, doc.Components.Schemas[c.schema])
		}
	}
	var text struct {
		MaxLength int `json:"maxLength"`
	}
	if err := json.Unmarshal(doc.Components.Schemas["AnthropicText"], &text); err != nil || text.MaxLength != 99 {
		t.Errorf("AnthropicText: %s", doc.Components.Schemas["AnthropicText"])
	}
}

func TestDig(t *testing.T) {
	doc := map[string]any{"a": map[string]any{"b": []any{"x", map[string]any{"c": 1}}}}
	if m, err := dig(doc, "a", "b", "1"); err != nil || m["c"] != 1 {
		t.Fatalf("dig a.b.1: %v %v", m, err)
	}
	for _, path := range [][]string{{"a", "b", "0"}, {"a", "b", "2"}, {"a", "b", "x"}, {"a", "b", "0", "y"}, {"z"}} {
		if _, err := dig(doc, path...); err == nil {
			t.Errorf("dig %v: no error", path)
		}
	}
}
