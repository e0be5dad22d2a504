package api

import (
	"bytes"
	"fmt"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/llmedge/llmedge/wire"
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

// Default limits (docs/configuration.md, "Limits for agents"). They fit
// what a coding agent sends with a 256k-token context: about 1 MiB of
// text at ~4 bytes a token (up to twice that as JSON, with escapes and
// each message's structure), tens to hundreds of KiB of tool schemas, and
// images as base64 (4/3 of the file; up to 5 MB each as Anthropic's API
// takes them): 32 MiB, the request size Anthropic's Messages API itself
// accepts. A message is at least ~32 tokens of template and content, so
// 256k tokens hold at most 8192 of them; one message's text is at most
// the whole context, ~1M characters.
const (
	DefaultMaxBodyBytes    = 32 << 20
	DefaultMaxMessages     = 8192
	DefaultMaxContentChars = 1 << 20
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
	// Aliases map the names in Models that are aliases to the models
	// they name (the pipeline resolves them once a door has read the
	// body); nil when there are none.
	Aliases map[string]string
	// DefaultModel is used when model_type is absent.
	DefaultModel string
	// Names, when set, accepts model names beyond Models that the gateway
	// resolves itself (a model's LoRA adapters); the name is kept as given.
	Names func(name string) bool
}

var roles = []string{RoleSystem, RoleUser, RoleAssistant}

// ReadRequest reads and validates the body of r, and returns the body too.
// It enforces the body size limit itself, so r.Body need not be wrapped.
func (v *Validator) ReadRequest(r *http.Request) (*InferenceRequest, []byte, *Error) {
	if err := contentType(r); err != nil {
		return nil, nil, err
	}
	body, err := ReadBody(r, v.Limits.WithDefaults().MaxBodyBytes)
	if err != nil {
		return nil, nil, err
	}
	req, err := v.Parse(body)
	return req, body, err
}

// ReadRequestLeased is ReadRequest with a large body read into a pooled
// buffer (ReadBodyLeased), which the request's messages point into: the
// caller holds its lease (nil for a small body) until the exchange is
// answered. A refused body's buffer goes back at once (an error keeps
// nothing of the body).
func (v *Validator) ReadRequestLeased(r *http.Request) (*InferenceRequest, []byte, *Lease, *Error) {
	if err := contentType(r); err != nil {
		return nil, nil, nil, err
	}
	body, l, err := ReadBodyLeased(r, v.Limits.WithDefaults().MaxBodyBytes)
	if err != nil {
		return nil, nil, nil, err
	}
	req, err := v.Parse(body)
	if err != nil {
		l.Release()
		return nil, nil, nil, err
	}
	return req, body, l, nil
}

// JSONType reports whether a request's Content-Type, ct, declares JSON:
// application/json (the usual one, told at once), a +json type, or none.
func JSONType(ct string) bool {
	if ct == "" || ct == "application/json" {
		return true
	}
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && (mt == "application/json" || strings.HasSuffix(mt, "+json"))
}

// contentType refuses a body declared as anything but JSON.
func contentType(r *http.Request) *Error {
	if ct := r.Header.Get("Content-Type"); !JSONType(ct) {
		return ValidationError(FieldError{
			Type: "model_attributes_type", Loc: []any{"body"},
			Msg:   "Input should be a JSON object: Content-Type must be application/json",
			Input: ct,
		})
	}
	return nil
}

// natives are reused between requests: reading a body then allocates
// only the strings kept.
var natives = sync.Pool{New: func() any { return new(wire.Native) }}

// Parse validates a JSON body, read by wire.ReadNative. All field errors
// are reported together, as pydantic does.
func (v *Validator) Parse(body []byte) (*InferenceRequest, *Error) {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, ValidationError(FieldError{Type: "missing", Loc: []any{"body"}, Msg: "Field required", Input: nil})
	}
	n := natives.Get().(*wire.Native)
	defer func() {
		// Keep the slices, not the body they point into.
		clear(n.Members)
		clear(n.Items)
		natives.Put(n)
	}()
	if err := wire.ReadNative(body, n); err != nil {
		return nil, ValidationError(jsonInvalid(err))
	}
	switch n.Body.Kind() {
	case wire.Object, wire.Null: // null reads as an object without members, as pydantic's model does
	default:
		return nil, ValidationError(FieldError{
			Type: "model_attributes_type", Loc: []any{"body"},
			Msg:   "Input should be a valid dictionary or object to extract fields from",
			Input: jsonValue(body),
		})
	}
	return v.validate(n)
}

