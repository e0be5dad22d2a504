package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Limits bound what one inference request may carry.
type Limits struct {
	// MaxBodyBytes is the largest accepted body; larger bodies get 413.
	MaxBodyBytes int64 `json:"max_body_bytes,omitempty"`
	// MaxMessages is the longest accepted messages list.
	MaxMessages int `json:"max_messages,omitempty"`
	// MaxContentChars is the longest accepted content of one message, in
	// Unicode characters (as pydantic counts them).
	MaxContentChars int `json:"max_content_chars,omitempty"`
	// MaxHeaderBytes bounds a request's header fields (names and values);
	// larger ones get 431. The HTTP server's own limit (Caddy's
	// max_header_size, 1 MiB by default) stays above it: beyond that one
	// the server answers itself, in plain text.
	MaxHeaderBytes int `json:"max_header_bytes,omitempty"`
}

// Default limits (README, "The API").
const (
	DefaultMaxBodyBytes    = 1 << 20
	DefaultMaxMessages     = 256
	DefaultMaxContentChars = 100_000
	DefaultMaxHeaderBytes  = 16 << 10
	DefaultTemperature     = 0.3
	MaxTemperature         = 2.0
)

// WithDefaults returns l with zero fields set to the defaults.
func (l Limits) WithDefaults() Limits {
	if l.MaxBodyBytes <= 0 {
		l.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if l.MaxMessages <= 0 {
		l.MaxMessages = DefaultMaxMessages
	}
	if l.MaxContentChars <= 0 {
		l.MaxContentChars = DefaultMaxContentChars
	}
	if l.MaxHeaderBytes <= 0 {
		l.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	return l
}

// HeadersTooLarge returns the 431 answer when r's header fields (names,
// values and the request target) take more than limit bytes, and nil
// otherwise.
func HeadersTooLarge(r *http.Request, limit int) *Error {
	n := len(r.URL.RawQuery) + len(r.URL.Path)
	for k, vs := range r.Header {
		for _, v := range vs {
			n += len(k) + len(v) + 4 // ": " and CRLF
		}
	}
	if n <= limit {
		return nil
	}
	return NewError(http.StatusRequestHeaderFieldsTooLarge,
		fmt.Sprintf("Request header fields too large: the limit is %d bytes", limit))
}

// Validator turns request bodies into InferenceRequests, or into the
// FastAPI-shaped errors a client of the original service would expect.
type Validator struct {
	Limits Limits
	// Models lists the accepted model_type values, in the order the error
	// message names them.
	Models []string
	// DefaultModel is used when model_type is absent.
	DefaultModel string
}

var roles = []string{RoleSystem, RoleUser, RoleAssistant}

// ReadRequest reads and validates the body of r, and returns the body too.
// It enforces the body size limit itself, so r.Body need not be wrapped.
func (v *Validator) ReadRequest(r *http.Request) (*InferenceRequest, []byte, *Error) {
	if ct := r.Header.Get("Content-Type"); ct != "" && ct != "application/json" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || !(mt == "application/json" || strings.HasSuffix(mt, "+json")) {
			return nil, nil, ValidationError(FieldError{
				Type: "model_attributes_type", Loc: []any{"body"},
				Msg:   "Input should be a JSON object: Content-Type must be application/json",
				Input: ct,
			})
		}
	}
	body, err := ReadBody(r, v.Limits.WithDefaults().MaxBodyBytes)
	if err != nil {
		return nil, nil, err
	}
	req, err := v.Parse(body)
	return req, body, err
}

// ReadBody reads r's body, up to limit bytes: a longer one is a 413.
func ReadBody(r *http.Request, limit int64) ([]byte, *Error) {
	if r.ContentLength > limit {
		return nil, tooLarge(limit)
	}
	if n := r.ContentLength; n >= 0 && n <= 64<<10 {
		// The usual case: a known, small length, read into one exact buffer.
		body := make([]byte, n)
		if _, err := io.ReadFull(r.Body, body); err != nil {
			return nil, NewError(http.StatusBadRequest, "could not read the request body")
		}
		return body, nil
	}
	// Unknown or large: let the buffer grow rather than trust the header.
	buf := bytes.NewBuffer(make([]byte, 0, 512))
	if _, err := buf.ReadFrom(io.LimitReader(r.Body, limit+1)); err != nil {
		return nil, NewError(http.StatusBadRequest, "could not read the request body")
	}
	if int64(buf.Len()) > limit {
		return nil, tooLarge(limit)
	}
	return buf.Bytes(), nil
}

func tooLarge(limit int64) *Error {
	return NewError(http.StatusRequestEntityTooLarge,
		fmt.Sprintf("Request body too large: the limit is %d bytes", limit))
}

// rawRequest keeps each field raw so that a type error can name its field.
type rawRequest struct {
	Messages      json.RawMessage `json:"messages"`
	ModelType     json.RawMessage `json:"model_type"`
	Temperature   json.RawMessage `json:"temperature"`
	Stream        json.RawMessage `json:"stream"`
	SystemMessage json.RawMessage `json:"system_message"`
}

type rawMessage struct {
	Role    json.RawMessage `json:"role"`
	Content json.RawMessage `json:"content"`
}

// Parse validates a JSON body. All field errors are reported together, as
// pydantic does.
//
// A valid body, the usual case, is read in one typed pass (fastParse);
// anything that pass does not accept is read again field by field, which
// is slower but names every problem. FuzzParseFastAgrees holds the two
// to the same results.
func (v *Validator) Parse(body []byte) (*InferenceRequest, *Error) {
	if req := v.fastParse(body); req != nil {
		return req, nil
	}
	return v.parseFields(body)
}

// fastRequest is the shape of a valid body. Pointers tell a JSON null
// (nil) from a value; the optional scalars stay raw, so that a null (an
// error for them) is told from an absent field (the default).
type fastRequest struct {
	Messages      fastMessages    `json:"messages"`
	ModelType     json.RawMessage `json:"model_type"`
	Temperature   json.RawMessage `json:"temperature"`
	Stream        json.RawMessage `json:"stream"`
	SystemMessage *string         `json:"system_message"`
}

// fastMessages starts afresh at each "messages" key: encoding/json would
// decode a repeated key's array into the elements the first one left,
// keeping their fields, where the field pass (and every reader) takes the
// last array as it is.
type fastMessages []fastMessage

func (m *fastMessages) UnmarshalJSON(b []byte) error {
	var s []fastMessage
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	*m = s
	return nil
}

type fastMessage struct {
	Role    *string `json:"role"`
	Content *string `json:"content"`
}

// fastParse returns the request when body is valid as it stands, and nil
// when the field-by-field pass must judge it (errors, nulls, lax values).
func (v *Validator) fastParse(body []byte) *InferenceRequest {
	var f fastRequest
	if json.Unmarshal(body, &f) != nil {
		return nil
	}
	lim := v.Limits.WithDefaults()
	if len(f.Messages) == 0 || len(f.Messages) > lim.MaxMessages {
		return nil
	}
	req := &InferenceRequest{ModelType: v.DefaultModel, Temperature: DefaultTemperature, Messages: make([]Message, len(f.Messages))}
	for i, m := range f.Messages {
		if m.Role == nil || m.Content == nil || !slices.Contains(roles, *m.Role) ||
			utf8.RuneCountInString(*m.Content) > lim.MaxContentChars {
			return nil
		}
		req.Messages[i] = Message{Role: *m.Role, Content: *m.Content}
	}
	if f.ModelType != nil {
		// A configured name is plain text: quoted, without escapes.
		m := f.ModelType
		if len(m) < 2 || m[0] != '"' || m[len(m)-1] != '"' || bytes.IndexByte(m, '\\') >= 0 {
			return nil
		}
		i := slices.Index(v.Models, string(m[1:len(m)-1]))
		if i < 0 {
			return nil
		}
		req.ModelType = v.Models[i]
	}
	if f.Temperature != nil {
		t, err := strconv.ParseFloat(string(f.Temperature), 64)
		if err != nil || t < 0 || t > MaxTemperature {
			return nil
		}
		req.Temperature = t
	}
	switch string(f.Stream) {
	case "":
	case "true":
		req.Stream = true
	case "false":
	default:
		return nil
	}
	if f.SystemMessage != nil {
		if utf8.RuneCountInString(*f.SystemMessage) > lim.MaxContentChars {
			return nil
		}
		req.SystemMessage = f.SystemMessage
	}
	return req
}

// parseFields validates body field by field, collecting every error.
func (v *Validator) parseFields(body []byte) (*InferenceRequest, *Error) {
	lim := v.Limits.WithDefaults()
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, ValidationError(FieldError{Type: "missing", Loc: []any{"body"}, Msg: "Field required", Input: nil})
	}
	var raw rawRequest
	if err := json.Unmarshal(body, &raw); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field == "" {
			return nil, ValidationError(FieldError{
				Type: "model_attributes_type", Loc: []any{"body"},
				Msg:   "Input should be a valid dictionary or object to extract fields from",
				Input: jsonValue(body),
			})
		}
		return nil, ValidationError(jsonInvalid(err))
	}
	req := &InferenceRequest{ModelType: v.DefaultModel, Temperature: DefaultTemperature}
	var errs []FieldError

	if isAbsent(raw.Messages) {
		errs = append(errs, FieldError{Type: "missing", Loc: []any{"body", "messages"}, Msg: "Field required", Input: nil})
	} else {
		req.Messages, errs = parseMessages(raw.Messages, lim, errs)
	}
	if raw.ModelType != nil {
		s, ok := stringValue(raw.ModelType)
		switch {
		case !ok:
			errs = append(errs, typeError("string_type", "Input should be a valid string", raw.ModelType, "model_type"))
		case !slices.Contains(v.Models, s):
			errs = append(errs, literalError(v.Models, s, "model_type"))
		default:
			req.ModelType = s
		}
	}
	if raw.Temperature != nil {
		var t float64
		if err := json.Unmarshal(raw.Temperature, &t); err != nil || isNull(raw.Temperature) {
			errs = append(errs, typeError("float_type", "Input should be a valid number", raw.Temperature, "temperature"))
		} else if t < 0 {
			errs = append(errs, FieldError{Type: "greater_than_equal", Loc: []any{"body", "temperature"},
				Msg: "Input should be greater than or equal to 0", Input: t, Ctx: map[string]any{"ge": 0.0}})
		} else if t > MaxTemperature {
			errs = append(errs, FieldError{Type: "less_than_equal", Loc: []any{"body", "temperature"},
				Msg: "Input should be less than or equal to 2", Input: t, Ctx: map[string]any{"le": MaxTemperature}})
		} else {
			req.Temperature = t
		}
	}
	if raw.Stream != nil {
		b, ok := boolValue(raw.Stream)
		if !ok {
			errs = append(errs, typeError("bool_type", "Input should be a valid boolean", raw.Stream, "stream"))
		}
		req.Stream = b
	}
	if raw.SystemMessage != nil && !isNull(raw.SystemMessage) {
		s, ok := stringValue(raw.SystemMessage)
		switch {
		case !ok:
			errs = append(errs, typeError("string_type", "Input should be a valid string", raw.SystemMessage, "system_message"))
		case utf8.RuneCountInString(s) > lim.MaxContentChars:
			errs = append(errs, tooLong(s, lim.MaxContentChars, "system_message"))
		default:
			req.SystemMessage = &s
		}
	}
	if len(errs) > 0 {
		return nil, ValidationError(errs...)
	}
	return req, nil
}

