package api

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// AnthropicPrefix starts the paths of Anthropic's door (doors/anthropic),
// described in the same document.
const AnthropicPrefix = "/v1/messages"

//go:embed openapi.json
var openAPITemplate []byte

// OpenAPI returns the OpenAPI 3.1 description of the public API as v
// configures it: its model types (the model_type and model enums and the
// token scopes) and its limits, for every door: the native API, OpenAI's
// (chat completions, completions, embeddings, responses) and Anthropic's
// (messages, count_tokens). v's limits are the doors' (the largest of any
// model's, when a model sets its own): the document gives the most any
// model takes.
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
		{schemas, []string{"ResponseRequest", "properties", "model"}, "enum", models},
		{schemas, []string{"ResponseRequest", "properties", "input", "oneOf", "1"}, "maxItems", lim.MaxMessages},
		// Anthropic's API under /v1/messages: the same models and limits.
		{schemas, []string{"AnthropicMessagesRequest", "properties", "model"}, "enum", models},
		{schemas, []string{"AnthropicMessagesRequest", "properties", "messages"}, "maxItems", lim.MaxMessages},
		{schemas, []string{"AnthropicCountTokensRequest", "properties", "model"}, "enum", models},
		{schemas, []string{"AnthropicCountTokensRequest", "properties", "messages"}, "maxItems", lim.MaxMessages},
		{schemas, []string{"AnthropicText"}, "maxLength", lim.MaxContentChars},
		{doc, []string{"components", "securitySchemes", "OAuth2PasswordBearer", "flows", "password"}, "scopes", scopes},
	}
	for _, s := range set {
		m, err := dig(s.obj, s.path...)
		if err != nil {
			return nil, err
		}
		m[s.key] = s.value
	}
	return json.Marshal(doc)
}

// dig is the object at path in m; a step into an array is the element's
// index.
func dig(m map[string]any, path ...string) (map[string]any, error) {
	var at any = m
	for _, p := range path {
		switch v := at.(type) {
		case map[string]any:
			at = v[p]
		case []any:
			i, err := strconv.Atoi(p)
			if err != nil || i < 0 || i >= len(v) {
				return nil, fmt.Errorf("openapi template: no element %q", p)
			}
			at = v[i]
		default:
			return nil, fmt.Errorf("openapi template: nothing to find %q in", p)
		}
	}
	obj, ok := at.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("openapi template: no object at %q", strings.Join(path, "."))
	}
	return obj, nil
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
