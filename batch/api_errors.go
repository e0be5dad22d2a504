package batch

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"unicode/utf8"

	"go.uber.org/zap"
)

// Codes of the API's errors, as OpenAI's door names them.
const (
	codeMissing      = "missing_required_parameter"
	codeInvalidType  = "invalid_type"
	codeInvalidValue = "invalid_value"
	codeUnknown      = "unknown_parameter"
	codeUnsupported  = "unsupported_parameter"
	codeUnsupportedV = "unsupported_value"
	codeInvalidJSON  = "invalid_json"
	codeDuplicate    = "duplicate_parameter"
	codeTooLong      = "string_above_max_length"
	codeNotFound     = "not_found"
	codeTooLarge     = "request_too_large"
	codeContentType  = "unsupported_content_type"
	codeConflict     = "invalid_state"
	codeServer       = "internal_error"
)

// apiErr is an answer other than 2xx.
type apiErr struct {
	status           int
	code, param, msg string
}

func invalid(code, param, msg string) apiErr {
	return apiErr{status: http.StatusBadRequest, code: code, param: param, msg: msg}
}

func notFound(kind, id string) apiErr {
	return apiErr{status: http.StatusNotFound, code: codeNotFound, msg: "No such " + kind + " object: " + clip(id)}
}

// serverErr is what a Store's failure answers: nothing of its text.
var serverErr = apiErr{status: http.StatusInternalServerError, code: codeServer,
	msg: "The server had an error while processing your request."}

// errorWriter writes an error in the shape of the API that serves it.
type errorWriter interface {
	write(w http.ResponseWriter, e apiErr)
}

// openAIErrors are {"error":{"message","type","param","code"}}.
type openAIErrors struct{}

func (openAIErrors) write(w http.ResponseWriter, e apiErr) {
	typ := "invalid_request_error"
	if e.status >= 500 {
		typ = "server_error"
	}
	body := struct {
		Error struct {
			Message string  `json:"message"`
			Type    string  `json:"type"`
			Param   *string `json:"param"`
			Code    *string `json:"code"`
		} `json:"error"`
	}{}
	body.Error.Message, body.Error.Type = e.msg, typ
	body.Error.Param, body.Error.Code = nullable(e.param), nullable(e.code)
	writeJSON(w, e.status, body)
}

// adminErrors are Caddy's admin API's {"error": "..."}, which the CLI
// reads.
type adminErrors struct{}

func (adminErrors) write(w http.ResponseWriter, e apiErr) {
	writeJSON(w, e.status, map[string]string{"error": e.msg})
}

func (c *call) fail(e apiErr) { c.errs.write(c.w, e) }

// storeFailed answers a Store's error: a missing object as missing, a
// state that forbids the change as 409, anything else as a 500 logged
// without the request's content.
func (c *call) storeFailed(err error, kind, id string) {
	switch {
	case errors.Is(err, ErrNotFound):
		c.fail(notFound(kind, id))
	case errors.Is(err, ErrConflict):
		c.fail(apiErr{status: http.StatusConflict, code: codeConflict,
			msg: "The " + kind + " " + clip(id) + " is not in a state that allows this."})
	default:
		c.api.log.Error("batch store", zap.String("method", c.r.Method), zap.String("path", c.r.URL.Path), zap.Error(err))
		c.fail(serverErr)
	}
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// writeJSON answers v with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil { // the API's own types: cannot happen
		status, b = http.StatusInternalServerError, []byte(`{"error":{"message":"encoding the answer failed","type":"server_error","param":null,"code":"internal_error"}}`)
	}
	b = append(b, '\n')
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// clip shortens a value of the request quoted in an error, so that an
// answer stays small whatever was sent.
func clip(s string) string {
	const max = 80
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