func parseMessages(raw json.RawMessage, lim Limits, errs []FieldError) ([]Message, []FieldError) {
	var items []json.RawMessage
	if isNull(raw) || json.Unmarshal(raw, &items) != nil {
		return nil, append(errs, typeError("list_type", "Input should be a valid list", raw, "messages"))
	}
	if len(items) == 0 {
		return nil, append(errs, FieldError{Type: "too_short", Loc: []any{"body", "messages"},
			Msg: "List should have at least 1 item after validation, not 0", Input: []any{},
			Ctx: map[string]any{"field_type": "List", "min_length": 1, "actual_length": 0}})
	}
	if len(items) > lim.MaxMessages {
		return nil, append(errs, FieldError{Type: "too_long", Loc: []any{"body", "messages"},
			Msg:   fmt.Sprintf("List should have at most %d items after validation, not %d", lim.MaxMessages, len(items)),
			Input: fmt.Sprintf("[%d messages]", len(items)),
			Ctx:   map[string]any{"field_type": "List", "max_length": lim.MaxMessages, "actual_length": len(items)}})
	}
	msgs := make([]Message, len(items))
	for i, item := range items {
		var rm rawMessage
		if isNull(item) || json.Unmarshal(item, &rm) != nil {
			errs = append(errs, FieldError{Type: "model_attributes_type", Loc: []any{"body", "messages", i},
				Msg: "Input should be a valid dictionary or object to extract fields from", Input: jsonValue(item)})
			continue
		}
		if isAbsent(rm.Role) {
			errs = append(errs, FieldError{Type: "missing", Loc: []any{"body", "messages", i, "role"}, Msg: "Field required", Input: jsonValue(item)})
		} else if s, ok := stringValue(rm.Role); !ok {
			errs = append(errs, typeError("string_type", "Input should be a valid string", rm.Role, "messages", i, "role"))
		} else if !slices.Contains(roles, s) {
			errs = append(errs, literalError(roles, s, "messages", i, "role"))
		} else {
			msgs[i].Role = s
		}
		if isAbsent(rm.Content) {
			errs = append(errs, FieldError{Type: "missing", Loc: []any{"body", "messages", i, "content"}, Msg: "Field required", Input: jsonValue(item)})
		} else if s, ok := stringValue(rm.Content); !ok {
			errs = append(errs, typeError("string_type", "Input should be a valid string", rm.Content, "messages", i, "content"))
		} else if utf8.RuneCountInString(s) > lim.MaxContentChars {
			errs = append(errs, tooLong(s, lim.MaxContentChars, "messages", i, "content"))
		} else {
			msgs[i].Content = s
		}
	}
	return msgs, errs
}

