package gateway

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/auth"
	"github.com/llmedge/llmedge/backends/pool"
	"github.com/llmedge/llmedge/backends/protocols"
	"github.com/llmedge/llmedge/backends/protocols/openaicompat"
	"github.com/llmedge/llmedge/backends/protocols/protocoltest"
	"github.com/llmedge/llmedge/tenancy"
)

// headerTransport answers as a vLLM replica (see protocoltest.Replay), 500 for
// the host "bad", and records the traceparent each host received.
type headerTransport struct {
	replay *protocoltest.Replay
	mu     sync.Mutex
	got    map[string][]string // host → traceparent per request ("" when none)
}

func (t *headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	t.mu.Lock()
	t.got[r.URL.Hostname()] = append(t.got[r.URL.Hostname()], r.Header.Get("Traceparent"))
	t.mu.Unlock()
	if r.URL.Hostname() == "bad" {
		_, _ = io.Copy(io.Discard, r.Body)
		return &http.Response{StatusCode: 500, Header: http.Header{"Content-Type": {"application/json"}},
			Body: io.NopCloser(strings.NewReader(`{"object":"error","message":"boom"}`)), Request: r}, nil
	}
	return t.replay.RoundTrip(r)
}

// predicting is a policy that takes the first candidate and predicts a
// cached share, as prefix_cache does.
type predicting struct{}

func (predicting) Select(_ *pool.Request, c []*pool.Replica) pool.Choice {
	return pool.Choice{Replica: c[0], Reason: pool.ReasonPrefix, Cached: 0.75}
}

// traceEnv is a pipeline whose first replica fails (500) and whose second
// answers, so that a request makes two attempts.
type traceEnv struct {
	pipeline *Pipeline
	door     testDoor
	token    string
	replicas *headerTransport
}

const secretContent = "the-secret-prompt-text"

func newTraceEnv(t *testing.T) *traceEnv {
	t.Helper()
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	ring := auth.NewKeyRing(priv)
	tok, _, err := (&auth.Issuer{Keys: ring, Issuer: "llmedge", Audience: "llmedge", TTL: time.Hour}).Issue("demo", []string{"model:qwen"})
	if err != nil {
		t.Fatal(err)
	}
	p := pool.New(t.Name(), predicting{})
	t.Cleanup(p.Close)
	bad, _ := pool.NewReplica("http://bad:8000")
	good, _ := pool.NewReplica("http://user:pw@good:8000")
	p.Set([]*pool.Replica{bad, good})
	tr := &headerTransport{replay: protocoltest.NewReplay(4), got: map[string][]string{}}
	g := &Gateway{
		Models: map[string]*Model{"qwen": {Name: "qwen", Pool: p, Protocol: "openai",
			Protocols: map[string]protocols.Protocol{"openai": &openaicompat.Protocol{}}}},
		Client:       &http.Client{Transport: tr},
		PingInterval: -1,
	}
	verifier := &auth.Verifier{Keys: ring, Issuer: "llmedge", Audience: "llmedge"}
	return &traceEnv{
		pipeline: &Pipeline{Auth: &auth.BearerAuth{Verifier: verifier, Realm: "llmedge"}, Gateway: g},
		door:     testDoor{v: &api.Validator{Models: []string{"qwen"}, DefaultModel: "qwen"}},
		token:    tok, replicas: tr,
	}
}

func (e *traceEnv) serve(ctx context.Context, stream bool) *Exchange {
	body := fmt.Sprintf(`{"messages":[{"role":"user","content":%q}],"stream":%v}`, secretContent, stream)
	r := httptest.NewRequest("POST", testPath, strings.NewReader(body)).WithContext(ctx)
	r.Header.Set("Authorization", "Bearer "+e.token)
	return e.pipeline.Serve(httptest.NewRecorder(), r, e.door)
}

// withGlobalPropagator sets the W3C propagator for the test, as the
// llmedge app does.
func withGlobalPropagator(t *testing.T) {
	prev := otel.GetTextMapPropagator()
	otel.SetTextMapPropagator(propagation.TraceContext{})
	t.Cleanup(func() { otel.SetTextMapPropagator(prev) })
}

