package llmapp

import (
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"unsafe"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// CredentialHeaders are the request headers that carry a credential the
// gateway accepts (Authorization: a token, an API key, a client's secret;
// X-Api-Key: Anthropic's clients' key or token), or that clients of other
// APIs send their key in (Api-Key, Azure OpenAI's; X-Goog-Api-Key,
// Gemini's): never written to a log, whatever the site's log
// configuration says, should_log_credentials included.
var CredentialHeaders = []string{"Authorization", "Proxy-Authorization", "X-Api-Key", "Api-Key", "X-Goog-Api-Key"}

// redacted replaces a credential header's values in the logs.
const redacted = "REDACTED"

// redactServerLogs has the access, error and trace loggers of the server
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
func redactServerLogs(ctx caddy.Context) error {
	srv, ok := ctx.Value(caddyhttp.ServerCtxKey).(*caddyhttp.Server)
	if !ok || srv == nil {
		return nil // not in a server's routes (an app, a test)
	}
	return redactLoggers(srv)
}

// serverLoggers are caddyhttp.Server's fields that log requests.
var serverLoggers = []string{"accessLogger", "errorLogger"}

func redactLoggers(srv *caddyhttp.Server) error {
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
			continue
		}
		*p = (*p).WithOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core { return redactingCore{c} }))
	}
	return nil
}

// redactingCore replaces the request Caddy's server gives its loggers
// (with With, lazily) by one that redacts CredentialHeaders. Check and
// Write are the wrapped core's, so that the logs' include and exclude
// rules (checked by the cores inside) still choose where entries go.
type redactingCore struct{ zapcore.Core }

// With implements zapcore.Core.
func (c redactingCore) With(fields []zapcore.Field) zapcore.Core {
	return redactingCore{c.Core.With(redactFields(fields))}
}

// redactFields returns fields with every logged request wrapped; fields
// itself when there is none (nothing allocated).
func redactFields(fields []zapcore.Field) []zapcore.Field {
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
		out[i].Interface = redactedRequest{req}
	}
	return out
}

// redactedRequest logs a request as Caddy does, with CredentialHeaders'
// values replaced.
type redactedRequest struct{ caddyhttp.LoggableHTTPRequest }

// MarshalLogObject implements zapcore.ObjectMarshaler. A request without
// a credential header is logged as it is.
func (r redactedRequest) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	if r.Request == nil || !HasCredentialHeader(r.Header) {
		return r.LoggableHTTPRequest.MarshalLogObject(enc)
	}
	shallow := *r.Request
	shallow.Header = RedactHeader(r.Header)
	return caddyhttp.LoggableHTTPRequest{Request: &shallow, ShouldLogCredentials: r.ShouldLogCredentials}.MarshalLogObject(enc)
}

// IsCredentialHeader reports whether name is one of CredentialHeaders,
// in any case (a header name a server did not canonicalise included).
func IsCredentialHeader(name string) bool {
	for _, c := range CredentialHeaders {
		if strings.EqualFold(name, c) {
			return true
		}
	}
	return false
}

// HasCredentialHeader reports whether h holds one of CredentialHeaders.
func HasCredentialHeader(h http.Header) bool {
	for k := range h {
		if IsCredentialHeader(k) {
			return true
		}
	}
	return false
}

// RedactHeader is a copy of h whose CredentialHeaders say REDACTED.
func RedactHeader(h http.Header) http.Header {
	out := make(http.Header, len(h))
	for k, v := range h {
		if IsCredentialHeader(k) {
			v = []string{redacted}
		}
		out[k] = v
	}
	return out
}
