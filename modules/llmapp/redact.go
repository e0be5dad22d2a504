package llmapp

import (
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"unsafe"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/llmedge/llmedge/auth"
)

// CredentialHeaders are the request headers that carry a credential the
// gateway accepts (Authorization: a token, an API key, a client's secret;
// X-Api-Key: Anthropic's clients' key or token), or that clients of other
// APIs send their key in (Api-Key, Azure OpenAI's; X-Goog-Api-Key,
// Gemini's): never written to a log, whatever the site's log
// configuration says, should_log_credentials included. An authenticator
// that reads another header says so (CredentialHeaderReader).
var CredentialHeaders = []string{"Authorization", "Proxy-Authorization", "X-Api-Key", "Api-Key", "X-Goog-Api-Key"}

// CredentialHeaderReader is implemented by an authenticator that takes a
// credential from headers of its own (a guest's X-Gateway-Token): they
// are redacted too.
type CredentialHeaderReader interface {
	CredentialHeaders() []string
}

// credentialHeaders are CredentialHeaders and those authns read.
func credentialHeaders(authns []auth.Authenticator) []string {
	out := slices.Clone(CredentialHeaders)
	for _, au := range authns {
		if r, ok := au.(CredentialHeaderReader); ok {
			for _, h := range r.CredentialHeaders() {
				if !isCredentialHeader(h, out) {
					out = append(out, h)
				}
			}
		}
	}
	return out
}

// redacted replaces a credential header's values in the logs.
const redacted = "REDACTED"

// redactServerLogs has the access and error loggers of the server
// whose routes are being provisioned (an llmedge handler's ctx) redact
// CredentialHeaders.
//
// Why not in the handler: Caddy 2.11's server clones the request for its
// access and error logs before the handler chain runs
// (caddyhttp.Server.ServeHTTP: zap.Object("request",
// LoggableHTTPRequest{Request: r.Clone(...)}), given to the loggers with
// WithLazy), so removing a header from r.Header changes nothing logged; and
// the clone's marshaler redacts only Authorization, Proxy-Authorization,
// Cookie and Set-Cookie. Nor in the logging config: a site's `log` has
// its own encoder, which an operator would have to wrap in `format
// filter`. The server's loggers are unexported, so they are replaced in
// place: once, while the routes are provisioned (before the server
// serves). A Caddy whose server lacks them fails the load, naming the
// cause, rather than logging keys.
func redactServerLogs(ctx caddy.Context, headers []string) error {
	srv, ok := ctx.Value(caddyhttp.ServerCtxKey).(*caddyhttp.Server)
	if !ok || srv == nil {
		return nil // not in a server's routes (an app, a test)
	}
	if len(headers) == 0 {
		headers = CredentialHeaders
	}
	return redactLoggers(srv, headers)
}

// serverLoggers are caddyhttp.Server's fields that log requests.
var serverLoggers = []string{"accessLogger", "errorLogger"}

func redactLoggers(srv *caddyhttp.Server, headers []string) error {
	v := reflect.ValueOf(srv).Elem()
	loggerType := reflect.TypeFor[*zap.Logger]()
	for _, name := range serverLoggers {
		f := v.FieldByName(name)
		if !f.IsValid() || f.Type() != loggerType {
			return fmt.Errorf("llmedge: this Caddy's HTTP server has no %s (*zap.Logger): "+
				"the access log could not be made to redact the credential headers", name)
		}
		p := (**zap.Logger)(unsafe.Pointer(f.UnsafeAddr()))
		if *p == nil {
			continue
		}
		if _, done := (*p).Core().(redactingCore); done {
			continue // another handler of the site's (one app: the same headers)
		}
		*p = (*p).WithOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core { return redactingCore{c, headers} }))
	}
	return nil
}

// redactingCore replaces the request Caddy's server gives its loggers
// (with With, lazily) by one that redacts CredentialHeaders. Check and
// Write are the wrapped core's, so that the logs' include and exclude
// rules (checked by the cores inside) still choose where entries go.
type redactingCore struct {
	zapcore.Core
	headers []string
}

// With implements zapcore.Core.
func (c redactingCore) With(fields []zapcore.Field) zapcore.Core {
	return redactingCore{c.Core.With(redactFields(fields, c.headers)), c.headers}
}

// redactFields returns fields with every logged request wrapped; fields
// itself when there is none (nothing allocated).
func redactFields(fields []zapcore.Field, headers []string) []zapcore.Field {
	out := fields
	for i, f := range fields {
		if f.Type != zapcore.ObjectMarshalerType {
			continue
		}
		req, ok := f.Interface.(caddyhttp.LoggableHTTPRequest)
		if !ok {
			continue
		}
		if &out[0] == &fields[0] {
			out = append([]zapcore.Field(nil), fields...)
		}
		out[i].Interface = redactedRequest{req, headers}
	}
	return out
}

// redactedRequest logs a request as Caddy does, with CredentialHeaders'
// values replaced.
type redactedRequest struct {
	caddyhttp.LoggableHTTPRequest
	headers []string
}

// MarshalLogObject implements zapcore.ObjectMarshaler. A request without
// a credential header is logged as it is.
func (r redactedRequest) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	if r.Request == nil || !hasCredentialHeader(r.Header, r.headers) {
		return r.LoggableHTTPRequest.MarshalLogObject(enc)
	}
	shallow := *r.Request
	shallow.Header = redactHeader(r.Header, r.headers)
	return caddyhttp.LoggableHTTPRequest{Request: &shallow, ShouldLogCredentials: r.ShouldLogCredentials}.MarshalLogObject(enc)
}

// isCredentialHeader reports whether name is one of headers, in any case
// (a header name a server did not canonicalise included).
func isCredentialHeader(name string, headers []string) bool {
	for _, c := range headers {
		if strings.EqualFold(name, c) {
			return true
		}
	}
	return false
}

// hasCredentialHeader reports whether h holds one of headers.
func hasCredentialHeader(h http.Header, headers []string) bool {
	for k := range h {
		if isCredentialHeader(k, headers) {
			return true
		}
	}
	return false
}

// redactHeader is a copy of h whose headers say REDACTED.
func redactHeader(h http.Header, headers []string) http.Header {
	out := make(http.Header, len(h))
	for k, v := range h {
		if isCredentialHeader(k, headers) {
			v = []string{redacted}
		}
		out[k] = v
	}
	return out
}