// validate judges the members n holds.
func (v *Validator) validate(n *wire.Native) (*InferenceRequest, *Error) {
	lim := v.Limits.WithDefaults()
	req := &InferenceRequest{ModelType: v.DefaultModel, Temperature: DefaultTemperature}
	var errs []FieldError

	if n.Messages.IsAbsent() {
		errs = append(errs, FieldError{Type: "missing", Loc: []any{"body", "messages"}, Msg: "Field required", Input: nil})
	} else {
		req.Messages, errs = parseMessages(n, lim, errs)
	}
	if mt := n.ModelType; !mt.IsAbsent() {
		if m := v.model(mt); m != "" {
			req.ModelType = m
		} else if s, ok := mt.Str(); !ok {
			errs = append(errs, typeError("string_type", "Input should be a valid string", mt, "model_type"))
		} else {
			errs = append(errs, literalError(v.Models, s, "model_type"))
		}
	}
	if raw := n.Temperature; !raw.IsAbsent() {
		t, err := 0.0, error(nil)
		if raw.Kind() == wire.Number {
			t, err = strconv.ParseFloat(string(raw.Raw), 64)
		}
		if raw.Kind() != wire.Number || err != nil {
			errs = append(errs, typeError("float_type", "Input should be a valid number", raw, "temperature"))
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
	if raw := n.Stream; !raw.IsAbsent() {
		b, ok := boolValue(raw)
		if !ok {
			errs = append(errs, typeError("bool_type", "Input should be a valid boolean", raw, "stream"))
		}
		req.Stream = b
	}
	if raw := n.SystemMessage; raw.Given() {
		s, ok := raw.Str()
		switch {
		case !ok:
			errs = append(errs, typeError("string_type", "Input should be a valid string", raw, "system_message"))
		case tooManyChars(s, lim.MaxContentChars):
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

func parseMessages(n *wire.Native, lim Limits, errs []FieldError) ([]Message, []FieldError) {
	raw := n.Messages
	if raw.Kind() != wire.Array {
		return nil, append(errs, typeError("list_type", "Input should be a valid list", raw, "messages"))
	}
	items := n.Items
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
		if item.Kind() != wire.Object {
			errs = append(errs, FieldError{Type: "model_attributes_type", Loc: []any{"body", "messages", i},
				Msg: "Input should be a valid dictionary or object to extract fields from", Input: jsonValue(item.Raw)})
			continue
		}
		if item.Role.IsAbsent() {
			errs = append(errs, FieldError{Type: "missing", Loc: []any{"body", "messages", i, "role"}, Msg: "Field required", Input: jsonValue(item.Raw)})
		} else if r := role(item.Role); r != "" {
			msgs[i].Role = r
		} else if s, ok := item.Role.Str(); !ok {
			errs = append(errs, typeError("string_type", "Input should be a valid string", item.Role, "messages", i, "role"))
		} else {
			errs = append(errs, literalError(roles, s, "messages", i, "role"))
		}
		switch c := item.Content; {
		case c.IsAbsent():
			errs = append(errs, FieldError{Type: "missing", Loc: []any{"body", "messages", i, "content"}, Msg: "Field required", Input: jsonValue(item.Raw)})
		case c.Kind() != wire.String:
			errs = append(errs, typeError("string_type", "Input should be a valid string", c, "messages", i, "content"))
		case len(c.Raw)-2 > lim.MaxContentChars && tooManyChars(c.Text(), lim.MaxContentChars):
			// The quoted string's inside bounds its characters: only a
			// content that long is decoded, to count them.
			errs = append(errs, tooLong(c.Text(), lim.MaxContentChars, "messages", i, "content"))
		default:
			// Left as the client wrote it (api.Message.Quoted): the
			// replica's body splices these bytes, and routing and the
			// limits read them as they are; only a protocol that
			// translates the request decodes them.
			msgs[i].Quoted = c.Raw
		}
	}
	return msgs, errs
}

// model is the configured model mt names, "" when it names none.
func (v *Validator) model(mt wire.Value) string {
	for _, m := range v.Models {
		if mt.Is(m) {
			return m // the usual spelling, compared without a copy
		}
	}
	if s, ok := mt.Str(); ok {
		if i := slices.Index(v.Models, s); i >= 0 {
			return v.Models[i]
		}
		if v.Names != nil && v.Names(s) {
			return s
		}
	}
	return ""
}

// role is the role r names, "" when it names none.
func role(r wire.Value) string {
	for _, name := range roles {
		if r.Is(name) {
			return name // the usual spelling, without a copy
		}
	}
	if s, ok := r.Str(); ok && slices.Contains(roles, s) {
		return s
	}
	return ""
}

// tooManyChars reports whether s has more than max Unicode characters;
// counted only when its length in bytes allows it.
func tooManyChars(s string, max int) bool {
	return len(s) > max && utf8.RuneCountInString(s) > max
}

func loc(path ...any) []any { return append([]any{"body"}, path...) }

func typeError(typ, msg string, raw wire.Value, path ...any) FieldError {
	return FieldError{Type: typ, Loc: loc(path...), Msg: msg, Input: jsonValue(raw.Raw)}
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

// jsonInvalid is the 422 entry of a body the reader refuses: malformed
// JSON at an offset, as FastAPI reports it, or a member given twice,
// located by its path.
func jsonInvalid(err error) FieldError {
	we, ok := err.(*wire.Error)
	if !ok {
		we = &wire.Error{Err: err}
	}
	if we.Duplicate {
		name := wire.PathString(we.Path)
		return FieldError{Type: "json_invalid", Loc: loc(we.Path...),
			Msg:   "Duplicate member: '" + name + "' is given more than once",
			Input: map[string]any{}, Ctx: map[string]any{"error": we.Error()}}
	}
	return FieldError{Type: "json_invalid", Loc: []any{"body", we.Offset}, Msg: "JSON decode error",
		Input: map[string]any{}, Ctx: map[string]any{"error": we.Err.Error()}}
}

// boolValue accepts what pydantic's lax mode accepts for a boolean.
func boolValue(raw wire.Value) (bool, bool) {
	switch string(raw.Raw) {
	case "true", "1":
		return true, true
	case "false", "0":
		return false, true
	}
	if s, ok := raw.Str(); ok {
		switch strings.ToLower(s) {
		case "true", "t", "yes", "y", "on", "1":
			return true, true
		case "false", "f", "no", "n", "off", "0":
			return false, true
		}
	}
	return false, false
}

// jsonValue decodes raw for echoing as "input"; long values are elided.
func jsonValue(raw []byte) any {
	if raw == nil {
		return nil
	}
	if len(raw) > 256 {
		return fmt.Sprintf("[%d bytes of JSON]", len(raw))
	}
	v, err := wire.Value{Raw: raw}.Any()
	if err != nil {
		return string(raw)
	}
	return v
}