func loc(path ...any) []any { return append([]any{"body"}, path...) }

func typeError(typ, msg string, raw json.RawMessage, path ...any) FieldError {
	return FieldError{Type: typ, Loc: loc(path...), Msg: msg, Input: jsonValue(raw)}
}

func tooLong(s string, max int, path ...any) FieldError {
	n := utf8.RuneCountInString(s)
	// The input is not echoed: it is large and the client has it.
	return FieldError{Type: "string_too_long", Loc: loc(path...),
		Msg:   fmt.Sprintf("String should have at most %d characters", max),
		Input: fmt.Sprintf("[%d characters]", n), Ctx: map[string]any{"max_length": max}}
}

func literalError(allowed []string, got string, path ...any) FieldError {
	exp := quoteList(allowed)
	return FieldError{Type: "literal_error", Loc: loc(path...), Msg: "Input should be " + exp,
		Input: got, Ctx: map[string]any{"expected": exp}}
}

// quoteList renders ["a","b","c"] as "'a', 'b' or 'c'", as pydantic does.
func quoteList(items []string) string {
	q := make([]string, len(items))
	for i, s := range items {
		q[i] = "'" + s + "'"
	}
	if len(q) <= 1 {
		return strings.Join(q, "")
	}
	return strings.Join(q[:len(q)-1], ", ") + " or " + q[len(q)-1]
}

