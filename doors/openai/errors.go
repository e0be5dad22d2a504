package openai

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/internal/jsonx"
)

// OpenAI's error types, as its API sends them: nearly every client error
// is an invalid_request_error (even a bad key), a rate limit is of type
// "requests", and a failure on the server's side a server_error. The
// SDKs pick their error class from the HTTP status; type, code and param
// are for the program that catches it.
const (
	typeInvalidRequest = "invalid_request_error"
	typeRateLimit      = "requests"
	typeServer         = "server_error"
)

// Codes for the errors this door raises itself; the shared stages' errors
// get theirs in describe.
const (
	codeMissing       = "missing_required_parameter"
	codeInvalidType   = "invalid_type"
	codeInvalidValue  = "invalid_value"
	codeUnknown       = "unknown_parameter"
	codeUnsupported   = "unsupported_parameter"
	codeUnsupportedV  = "unsupported_value"
	codeModelNotFound = "model_not_found"
	codeInvalidJSON   = "invalid_json"
	codeEmptyArray    = "empty_array"
	codeArrayTooLong  = "array_above_max_length"
	codeStringTooLong = "string_above_max_length"
	// codeDuplicate refuses a body that gives a parameter twice: which one
	// counts is up to each reader, so the gateway reads neither.
	codeDuplicate = "duplicate_parameter"
)

// invalid is a 400 about the request field param.
func invalid(code, param, msg string) *api.Error {
	return &api.Error{Status: http.StatusBadRequest, Detail: msg, Code: code, Param: param}
}

// modelNotFound is the 404 for a model this gateway does not serve (or,
// in the model list, one the credential may not use: OpenAI's API does
// not tell the two apart either).
func modelNotFound(model string) *api.Error {
	return &api.Error{Status: http.StatusNotFound, Code: codeModelNotFound, Param: "model",
		Detail: "The model '" + model + "' does not exist or you do not have access to it."}
}

// describe maps an error of any stage to OpenAI's status, type and code.
// The shared stages speak FastAPI's statuses: a 422 (here only a replica's
// refusal of the request: this door's own validation answers 400) becomes
// OpenAI's 400.
func describe(e *api.Error) (status int, typ, code string) {
	status, code = e.Status, e.Code
	if status == http.StatusUnprocessableEntity {
		status = http.StatusBadRequest
	}
	typ = typeInvalidRequest
	switch {
	case status == http.StatusTooManyRequests:
		typ = typeRateLimit
	case status >= 500:
		typ = typeServer
	}
	if code != "" {
		return status, typ, code
	}
	switch status {
	case http.StatusUnauthorized:
		code = "invalid_api_key"
	case http.StatusForbidden:
		code = "insufficient_scope"
	case http.StatusNotFound:
		code = "not_found"
	case http.StatusMethodNotAllowed:
		code = "method_not_allowed"
	case http.StatusRequestEntityTooLarge:
		code = "request_too_large"
	case http.StatusRequestHeaderFieldsTooLarge:
		code = "headers_too_large"
	case http.StatusTooManyRequests:
		code = "rate_limit_exceeded"
	case http.StatusBadGateway:
		code = "upstream_error"
	case http.StatusServiceUnavailable:
		code = "model_unavailable"
	case http.StatusGatewayTimeout:
		code = "upstream_timeout"
	default:
		if status >= 500 {
			code = "internal_error"
		}
	}
	return status, typ, code
}

// message is the error's text. The shared stages' details are strings; a
// pydantic list (a native validator placed before an OpenAI route) is
// rendered as its first entry.
func message(e *api.Error) string {
	switch d := e.Detail.(type) {
	case string:
		return d
	case []api.FieldError:
		if len(d) > 0 {
			var where []string
			for _, l := range d[0].Loc {
				switch v := l.(type) {
				case string:
					where = append(where, v)
				case int:
					where = append(where, strconv.Itoa(v))
				}
			}
			return d[0].Msg + " (" + strings.Join(where, ".") + ")"
		}
	}
	return http.StatusText(e.Status)
}

// appendError appends {"error":{"message","type","param","code"}}.
func appendError(b []byte, e *api.Error, typ, code string) []byte {
	b = append(b, `{"error":{"message":`...)
	b = jsonx.String(b, message(e))
	b = append(b, `,"type":`...)
	b = jsonx.String(b, typ)
	b = append(b, `,"param":`...)
	b = appendNullableString(b, e.Param)
	b = append(b, `,"code":`...)
	b = appendNullableString(b, code)
	return append(b, "}}"...)
}

// writeError answers e in OpenAI's shape, with e's headers
// (WWW-Authenticate, Retry-After).
func writeError(w http.ResponseWriter, e *api.Error) {
	status, typ, code := describe(e)
	h := w.Header()
	for k, v := range e.Headers {
		h.Set(k, v)
	}
	body := append(appendError(make([]byte, 0, 256), e, typ, code), '\n')
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
