package llmapp

import (
	"bytes"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"unsafe"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/auth"
)

// jsonLogger writes JSON lines to buf.
func jsonLogger(buf *bytes.Buffer) *zap.Logger {
	enc := zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig())
	return zap.New(zapcore.NewCore(enc, zapcore.AddSync(buf), zapcore.DebugLevel))
}

// serverLogger is the address of one of srv's unexported loggers.
func serverLogger(t *testing.T, srv *caddyhttp.Server, name string) **zap.Logger {
	t.Helper()
	f := reflect.ValueOf(srv).Elem().FieldByName(name)
	if !f.IsValid() {
		t.Fatalf("caddyhttp.Server has no %s", name)
	}
	return (**zap.Logger)(unsafe.Pointer(f.UnsafeAddr()))
}

// TestRedactServerLoggers: a server's access and error loggers, once
// wrapped, log requests as Caddy does but with every credential header
// redacted, whatever its case; other headers are kept; wrapping twice
// wraps once.
func TestRedactServerLoggers(t *testing.T) {
	const secret = "sk-secret-0123456789"
	cases := []struct {
		name   string
		header http.Header
		keep   []string // must appear
	}{
		{"x-api-key", http.Header{"X-Api-Key": {secret}, "Anthropic-Version": {"2023-06-01"}}, []string{`"Anthropic-Version":["2023-06-01"]`, `"X-Api-Key":["REDACTED"]`}},
		{"authorization", http.Header{"Authorization": {"Bearer " + secret}}, []string{`"Authorization":["REDACTED"]`}},
		{"api-key", http.Header{"Api-Key": {secret}}, []string{`"Api-Key":["REDACTED"]`}},
		{"goog", http.Header{"X-Goog-Api-Key": {secret}}, []string{`"X-Goog-Api-Key":["REDACTED"]`}},
		{"not canonical", http.Header{"x-api-key": {secret}}, []string{`"x-api-key":["REDACTED"]`}},
		{"proxy", http.Header{"Proxy-Authorization": {"Basic " + secret}}, []string{`"Proxy-Authorization":["REDACTED"]`}},
		{"none", http.Header{"Accept": {"*/*"}}, []string{`"Accept":["*/*"]`}},
		{"an authenticator's own", http.Header{"X-Gateway-Token": {secret}}, []string{`"X-Gateway-Token":["REDACTED"]`}},
	}
	headers := credentialHeaders([]auth.Authenticator{ownHeader{"X-Gateway-Token"}, ownHeader{"x-api-key"}})
	if len(headers) != len(CredentialHeaders)+1 {
		t.Fatalf("headers %v: want CredentialHeaders and X-Gateway-Token once", headers)
	}
	for _, logged := range serverLoggers {
		for _, tc := range cases {
			t.Run(logged+"/"+tc.name, func(t *testing.T) {
				var buf bytes.Buffer
				srv := new(caddyhttp.Server)
				p := serverLogger(t, srv, logged)
				*p = jsonLogger(&buf).Named("http.log.access")
				if err := redactLoggers(srv, headers); err != nil {
					t.Fatal(err)
				}
				if err := redactLoggers(srv, headers); err != nil { // a second handler of the site
					t.Fatal(err)
				}
				if _, ok := (*p).Core().(redactingCore); !ok {
					t.Fatalf("core %T", (*p).Core())
				}
				if _, twice := (*p).Core().(redactingCore).Core.(redactingCore); twice {
					t.Fatal("wrapped twice")
				}
				r, _ := http.NewRequest("POST", "https://gw.example/v1/messages", nil)
				r.Header = tc.header
				// As caddyhttp.Server logs: a clone given lazily; the
				// clear-text flag set, which must not bring the keys back.
				req := zap.Object("request", caddyhttp.LoggableHTTPRequest{Request: r.Clone(r.Context()), ShouldLogCredentials: true})
				(*p).WithLazy(req).Info("handled request", zap.Int("status", 200))
				out := buf.String()
				if strings.Contains(out, secret) {
					t.Fatalf("the secret was logged: %s", out)
				}
				for _, k := range tc.keep {
					if !strings.Contains(out, k) {
						t.Fatalf("want %s in %s", k, out)
					}
				}
				if !strings.Contains(out, `"uri":"/v1/messages"`) && !strings.Contains(out, `"method":"POST"`) {
					t.Fatalf("the request is not logged as Caddy logs it: %s", out)
				}
			})
		}
	}
}

// ownHeader is an authenticator that reads a header of its own.
type ownHeader struct{ name string }

func (o ownHeader) Authenticate(*http.Request) (*auth.Principal, *api.Error) { return nil, nil }
func (o ownHeader) CredentialHeaders() []string                              { return []string{o.name} }

// TestRedactServerLogsNilLoggers: a server without an access log (its
// logger nil) is left so; this Caddy's server has the loggers.
func TestRedactServerLogsNilLoggers(t *testing.T) {
	if err := redactLoggers(new(caddyhttp.Server), CredentialHeaders); err != nil {
		t.Fatal(err)
	}
}