func jsonInvalid(err error) FieldError {
	var pos any = 0
	var se *json.SyntaxError
	if errors.As(err, &se) {
		pos = se.Offset
	}
	return FieldError{Type: "json_invalid", Loc: []any{"body", pos}, Msg: "JSON decode error",
		Input: map[string]any{}, Ctx: map[string]any{"error": err.Error()}}
}

// isAbsent reports a field that was not sent (nil raw value).
func isAbsent(raw json.RawMessage) bool { return raw == nil }

func isNull(raw json.RawMessage) bool { return string(bytes.TrimSpace(raw)) == "null" }

func stringValue(raw json.RawMessage) (string, bool) {
	if len(raw) == 0 || raw[0] != '"' {
		return "", false
	}
	var s string
	return s, json.Unmarshal(raw, &s) == nil
}

// boolValue accepts what pydantic's lax mode accepts for a boolean.
func boolValue(raw json.RawMessage) (bool, bool) {
	switch string(raw) {
	case "true", "1":
		return true, true
	case "false", "0":
		return false, true
	}
	if s, ok := stringValue(raw); ok {
		switch strings.ToLower(s) {
		case "true", "t", "yes", "y", "on", "1":
			return true, true
		case "false", "f", "no", "n", "off", "0":
			return false, true
		}
	}
	return false, false
}

// jsonValue decodes raw for echoing as "input"; long strings are elided.
func jsonValue(raw json.RawMessage) any {
	if raw == nil {
		return nil
	}
	if len(raw) > 256 {
		return fmt.Sprintf("[%d bytes of JSON]", len(raw))
	}
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return string(raw)
	}
	return v
}