func TestTraceSpans(t *testing.T) {
	withGlobalPropagator(t)
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprint("stream=", stream), func(t *testing.T) {
			e := newTraceEnv(t)
			rec := tracetest.NewSpanRecorder()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
			ctx, server := tp.Tracer("caddy").Start(context.Background(), "handler", trace.WithSpanKind(trace.SpanKindServer))
			ex := e.serve(ctx, stream)
			server.End()
			if ex.Status != 200 || ex.Attempts != 2 {
				t.Fatalf("status %d after %d attempts, want 200 after 2", ex.Status, ex.Attempts)
			}

			spans := map[string][]sdktrace.ReadOnlySpan{}
			for _, s := range rec.Ended() {
				spans[s.Name()] = append(spans[s.Name()], s)
			}
			want := map[string]int{"handler": 1, SpanAuth: 1, SpanValidate: 1, SpanRoute: 1, SpanSelect: 2, SpanReplica: 2, SpanFirstToken: 1}
			for name, n := range want {
				if len(spans[name]) != n {
					t.Errorf("%d %s spans, want %d", len(spans[name]), name, n)
				}
			}
			if t.Failed() {
				t.FailNow()
			}
			root, route := spans["handler"][0], spans[SpanRoute][0]
			parentIs := func(s, parent sdktrace.ReadOnlySpan) {
				t.Helper()
				if s.Parent().SpanID() != parent.SpanContext().SpanID() || s.SpanContext().TraceID() != root.SpanContext().TraceID() {
					t.Errorf("%s is not a child of %s", s.Name(), parent.Name())
				}
			}
			parentIs(spans[SpanAuth][0], root)
			parentIs(spans[SpanValidate][0], root)
			parentIs(route, root)
			for _, name := range []string{SpanSelect, SpanReplica} {
				for _, s := range spans[name] {
					parentIs(s, route)
				}
			}

			calls := map[int]sdktrace.ReadOnlySpan{}
			for _, s := range spans[SpanReplica] {
				a := attrs(s)
				calls[int(a[AttrAttempt].AsInt64())] = s
				if s.SpanKind() != trace.SpanKindClient || a[AttrModel].AsString() != "qwen" ||
					a[AttrReason].AsString() != pool.ReasonPrefix || a[AttrCached].AsFloat64() != 0.75 {
					t.Errorf("replica call span %v: %v", s.SpanKind(), a)
				}
			}
			first, second := calls[1], calls[2]
			if a := attrs(first); a[AttrReplica].AsString() != "http://bad:8000" || a[AttrErrorKind].AsString() != "server" ||
				a[AttrStatus].AsInt64() != 500 || first.Status().Code.String() != "Error" {
				t.Errorf("first attempt: %v, status %v", a, first.Status())
			}
			// The replica's URL carries a password; the span must not.
			if a := attrs(second); a[AttrReplica].AsString() != "http://good:8000" || second.Status().Code.String() == "Error" {
				t.Errorf("second attempt: %v, status %v", a, second.Status())
			}
			parentIs(spans[SpanFirstToken][0], second)
			if a := attrs(route); a[AttrStatus].AsInt64() != 200 || a[AttrAttempts].AsInt64() != 2 || a[AttrStream].AsBool() != stream ||
				a[AttrInput].AsInt64() != 12 || a[AttrOutput].AsInt64() != 16 {
				t.Errorf("route span: %v", a)
			}

			// Each replica received the context of the span of its call.
			for host, span := range map[string]sdktrace.ReadOnlySpan{"bad": first, "good": second} {
				sc := span.SpanContext()
				want := fmt.Sprintf("00-%s-%s-01", sc.TraceID(), sc.SpanID())
				if got := e.replicas.got[host]; len(got) != 1 || got[0] != want {
					t.Errorf("%s received traceparent %q, want %q", host, got, want)
				}
			}

			// No attribute carries content or the credential.
			for _, s := range rec.Ended() {
				for _, kv := range s.Attributes() {
					v := kv.Value.Emit()
					if strings.Contains(v, secretContent) || strings.Contains(v, e.token) || strings.Contains(v, "pw") {
						t.Errorf("span %s attribute %s = %q leaks", s.Name(), kv.Key, v)
					}
				}
			}
		})
	}
}

func attrs(s sdktrace.ReadOnlySpan) map[attribute.Key]attribute.Value {
	out := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes() {
		out[kv.Key] = kv.Value
	}
	return out
}

// TestTraceOff: without a recording server span the request makes no span
// at all; a trace that was not sampled still reaches the replica (flags
// 00), so that the replica does not start a trace of its own.
func TestTraceOff(t *testing.T) {
	withGlobalPropagator(t)
	for _, tc := range []struct {
		name    string
		ctx     func(*sdktrace.TracerProvider) context.Context
		wantHdr func(trace.SpanContext) string
	}{
		{"no tracing", func(*sdktrace.TracerProvider) context.Context { return context.Background() },
			func(trace.SpanContext) string { return "" }},
		{"not sampled", func(tp *sdktrace.TracerProvider) context.Context {
			ctx, _ := tp.Tracer("caddy").Start(context.Background(), "handler")
			return ctx
		}, func(sc trace.SpanContext) string { return fmt.Sprintf("00-%s-%s-00", sc.TraceID(), sc.SpanID()) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newTraceEnv(t)
			rec := tracetest.NewSpanRecorder()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec), sdktrace.WithSampler(sdktrace.NeverSample()))
			ctx := tc.ctx(tp)
			ex := e.serve(ctx, false)
			if ex.Status != 200 || ex.tracer != nil {
				t.Fatalf("status %d, tracer %v", ex.Status, ex.tracer)
			}
			if n := len(rec.Ended()) + len(rec.Started()); n != 0 {
				t.Fatalf("%d spans recorded", n)
			}
			want := tc.wantHdr(trace.SpanContextFromContext(ctx))
			for host, got := range e.replicas.got {
				for _, h := range got {
					if h != want {
						t.Errorf("%s received traceparent %q, want %q", host, h, want)
					}
				}
			}
		})
	}
}

// refuseAll is an Admitter whose limits refuse everything.
type refuseAll struct{}

func (refuseAll) Admit(context.Context, *tenancy.Admission, http.Header) (tenancy.Ticket, *api.Error) {
	return nil, api.NewError(http.StatusTooManyRequests, "limit")
}

// TestTraceAdmission: a request refused by a tenant's limit has its
// admission span, with the status, and no routing span.
func TestTraceAdmission(t *testing.T) {
	e := newTraceEnv(t)
	e.pipeline.Admitter = refuseAll{}
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	ctx, server := tp.Tracer("caddy").Start(context.Background(), "handler")
	if ex := e.serve(ctx, false); ex.Status != http.StatusTooManyRequests {
		t.Fatalf("status %d", ex.Status)
	}
	server.End()
	var names []string
	for _, s := range rec.Ended() {
		names = append(names, s.Name())
		if s.Name() == SpanAdmit {
			if a := attrs(s); a[AttrStatus].AsInt64() != 429 {
				t.Errorf("admission span %v", a)
			}
		}
	}
	if got, want := strings.Join(names, " "), "llmedge.auth llmedge.validate llmedge.admit handler"; got != want {
		t.Errorf("spans %q, want %q", got, want)
	}
}
