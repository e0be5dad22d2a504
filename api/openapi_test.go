package api

import (
	"encoding/json"
	"testing"
)

func TestOpenAPIReflectsConfiguration(t *testing.T) {
	b, err := OpenAPI(&Validator{Models: []string{"llama", "mistral"}, DefaultModel: "mistral", Limits: Limits{MaxMessages: 7}})
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		OpenAPI    string `json:"openapi"`
		Components struct {
			Schemas struct {
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
}
