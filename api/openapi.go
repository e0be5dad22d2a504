package api

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

//go:embed openapi.json
var openAPITemplate []byte

// OpenAPI returns the OpenAPI 3.1 description of the public API as v
// configures it: its model types (the model_type and model enums and the
// token scopes) and its limits, for the native API and OpenAI's (chat
// completions, completions, embeddings).
func OpenAPI(v *Validator) ([]byte, error) {
	var doc map[string]any
	if err := json.Unmarshal(openAPITemplate, &doc); err != nil {
		return nil, fmt.Errorf("openapi template: %w", err)
	}
	lim := v.Limits.WithDefaults()
	schemas, err := dig(doc, "components", "schemas")
	if err != nil {
		return nil, err
	}
	props, err := dig(schemas, "InferenceRequest", "properties")
	if err != nil {
		return nil, err
	}
	models := make([]any, len(v.Models))
	scopes := map[string]any{}
	for i, m := range v.Models {
		models[i] = m
		scopes["model:"+m] = "Use the model type " + m
	}
	set := []struct {
		obj   map[string]any
		path  []string
		key   string
		value any
	}{
		{props, []string{"model_type"}, "enum", models},
		{props, []string{"model_type"}, "default", v.DefaultModel},
		{props, []string{"messages"}, "maxItems", lim.MaxMessages},
		{props, []string{"system_message"}, "maxLength", lim.MaxContentChars},
		{schemas, []string{"Message", "properties", "content"}, "maxLength", lim.MaxContentChars},
		// OpenAI's API under /v1: the same models and limits.
		{schemas, []string{"ChatCompletionRequest", "properties", "model"}, "enum", models},
		{schemas, []string{"ChatCompletionRequest", "properties", "messages"}, "maxItems", lim.MaxMessages},
		{schemas, []string{"ChatText"}, "maxLength", lim.MaxContentChars},
		{schemas, []string{"CompletionRequest", "properties", "model"}, "enum", models},
		{schemas, []string{"EmbeddingRequest", "properties", "model"}, "enum", models},
		{doc, []string{"components", "securitySchemes", "OAuth2PasswordBearer", "flows", "password"}, "scopes", scopes},
	}
	for _, s := range set {
		m, err := dig(s.obj, s.path...)
		if err != nil {
			return nil, err
		}
		m[s.key] = s.value
	}
	if err := addAnthropic(doc, models, lim); err != nil {
		return nil, err
	}
	return json.Marshal(doc)
}

func dig(m map[string]any, path ...string) (map[string]any, error) {
	for _, p := range path {
		next, ok := m[p].(map[string]any)
		if !ok {
			return nil, fmt.Errorf("openapi template: no object at %q", p)
		}
		m = next
	}
	return m, nil
}

// WithoutPaths returns the OpenAPI document doc without the paths that
// start with prefix, but those that start with one of keep, for a server
// that does not serve them (llm_gateway with OpenAI's API turned off).
func WithoutPaths(doc []byte, prefix string, keep ...string) ([]byte, error) {
	var d map[string]any
	if err := json.Unmarshal(doc, &d); err != nil {
		return nil, fmt.Errorf("openapi: %w", err)
	}
	paths, err := dig(d, "paths")
	if err != nil {
		return nil, err
	}
	for p := range paths {
		if strings.HasPrefix(p, prefix) && !slices.ContainsFunc(keep, func(k string) bool { return strings.HasPrefix(p, k) }) {
			delete(paths, p)
		}
	}
	return json.Marshal(d)
}
