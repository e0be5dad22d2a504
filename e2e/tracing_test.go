package e2e

import (
	"compress/gzip"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// Traces through to the replica: a gateway with Caddy's `tracing`
// directive exports its spans over OTLP/HTTP (configured, as Caddy's
// tracing is, by the standard OTEL_* environment) to a receiver in the
// test, which decodes the real protobufs; the replica reports the
// traceparent it received.

// otlpReceiver is an OTLP/HTTP trace endpoint that keeps what it gets.
type otlpReceiver struct {
	*httptest.Server
	mu       sync.Mutex
	spans    []*tracepb.Span
	resource []*commonpb.KeyValue
}

func startOTLPReceiver(t *testing.T) *otlpReceiver {
	t.Helper()
	rcv := &otlpReceiver{}
	rcv.Server = httptest.NewServer(http.HandlerFunc(rcv.export))
	t.Cleanup(rcv.Close)
	return rcv
}

func (rcv *otlpReceiver) export(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" {
		http.Error(w, "want POST /v1/traces, application/x-protobuf", http.StatusBadRequest)
		return
	}
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	b, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var req coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(b, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	rcv.mu.Lock()
	for _, rs := range req.GetResourceSpans() {
		rcv.resource = rs.GetResource().GetAttributes()
		for _, ss := range rs.GetScopeSpans() {
			rcv.spans = append(rcv.spans, ss.GetSpans()...)
		}
	}
	rcv.mu.Unlock()
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

// trace returns the spans received of traceID.
func (rcv *otlpReceiver) trace(traceID string) []*tracepb.Span {
	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	var out []*tracepb.Span
	for _, s := range rcv.spans {
		if hex.EncodeToString(s.GetTraceId()) == traceID {
			out = append(out, s)
		}
	}
	return out
}

func spanAttrs(s *tracepb.Span) map[string]*commonpb.AnyValue {
	out := map[string]*commonpb.AnyValue{}
	for _, kv := range s.GetAttributes() {
		out[kv.GetKey()] = kv.GetValue()
	}
	return out
}

func TestTracesToTheReplica(t *testing.T) {
	rcv := startOTLPReceiver(t)
	// The first replica answers 500 to everything, so that a request makes
	// two attempts: two replica calls in its trace.
	bad := startSim(t, "-error-rate", "1")
	good := startSim(t, "-tokens", "6", "-itl", "5ms")
	g := startGateway(t, GatewayConfig{
		Models: map[string]string{"qwen": staticModel(bad, good) + "\n\t\t\tlb_policy round_robin"},
		Site:   "tracing {\n\t\tspan llmedge\n\t}\n\tllm_gateway",
		Env: []string{
			"OTEL_EXPORTER_OTLP_ENDPOINT=" + rcv.URL,
			"OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf",
			"OTEL_TRACES_EXPORTER=otlp",
			"OTEL_SERVICE_NAME=llmedge-e2e",
			"OTEL_BSP_SCHEDULE_DELAY=100", // milliseconds: export soon after the request
		},
	})
	tok := g.Token(t, "demo", "demo", "")

	// The client's own trace: the gateway's spans continue it.
	const traceID, clientSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	const content = "trace-must-never-carry-this-prompt"
	req, _ := http.NewRequest("POST", g.Base+"/tasks/assistant_inference",
		strings.NewReader(fmt.Sprintf(`{"messages":[{"role":"user","content":%q}],"stream":true}`, content)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Traceparent", "00-"+traceID+"-"+clientSpan+"-01")
	resp, err := g.Client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	events := readEvents(t, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || events[len(events)-1].Name != "done" {
		t.Fatalf("status %d, events %+v", resp.StatusCode, events)
	}

	// The server span ends last; wait for it.
	byName := map[string][]*tracepb.Span{}
	waitFor(t, 30*time.Second, func() bool {
		clear(byName)
		for _, s := range rcv.trace(traceID) {
			byName[s.GetName()] = append(byName[s.GetName()], s)
		}
		return len(byName["llmedge"]) == 1
	})
	want := map[string]int{"llmedge": 1, "llmedge.auth": 1, "llmedge.validate": 1, "llmedge.route": 1,
		"llmedge.select": 2, "llmedge.replica": 2, "llmedge.first_token": 1}
	for name, n := range want {
		if len(byName[name]) != n {
			t.Errorf("%d %q spans, want %d", len(byName[name]), name, n)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	id := func(s *tracepb.Span) string { return hex.EncodeToString(s.GetSpanId()) }
	parentIs := func(s *tracepb.Span, parent string) {
		t.Helper()
		if got := hex.EncodeToString(s.GetParentSpanId()); got != parent {
			t.Errorf("span %s has parent %s, want %s", s.GetName(), got, parent)
		}
	}
	server, route := byName["llmedge"][0], byName["llmedge.route"][0]
	parentIs(server, clientSpan)
	if server.GetKind() != tracepb.Span_SPAN_KIND_SERVER {
		t.Errorf("Caddy's span is %v", server.GetKind())
	}
	for _, n := range []string{"llmedge.auth", "llmedge.validate", "llmedge.route"} {
		parentIs(byName[n][0], id(server))
	}
	for _, n := range []string{"llmedge.select", "llmedge.replica"} {
		for _, s := range byName[n] {
			parentIs(s, id(route))
		}
	}
	if a := spanAttrs(route); a["llmedge.model"].GetStringValue() != "qwen" || a["llmedge.attempts"].GetIntValue() != 2 ||
		a["http.response.status_code"].GetIntValue() != 200 || !a["llmedge.stream"].GetBoolValue() {
		t.Errorf("route span attributes %v", a)
	}

	// One replica call per attempt, each a client span naming the replica
	// and the policy's reason; the replica received that span's context.
	calls := map[int64]*tracepb.Span{}
	for _, s := range byName["llmedge.replica"] {
		calls[spanAttrs(s)["llmedge.attempt"].GetIntValue()] = s
	}
	for attempt, sim := range map[int64]*Sim{1: bad, 2: good} {
		s := calls[attempt]
		if s == nil {
			t.Fatalf("no span of attempt %d", attempt)
		}
		a := spanAttrs(s)
		if s.GetKind() != tracepb.Span_SPAN_KIND_CLIENT || a["llmedge.replica"].GetStringValue() != sim.URL ||
			a["llmedge.lb.reason"].GetStringValue() != "round_robin" || a["llmedge.model"].GetStringValue() != "qwen" {
			t.Errorf("attempt %d: %v %v", attempt, s.GetKind(), a)
		}
		if got, want := sim.Stats(t).LastRequest.Traceparent, "00-"+traceID+"-"+id(s)+"-01"; got != want {
			t.Errorf("replica of attempt %d received traceparent %q, want %q", attempt, got, want)
		}
	}
	if a := spanAttrs(calls[1]); calls[1].GetStatus().GetCode() != tracepb.Status_STATUS_CODE_ERROR ||
		a["llmedge.error.kind"].GetStringValue() != "server" || a["http.response.status_code"].GetIntValue() != 500 {
		t.Errorf("failed attempt: status %v, attributes %v", calls[1].GetStatus(), a)
	}
	parentIs(byName["llmedge.first_token"][0], id(calls[2]))

	// Neither content nor credentials in any attribute.
	for _, s := range rcv.trace(traceID) {
		for _, kv := range s.GetAttributes() {
			v := kv.GetValue().String()
			if strings.Contains(v, content) || strings.Contains(v, tok) {
				t.Errorf("span %s attribute %s leaks: %.60s", s.GetName(), kv.GetKey(), v)
			}
		}
	}
	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	var service string
	for _, kv := range rcv.resource {
		if kv.GetKey() == "service.name" {
			service = kv.GetValue().GetStringValue()
		}
	}
	if service != "llmedge-e2e" {
		t.Errorf("service.name %q, want the OTEL_SERVICE_NAME given", service)
	}
}
