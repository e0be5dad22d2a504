package api

import "maps"

// This file describes Anthropic's door (doors/anthropic) in the OpenAPI
// document: POST /v1/messages and POST /v1/messages/count_tokens, their
// schemas, and the x-api-key credential. It is built in Go rather than
// kept in openapi.json so that the door's description stays in one place.

// AnthropicPrefix starts the paths of Anthropic's door.
const AnthropicPrefix = "/v1/messages"

// addAnthropic adds Anthropic's paths and schemas to doc, for models and
// the limits lim.
func addAnthropic(doc map[string]any, models []any, lim Limits) error {
	paths, err := dig(doc, "paths")
	if err != nil {
		return err
	}
	schemas, err := dig(doc, "components", "schemas")
	if err != nil {
		return err
	}
	schemes, err := dig(doc, "components", "securitySchemes")
	if err != nil {
		return err
	}
	if info, err := dig(doc, "info"); err == nil {
		if d, ok := info["description"].(string); ok {
			info["description"] = d + " Anthropic's Messages API is served too (POST /v1/messages, POST " +
				"/v1/messages/count_tokens) for Anthropic's SDKs: base URL https://<host>, API key = the bearer credential " +
				"(x-api-key or Authorization: Bearer); its errors follow Anthropic's shape {\"type\": \"error\", " +
				"\"error\": {\"type\", \"message\"}}."
		}
	}
	schemes["AnthropicAPIKey"] = obj{
		"type": "apiKey", "in": "header", "name": "x-api-key",
		"description": "The bearer credential (an access token or an API key) sent as Anthropic's SDKs send their key; " +
			"taken when no Authorization header is given. Authorization: Bearer <credential> works as well.",
	}

	str := obj{"type": "string"}
	textBlock := obj{"type": "object", "required": []any{"type", "text"}, "additionalProperties": true,
		"properties": obj{"type": obj{"const": "text"}, "text": obj{"type": "string", "maxLength": lim.MaxContentChars}}}
	props := obj{
		"model": obj{"type": "string", "enum": models, "description": "A model type of this gateway; another is 404 not_found_error."},
		"max_tokens": obj{"type": "integer", "minimum": 1, "maximum": 2147483647,
			"description": "The reply's cap; the model's own max_tokens lowers it."},
		"messages": obj{"type": "array", "minItems": 1, "maxItems": lim.MaxMessages,
			"items": ref("AnthropicMessageParam")},
		"system": obj{"oneOf": []any{obj{"type": "string", "maxLength": lim.MaxContentChars},
			obj{"type": "array", "items": textBlock}}},
		"stream":         obj{"type": "boolean"},
		"temperature":    obj{"type": "number", "minimum": 0, "maximum": 1},
		"top_p":          obj{"type": "number", "minimum": 0, "maximum": 1},
		"top_k":          obj{"type": "integer", "minimum": 0},
		"stop_sequences": obj{"type": "array", "maxItems": 32, "items": obj{"type": "string", "minLength": 1}},
		"metadata":       obj{"type": "object", "properties": obj{"user_id": str}},
		"tools": obj{"type": "array", "items": obj{"type": "object", "additionalProperties": true,
			"properties": obj{"name": str, "description": str, "input_schema": obj{"type": "object"}}}},
		"tool_choice": obj{"type": "object", "required": []any{"type"}, "additionalProperties": true,
			"properties": obj{"type": obj{"enum": []any{"auto", "any", "tool", "none"}}, "name": str,
				"disable_parallel_tool_use": obj{"type": "boolean"}}},
	}
	countProps := maps.Clone(props)
	delete(countProps, "stream")
	delete(countProps, "max_tokens")
	schemas["AnthropicMessagesRequest"] = obj{
		"type": "object", "required": []any{"model", "max_tokens", "messages"}, "additionalProperties": true,
		"description": "Anthropic's Messages request. Other members (thinking, service_tier, ...) reach replicas that " +
			"serve Anthropic's API as written; for replicas that do not, the request is translated to chat completions " +
			"and a member without an equivalent is refused (400, naming it).",
		"properties": props,
	}
	schemas["AnthropicCountTokensRequest"] = obj{
		"type": "object", "required": []any{"model", "messages"}, "additionalProperties": true, "properties": countProps,
	}
	schemas["AnthropicMessageParam"] = obj{
		"type": "object", "required": []any{"role", "content"}, "additionalProperties": true,
		"properties": obj{
			"role": obj{"enum": []any{"user", "assistant"}},
			"content": obj{"oneOf": []any{obj{"type": "string", "maxLength": lim.MaxContentChars},
				obj{"type": "array", "items": ref("AnthropicContentBlock")}}},
		},
	}
	schemas["AnthropicContentBlock"] = obj{
		"type": "object", "required": []any{"type"}, "additionalProperties": true,
		"description": "text {text}, image {source: {type: base64, media_type, data} | {type: url, url}}, " +
			"tool_use {id, name, input}, tool_result {tool_use_id, content, is_error}, thinking, and the API's other blocks.",
		"properties": obj{"type": str},
	}
	usage := obj{"type": "object", "required": []any{"input_tokens", "output_tokens"}, "additionalProperties": true,
		"properties": obj{"input_tokens": obj{"type": "integer"}, "output_tokens": obj{"type": "integer"}}}
	schemas["AnthropicMessage"] = obj{
		"type": "object", "required": []any{"id", "type", "role", "model", "content", "stop_reason", "usage"},
		"additionalProperties": true,
		"properties": obj{
			"id":            str,
			"type":          obj{"const": "message"},
			"role":          obj{"const": "assistant"},
			"model":         obj{"type": "string", "enum": models},
			"content":       obj{"type": "array", "items": ref("AnthropicContentBlock")},
			"stop_reason":   obj{"type": []any{"string", "null"}, "description": "end_turn, max_tokens, stop_sequence, tool_use, ..."},
			"stop_sequence": obj{"type": []any{"string", "null"}},
			"usage":         usage,
		},
	}
	schemas["AnthropicCountTokens"] = obj{"type": "object", "required": []any{"input_tokens"}, "additionalProperties": true,
		"properties": obj{"input_tokens": obj{"type": "integer"}}}
	schemas["AnthropicError"] = obj{
		"type": "object", "required": []any{"type", "error"},
		"properties": obj{
			"type": obj{"const": "error"},
			"error": obj{"type": "object", "required": []any{"type", "message"}, "properties": obj{
				"type": obj{"type": "string", "description": "invalid_request_error (400), authentication_error (401), " +
					"permission_error (403), not_found_error (404), request_too_large (413), rate_limit_error (429), " +
					"api_error (500, 502), overloaded_error (503), timeout_error (504)"},
				"message": str,
			}},
			"request_id": obj{"type": []any{"string", "null"}},
		},
	}

	errResp := func(desc string, headers ...string) obj {
		r := obj{"description": desc, "content": obj{"application/json": obj{"schema": ref("AnthropicError")}}}
		if len(headers) > 0 {
			h := obj{}
			for _, name := range headers {
				h[name] = obj{"$ref": "#/components/headers/" + name}
			}
			r["headers"] = h
		}
		return r
	}
	ids := obj{"request-id": obj{"schema": str, "description": "The request's ID (also X-Request-ID)"},
		"X-Request-ID": obj{"schema": str},
		"Server-Timing": obj{"schema": str,
			"description": "auth;dur=..., validate;dur=..., queue;dur=..., upstream;dur=..., total;dur=... (ms)"}}
	errorResponses := func() obj {
		return obj{
			"400": errResp("A field is invalid (invalid_request_error, the message names it), a member cannot be translated " +
				"for replicas without Anthropic's API, or the model refused the request"),
			"401": errResp("No credential, or a bad, expired or foreign one (authentication_error)", "WWW-Authenticate"),
			"403": errResp("The credential does not cover the model (permission_error)"),
			"404": errResp("The model is not one of this gateway's (not_found_error)"),
			"413": errResp("The body is larger than max_body_bytes (request_too_large)"),
			"429": errResp("A rate limit of the tenant, or every replica is busy (rate_limit_error)", "Retry-After"),
			"502": errResp("The replicas failed to answer (api_error)"),
			"503": errResp("No healthy replica (overloaded_error)", "Retry-After"),
			"504": errResp("The replica did not answer in time (timeout_error)"),
		}
	}
	security := []any{obj{"OAuth2PasswordBearer": []any{}}, obj{"AnthropicAPIKey": []any{}}}
	messages := errorResponses()
	messages["200"] = obj{
		"description": "The model's reply", "headers": ids,
		"content": obj{
			"application/json": obj{"schema": ref("AnthropicMessage")},
			"text/event-stream": obj{"schema": obj{"type": "string",
				"description": "Anthropic's named events: message_start, then per content block content_block_start, " +
					"content_block_delta (text_delta, input_json_delta, thinking_delta) and content_block_stop, then " +
					"message_delta (stop_reason, usage) and message_stop; ping events and `: ping` comments may come " +
					"between; a failure after the start is an error event carrying an AnthropicError."}},
		},
	}
	paths[AnthropicPrefix] = obj{"post": obj{
		"operationId": "createMessage",
		"summary":     "Anthropic-compatible message",
		"description": "Anthropic's Messages API, for Anthropic's SDKs and the tools built on them: base URL https://<host>, " +
			"API key = the bearer credential (x-api-key or Authorization: Bearer). anthropic-version is accepted " +
			"(a date); anthropic-beta is not passed on. Per model (its anthropic option) the body is carried " +
			"through to replicas that serve /v1/messages, with only the model's name, its default system prompt " +
			"and its reply cap edited, or translated to chat completions and the answer translated back " +
			"(docs/anthropic.md). Errors take Anthropic's shape.",
		"security":    security,
		"requestBody": obj{"required": true, "content": obj{"application/json": obj{"schema": ref("AnthropicMessagesRequest")}}},
		"responses":   messages,
	}}
	count := errorResponses()
	count["404"] = errResp("The model is not one of this gateway's, or its replicas do not count tokens (not_found_error)")
	count["200"] = obj{"description": "The prompt's tokens, as the replica counts them", "headers": ids,
		"content": obj{"application/json": obj{"schema": ref("AnthropicCountTokens")}}}
	paths[AnthropicPrefix+"/count_tokens"] = obj{"post": obj{
		"operationId": "countMessageTokens",
		"summary":     "Anthropic-compatible token count",
		"description": "Counts the tokens of a Messages request's prompt on a replica of the model that serves " +
			"/v1/messages/count_tokens, through the same authentication, model scope and limits as /v1/messages " +
			"(a request; no tokens are charged). 404 not_found_error when the model's replicas do not serve it.",
		"security":    security,
		"requestBody": obj{"required": true, "content": obj{"application/json": obj{"schema": ref("AnthropicCountTokensRequest")}}},
		"responses":   count,
	}}
	return nil
}

type obj = map[string]any

func ref(schema string) obj { return obj{"$ref": "#/components/schemas/" + schema} }
