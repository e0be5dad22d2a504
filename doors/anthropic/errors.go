package anthropic

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/internal/jsonx"
)

// Anthropic's error types, by the status they come with. Its SDKs pick
// their error class from the status (BadRequestError, AuthenticationError,
// PermissionDeniedError, NotFoundError, RateLimitError, InternalServerError
// and its kinds) and expose the type.
const (
	typeInvalidRequest = "invalid_request_error"
	typeAuthentication = "authentication_error"
	typePermission     = "permission_error"
	typeNotFound       = "not_found_error"
	typeTooLarge       = "request_too_large"
	typeRateLimit      = "rate_limit_error"
	typeAPI            = "api_error"
	typeOverloaded     = "overloaded_error"
	typeTimeout        = "timeout_error"
)

// invalid is a 400 invalid_request_error with msg.
func invalid(msg string) *api.Error {
	return &api.Error{Status: http.StatusBadRequest, Detail: msg}
}

// describe maps an error of any stage to Anthropic's status and type. The
// shared stages speak FastAPI's statuses: a 422 (a replica's refusal of
// the request; this door's own validation answers 400) is Anthropic's 400.
func describe(e *api.Error) (status int, typ string) {
	status = e.Status
	switch status {
	case http.StatusBadRequest, http.StatusUnprocessableEntity:
		return http.StatusBadRequest, typeInvalidRequest
	case http.StatusUnauthorized:
		return status, typeAuthentication
	case http.StatusForbidden:
		return status, typePermission
	case http.StatusNotFound:
		return status, typeNotFound
	case http.StatusRequestEntityTooLarge:
		return status, typeTooLarge
	case http.StatusTooManyRequests:
		return status, typeRateLimit
	case http.StatusServiceUnavailable, 529:
		// No replica can take the request now: Anthropic's word for a
		// service that cannot serve for the moment.
		return status, typeOverloaded
	case http.StatusGatewayTimeout:
		return status, typeTimeout
	}
	if status >= 500 {
		return status, typeAPI
	}
	return status, typeInvalidRequest
}

// message is the error's text. The shared stages' details are strings; a
// pydantic list (a native validator placed before this door's route) is
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
			return strings.Join(where, ".") + ": " + d[0].Msg
		}
	}
	return http.StatusText(e.Status)
}

// appendError appends {"type":"error","error":{"type","message"},
// "request_id"}.
func appendError(b []byte, e *api.Error, typ, requestID string) []byte {
	b = append(b, `{"type":"error","error":{"type":`...)
	b = jsonx.String(b, typ)
	b = append(b, `,"message":`...)
	b = jsonx.String(b, message(e))
	b = append(b, `},"request_id":`...)
	if requestID == "" {
		b = append(b, "null"...)
	} else {
		b = jsonx.String(b, requestID)
	}
	return append(b, '}')
}

// writeError answers e in Anthropic's shape, with e's headers
// (WWW-Authenticate, Retry-After).
func writeError(w http.ResponseWriter, e *api.Error) {
	status, typ := describe(e)
	h := w.Header()
	for k, v := range e.Headers {
		h.Set(k, v)
	}
	body := append(appendError(make([]byte, 0, 256), e, typ, h.Get("Request-Id")), '\n')
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
