package gateway

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/backends/pool"
	"github.com/llmedge/llmedge/backends/protocols"
	"github.com/llmedge/llmedge/routing"
)

// script is what a fake replica does for one attempt.
type script struct {
	deltas []string
	delay  time.Duration // before each delta
	err    error         // returned after the deltas
	// noUsage: the replica reports no usage.
	noUsage bool
	// hangAfter, when > 0, stops the script after that many deltas until
	// the caller gives up (a replica that stalls mid-answer).
	hangAfter int
	// again, when set, is what the replica plays from its second call on
	// (a replica restarted meanwhile); every call plays it once more.
	again *script
}

// fakeBackend plays one script per replica URL and records the requests.
type fakeBackend struct {
	mu      sync.Mutex
	scripts map[string]script
	calls   []string
	last    *protocols.Request
	// continued records each call's Request.Continue.
	continued []string
	// played counts the calls per replica, for script.again.
	played map[string]int
}

func (f *fakeBackend) Chat(ctx context.Context, _ *http.Client, req *protocols.Request, onDelta protocols.DeltaFunc) (*protocols.Result, error) {
	f.mu.Lock()
	f.calls = append(f.calls, req.BaseURL)
	f.last = req
	f.continued = append(f.continued, req.Continue)
	s := f.scripts[req.BaseURL]
	if f.played == nil {
		f.played = map[string]int{}
	}
	if f.played[req.BaseURL]++; f.played[req.BaseURL] > 1 && s.again != nil {
		s = *s.again
	}
	f.mu.Unlock()
	res := &protocols.Result{Sent: time.Now()}
	for i, d := range s.deltas {
		if s.hangAfter > 0 && i == s.hangAfter {
			<-ctx.Done()
			return nil, ctx.Err()
		}
		select {
		case <-time.After(s.delay):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if onDelta == nil {
			res.Content += d // a non-streamed call: the text comes whole
			continue
		}
		if err := onDelta(&protocols.Delta{Text: d, Token: true}); err != nil {
			return nil, err
		}
	}
	if s.delay > 0 && len(s.deltas) == 0 {
		select {
		case <-time.After(s.delay):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if s.err != nil {
		if be, ok := s.err.(*protocols.Error); ok {
			cp := *be
			cp.Started = len(s.deltas) > 0
			return nil, &cp
		}
		return nil, s.err
	}
	if !s.noUsage {
		res.Usage = api.Usage{PromptTokens: 3, CompletionTokens: len(s.deltas), TotalTokens: 3 + len(s.deltas)}
		res.UsageKnown = true
	}
	res.Done = time.Now()
	res.FirstByte = res.Done
	return res, nil
}

func newTestGateway(t *testing.T, scripts map[string]script, urls ...string) (*Gateway, *fakeBackend) {
	t.Helper()
	return newTestGatewayOpts(t, pool.Options{}, scripts, urls...)
}

// newTestGatewayOpts is newTestGateway with pool options. Each test's pool
// has its own name, so breakers (shared by model and URL) do not leak
// between tests.
// testPool is a pool named name of replicas at urls, closed when t ends.
func testPool(t *testing.T, name string, policy pool.Policy, o pool.Options, urls ...string) *pool.Pool {
	t.Helper()
	p := pool.NewWithOptions(name, policy, o)
	t.Cleanup(p.Close)
	var rs []*pool.Replica
	for _, u := range urls {
		r, err := pool.NewReplica(u)
		if err != nil {
			t.Fatal(err)
		}
		rs = append(rs, r)
	}
	p.Set(rs)
	return p
}

func newTestGatewayOpts(t *testing.T, o pool.Options, scripts map[string]script, urls ...string) (*Gateway, *fakeBackend) {
	t.Helper()
	fb := &fakeBackend{scripts: scripts}
	p := testPool(t, t.Name(), &routing.RoundRobin{}, o, urls...)
	g := &Gateway{
		Models: map[string]*Model{"qwen": {
			Name: "qwen", Pool: p, Protocol: "fake", StreamUpstream: true, Policy: "round_robin",
			Protocols: map[string]protocols.Protocol{"fake": fb},
			Timeouts:  Timeouts{FirstToken: 300 * time.Millisecond, Idle: 300 * time.Millisecond, Total: 5 * time.Second},
		}},
		PingInterval: -1,
	}
	return g, fb
}

func serve(g *Gateway, req *api.InferenceRequest) *httptest.ResponseRecorder {
	return serveCtx(g, context.Background(), req)
}

// serveCtx runs the routing stage for req, as the pipeline does once the
// request is authorized.
func serveCtx(g *Gateway, ctx context.Context, req *api.InferenceRequest) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	r := httptest.NewRequest("POST", "/tasks/assistant_inference", nil).WithContext(ctx)
	ex := newExchange(w, r, testDoor{})
	ex.Stage, ex.Chat = StageAuthorized, req.Chat()
	g.Serve(w, r, ex)
	return w
}

func request(stream bool) *api.InferenceRequest {
	return &api.InferenceRequest{ModelType: "qwen", Temperature: 0.3, Stream: stream,
		Messages: []api.Message{{Role: "user", Content: "hi"}, {Role: "assistant", Content: "yo"}}}
}

var (
	errConnect = &protocols.Error{Kind: protocols.KindConnect, Message: "refused"}
	errServer  = &protocols.Error{Kind: protocols.KindServer, Status: 500, Message: "boom"}
	errBadReq  = &protocols.Error{Kind: protocols.KindBadRequest, Status: 400, Message: "context length exceeded"}
	errOver    = &protocols.Error{Kind: protocols.KindOverloaded, Status: 429, Message: "overloaded"}
)

func TestServeNonStreamed(t *testing.T) {
	tests := []struct {
		name    string
		scripts map[string]script
		status  int
		content string
		detail  string
		calls   int
	}{
		{"ok", map[string]script{"http://a:1": {deltas: []string{"Hel", "lo"}}}, 200, "Hello", "", 1},
		{"retry after connect error", map[string]script{"http://a:1": {err: errConnect}, "http://b:1": {deltas: []string{"ok"}}}, 200, "ok", "", 2},
		{"retry after mid-answer death", map[string]script{"http://a:1": {deltas: []string{"par"}, err: &protocols.Error{Kind: protocols.KindProtocol}}, "http://b:1": {deltas: []string{"whole"}}}, 200, "whole", "", 2},
		{"replica rejects request", map[string]script{"http://a:1": {err: errBadReq}, "http://b:1": {deltas: []string{"x"}}}, 422, "", "context length exceeded", 1},
		{"all fail", map[string]script{"http://a:1": {err: errServer}, "http://b:1": {err: errServer}}, 502, "", "failed", 2},
		{"all overloaded", map[string]script{"http://a:1": {err: errOver}, "http://b:1": {err: errOver}}, 429, "", "overloaded", 2},
		{"first token timeout", map[string]script{"http://a:1": {delay: time.Second}, "http://b:1": {delay: time.Second}}, 504, "", "in time", 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, fb := newTestGateway(t, tt.scripts, "http://a:1", "http://b:1")
			w := serve(g, request(false))
			if w.Code != tt.status {
				t.Fatalf("status %d: %s", w.Code, w.Body)
			}
			if len(fb.calls) != tt.calls {
				t.Fatalf("calls %v", fb.calls)
			}
			if got := w.Header().Get("Llmedge-Route"); got != "policy=round_robin; reason=round_robin" {
				t.Errorf("Llmedge-Route %q", got)
			}
			if tt.status == 200 {
				var resp api.InferenceResponse
				if err := json.Unmarshal(w.Body.Bytes(), &resp); err != nil {
					t.Fatal(err)
				}
				if resp.Content != tt.content || resp.MessageCount != 2 || resp.ModelType != "qwen" || resp.Usage.TotalTokens == 0 {
					t.Fatalf("response %+v", resp)
				}
				if !strings.Contains(w.Header().Get("Server-Timing"), "total;dur=") {
					t.Fatalf("Server-Timing %q", w.Header().Get("Server-Timing"))
				}
				return
			}
			if !strings.Contains(w.Body.String(), tt.detail) {
				t.Fatalf("body %s lacks %q", w.Body, tt.detail)
			}
		})
	}
}

func TestServeStreamed(t *testing.T) {
	t.Run("deltas then done", func(t *testing.T) {
		g, _ := newTestGateway(t, map[string]script{"http://a:1": {deltas: []string{"Hel", "lo"}}}, "http://a:1")
		w := serve(g, request(true))
		want := "data: {\"content\":\"Hel\"}\n\ndata: {\"content\":\"lo\"}\n\nevent: done\ndata: {\"content\":\"Hello\""
		if w.Code != 200 || !strings.HasPrefix(w.Body.String(), want) || w.Header().Get("Content-Type") != "text/event-stream" {
			t.Fatalf("%d %q", w.Code, w.Body)
		}
	})
	t.Run("no retry after the first byte", func(t *testing.T) {
		g, fb := newTestGateway(t, map[string]script{
			"http://a:1": {deltas: []string{"par"}, err: errServer},
			"http://b:1": {deltas: []string{"whole"}},
		}, "http://a:1", "http://b:1")
		w := serve(g, request(true))
		body := w.Body.String()
		if len(fb.calls) != 1 || !strings.HasSuffix(body, "event: error\ndata: {\"detail\":\"The replicas of model 'qwen' failed to answer (server error)\"}\n\n") {
			t.Fatalf("calls %v body %q", fb.calls, body)
		}
	})
	t.Run("retry before the first byte", func(t *testing.T) {
		g, fb := newTestGateway(t, map[string]script{"http://a:1": {err: errConnect}, "http://b:1": {deltas: []string{"ok"}}}, "http://a:1", "http://b:1")
		w := serve(g, request(true))
		if len(fb.calls) != 2 || !strings.HasPrefix(w.Body.String(), "data: {\"content\":\"ok\"}") {
			t.Fatalf("calls %v body %q", fb.calls, w.Body)
		}
	})
	t.Run("error before the first byte is plain HTTP", func(t *testing.T) {
		g, _ := newTestGateway(t, map[string]script{"http://a:1": {err: errServer}}, "http://a:1")
		w := serve(g, request(true))
		if w.Code != 502 || w.Header().Get("Content-Type") != "application/json" {
			t.Fatalf("%d %s", w.Code, w.Header().Get("Content-Type"))
		}
	})
	t.Run("idle timeout mid-stream", func(t *testing.T) {
		g, _ := newTestGateway(t, map[string]script{"http://a:1": {deltas: []string{"a", "b"}, delay: 200 * time.Millisecond}}, "http://a:1")
		g.Models["qwen"].Timeouts.Idle = 50 * time.Millisecond
		w := serve(g, request(true))
		if !strings.Contains(w.Body.String(), "event: error") || !strings.Contains(w.Body.String(), "did not answer in time") {
			t.Fatalf("%q", w.Body)
		}
	})
	t.Run("pings while waiting", func(t *testing.T) {
		g, _ := newTestGateway(t, map[string]script{"http://a:1": {deltas: []string{"x"}, delay: 250 * time.Millisecond}}, "http://a:1")
		g.PingInterval = 60 * time.Millisecond
		w := serve(g, request(true))
		if n := strings.Count(w.Body.String(), ": ping\n\n"); n < 2 || !strings.HasPrefix(w.Body.String(), ": ping\n\n") {
			t.Fatalf("%d pings: %q", n, w.Body)
		}
	})
}

func TestNoReplicasAndSaturation(t *testing.T) {
	g, _ := newTestGateway(t, nil)
	w := serve(g, request(false))
	if w.Code != 503 || w.Header().Get("Retry-After") == "" || !strings.Contains(w.Body.String(), "'qwen'") {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	g, _ = newTestGateway(t, nil, "http://a:1")
	r := g.Models["qwen"].Pool.Replicas()[0]
	r.MaxConcurrency = 1
	held, _ := g.Models["qwen"].Pool.Acquire(nil, nil)
	defer held.Release(pool.Success)
	w = serve(g, request(false))
	if w.Code != 429 || w.Header().Get("Retry-After") == "" {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
}

func TestClientCancelStopsAttempts(t *testing.T) {
	g, fb := newTestGateway(t, map[string]script{"http://a:1": {deltas: []string{"a"}, delay: time.Second}, "http://b:1": {deltas: []string{"b"}}}, "http://a:1", "http://b:1")
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	w := serveCtx(g, ctx, request(false))
	if len(fb.calls) != 1 || w.Body.Len() != 0 {
		t.Fatalf("calls %v body %q", fb.calls, w.Body)
	}
	for _, rep := range g.Models["qwen"].Pool.Replicas() {
		if rep.Outstanding() != 0 {
			t.Fatal("replica slot leaked")
		}
	}
}

func TestUpstreamMessages(t *testing.T) {
	sys := func(s string) *string { return &s }
	user := api.Message{Role: "user", Content: "u"}
	lead := api.Message{Role: "system", Content: "request's"}
	tests := []struct {
		name     string
		def      string
		msgs     []api.Message
		override *string
		want     string
	}{
		{"untouched", "", []api.Message{user}, nil, "user:u"},
		{"default added", "def", []api.Message{user}, nil, "system:def user:u"},
		{"request's system kept over default", "def", []api.Message{lead, user}, nil, "system:request's user:u"},
		{"system_message replaces leading", "def", []api.Message{lead, user}, sys("mine"), "system:mine user:u"},
		{"system_message added", "", []api.Message{user}, sys("mine"), "system:mine user:u"},
	}
	for _, tt := range tests {
		m := &Model{SystemMessage: tt.def}
		var parts []string
		for _, msg := range m.upstreamMessages(&api.Chat{Messages: tt.msgs, SystemMessage: tt.override}) {
			parts = append(parts, msg.Role+":"+msg.Content)
		}
		if got := strings.Join(parts, " "); got != tt.want {
			t.Errorf("%s: got %q want %q", tt.name, got, tt.want)
		}
	}
}

func TestReadinessCountsUsableReplicas(t *testing.T) {
	g, _ := newTestGateway(t, nil, "http://a:1", "http://b:1")
	reps := g.Models["qwen"].Pool.Replicas()
	reps[0].SetHealthy(false)
	ok, st := g.Readiness()
	if !ok || st["qwen"].Replicas != 2 || st["qwen"].Usable != 1 {
		t.Fatalf("one unhealthy: %v %+v", ok, st["qwen"])
	}
	reps[1].SetHealthy(false)
	ok, st = g.Readiness()
	if ok || st["qwen"].Usable != 0 || !strings.Contains(st["qwen"].Reason, "no usable replica") {
		t.Fatalf("none usable: %v %+v", ok, st["qwen"])
	}
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}
