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
	if _, err := WithoutPaths([]byte("{"), "/v1/"); err == nil {
		t.Fatal("a broken document passed")
	}
}
