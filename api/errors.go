package api

import (
	"encoding/json"
	"net/http"
	"strconv"
)

// FieldError is one entry of a FastAPI/pydantic validation error list:
// {"type":"missing","loc":["body","username"],"msg":"Field required","input":null}.
type FieldError struct {
	Type  string         `json:"type"`
	Loc   []any          `json:"loc"`
	Msg   string         `json:"msg"`
	Input any            `json:"input"`
	Ctx   map[string]any `json:"ctx,omitempty"`
}

// Error is an HTTP error answer in FastAPI's shape {"detail": ...}, with
// optional extra top-level fields (RFC 6749's "error" and
// "error_description") and headers (WWW-Authenticate, Retry-After).
type Error struct {
	Status int
	// Detail is a string or a []FieldError.
	Detail  any
	Extra   map[string]string
	Headers map[string]string
	// Code and Param are machine-readable hints for public APIs whose
	// errors carry them (OpenAI's "code" and "param"): what went wrong,
	// and which request field it is about. FastAPI's shape has no room
	// for them, so the native API leaves them out.
	Code, Param string

	// unread: answered before the request body was read to its end
	// (BodyUnread).
	unread bool
	// later: the refusal passes with time alone (Later).
	later bool
}

// Later marks e as a refusal that passes with time alone, the request
// unchanged (a rate limit's window, the limit store unreachable), unlike
// one that passes only when something changes (a budget's period, the
// request itself). A batch's line so refused is run again later rather
// than answered with it.
func (e *Error) Later() *Error {
	e.later = true
	return e
}

// PassesLater reports whether e was marked by Later.
func PassesLater(e *Error) bool { return e != nil && e.later }

func (e *Error) Error() string {
	if s, ok := e.Detail.(string); ok {
		return strconv.Itoa(e.Status) + ": " + s
	}
	if fe, ok := e.Detail.([]FieldError); ok && len(fe) > 0 {
		return strconv.Itoa(e.Status) + ": " + fe[0].Msg
	}
	return strconv.Itoa(e.Status) + ": " + http.StatusText(e.Status)
}

// NewError returns an Error with a plain-text detail.
func NewError(status int, detail string) *Error {
	return &Error{Status: status, Detail: detail}
}

// ValidationError returns the 422 answer listing errs.
func ValidationError(errs ...FieldError) *Error {
	return &Error{Status: http.StatusUnprocessableEntity, Detail: errs}
}

// WithHeader returns e with header k set to v.
func (e *Error) WithHeader(k, v string) *Error {
	if e.Headers == nil {
		e.Headers = map[string]string{}
	}
	e.Headers[k] = v
	return e
}

// EndLine returns b ended by a newline: b itself when it has one, else b
// with one appended (b must be the caller's own: append may write into
// its spare capacity).
func EndLine(b []byte) []byte {
	if len(b) > 0 && b[len(b)-1] == '\n' {
		return b
	}
	return append(b, '\n')
}

// MarshalJSON renders {"detail": ..., <extra>...}.
func (e *Error) MarshalJSON() ([]byte, error) {
	m := make(map[string]any, 1+len(e.Extra))
	for k, v := range e.Extra {
		m[k] = v
	}
	m["detail"] = e.Detail
	return json.Marshal(m)
}

// Write sends e as the response.
func (e *Error) Write(w http.ResponseWriter) {
	for k, v := range e.Headers {
		w.Header().Set(k, v)
	}
	WriteJSON(w, e.Status, e)
}

// WriteJSON writes v as a JSON response with the given status, ended by
// a newline as every JSON answer of the gateway is (a terminal, a shell
// pipeline and line-oriented tools read it whole).
func WriteJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b = []byte(`{"detail":"Internal Server Error"}`)
	}
	WriteBody(w, status, b)
}

// WriteBody writes b, a JSON document, as the answer with status, ended
// by a newline as WriteJSON's. Its headers go into the map as net/http
// keeps them, the type's value shared: Header.Set would build each key
// again and allocate each value, on every request.
func WriteBody(w http.ResponseWriter, status int, b []byte) {
	b = EndLine(b)
	h := w.Header()
	h["Content-Type"] = jsonType
	h["Content-Length"] = []string{strconv.Itoa(len(b))}
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// jsonType is the Content-Type of every JSON answer; net/http only reads
// it.
var jsonType = []string{"application/json"}
