package simulator

import (
	"cmp"
	"net/http"
	"strings"
	"unicode"
)

// apiError is an error answer in vLLM's ≥0.10.1 shape:
// {"error":{"message","type","param","code"}}.
type apiError struct {
	Status  int
	Message string
	// Type and Param, when set, replace the type named after the status
	// and the null param.
	Type  string
	Param *string
}

// badRequest is a 400 BadRequestError with msg.
func badRequest(msg string) *apiError {
	return &apiError{Status: http.StatusBadRequest, Message: msg}
}

func (e *apiError) Error() string { return e.Message }

type errorBody struct {
	Error errorInfo `json:"error"`
}

type errorInfo struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    int     `json:"code"`
}

// write sends e as the whole answer.
func (e *apiError) write(w http.ResponseWriter) {
	writeJSON(w, e.Status, errorBody{errorInfo{
		Message: e.Message,
		Type:    cmp.Or(e.Type, errorType(e.Status)),
		Param:   e.Param,
		Code:    e.Status,
	}})
}

// errorType names an HTTP status the way vLLM's error types read:
// 400 "BadRequestError", 404 "NotFoundError", 500 "InternalServerError",
// 503 "ServiceUnavailableError".
func errorType(status int) string {
	text := http.StatusText(status)
	if text == "" {
		return "Error"
	}
	var b strings.Builder
	for f := range strings.FieldsSeq(text) {
		first := true
		for _, r := range f {
			if !unicode.IsLetter(r) && !unicode.IsDigit(r) {
				continue
			}
			if first {
				r = unicode.ToUpper(r)
				first = false
			}
			b.WriteRune(r)
		}
	}
	name := b.String()
	if !strings.HasSuffix(name, "Error") {
		name += "Error"
	}
	return name
}

// writeUnauthorized answers 401 with vLLM's API-key rejection body.
func writeUnauthorized(w http.ResponseWriter) {
	writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "Unauthorized"})
}
