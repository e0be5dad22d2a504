package gateway

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/backends/pool"
	"github.com/llmedge/llmedge/backends/protocols"
	"github.com/llmedge/llmedge/routing"
	"github.com/llmedge/llmedge/tenancy"
)

// modelsGateway serves qwen (aliases q and chat) and gemma through one
// fake backend, qwen with replicas qwenURLs and gemma one replica,
// qwen falling back to gemma.
func modelsGateway(t *testing.T, scripts map[string]script, qwenURLs ...string) (*Pipeline, *fakeBackend, *fakeAdmitter) {
	t.Helper()
	fb := &fakeBackend{scripts: scripts}
	mk := func(name string, urls ...string) *Model {
		p := testPool(t, t.Name()+"/"+name, &routing.RoundRobin{}, pool.Options{}, urls...)
		return &Model{Name: name, Pool: p, Protocol: "fake", StreamUpstream: true, Policy: "round_robin",
			Protocols: map[string]protocols.Protocol{"fake": fb},
			Timeouts:  Timeouts{FirstToken: 300 * time.Millisecond, Idle: 300 * time.Millisecond, Total: 5 * time.Second}}
	}
	qwen, gemma := mk("qwen", qwenURLs...), mk("gemma", "http://gemma:1")
	qwen.Aliases, qwen.Fallbacks = []string{"q", "chat"}, []string{"gemma"}
	g := &Gateway{Models: map[string]*Model{"qwen": qwen, "gemma": gemma},
		Aliases: map[string]string{"q": "qwen", "chat": "qwen"}, PingInterval: -1}
	adm := &fakeAdmitter{}
	return &Pipeline{Auth: scopedAuth{}, Realm: "llmedge", Gateway: g, Admitter: adm}, fb, adm
}

// modelsDoor reads native bodies, with the aliases among the names.
var modelsDoor = testDoor{v: &api.Validator{Models: []string{"qwen", "q", "chat", "gemma"}, DefaultModel: "qwen"}}

func post(p *Pipeline, scopes, model string, stream bool, header ...string) *httptest.ResponseRecorder {
	body := `{"model_type":"` + model + `","messages":[{"role":"user","content":"hi"}]`
	if stream {
		body += `,"stream":true`
	}
	r := httptest.NewRequest("POST", "/tasks/assistant_inference", strings.NewReader(body+"}"))
	r.Header.Set("Authorization", "Bearer ok:"+scopes)
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Set(header[i], header[i+1])
	}
	w := httptest.NewRecorder()
	p.Serve(w, r, modelsDoor)
	return w
}

func modelOf(t *testing.T, w *httptest.ResponseRecorder) string {
	t.Helper()
	var resp api.InferenceResponse
	if err := json.Unmarshal(w.Body.Bytes(), &resp); err != nil {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	return resp.ModelType
}

// TestAliases: an alias is its model for the scope, the limits and the
// routing; the answer gives the name the client used.
func TestAliases(t *testing.T) {
	ok := map[string]script{"http://qwen:1": {deltas: []string{"hi"}}, "http://gemma:1": {deltas: []string{"gem"}}}
	for _, tt := range []struct {
		name, scopes, model string
		status              int
		answered            string // the model field of the answer
		replica             string
	}{
		{"the model", "model:qwen", "qwen", 200, "qwen", "http://qwen:1"},
		{"an alias", "model:qwen", "q", 200, "q", "http://qwen:1"},
		{"another alias", "model:qwen", "chat", 200, "chat", "http://qwen:1"},
		{"an alias out of scope", "model:gemma", "q", 403, "", ""},
		{"a scope naming an alias covers nothing", "model:q model:gemma", "q", 403, "", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p, fb, adm := modelsGateway(t, ok, "http://qwen:1")
			w := post(p, tt.scopes, tt.model, false)
			if w.Code != tt.status {
				t.Fatalf("status %d, want %d: %s", w.Code, tt.status, w.Body)
			}
			if tt.status != 200 {
				if len(fb.calls) != 0 || len(adm.asked) != 0 {
					t.Fatalf("refused, yet calls %v, admissions %+v", fb.calls, adm.asked)
				}
				return
			}
			if got := modelOf(t, w); got != tt.answered {
				t.Errorf("model %q, want %q", got, tt.answered)
			}
			if len(fb.calls) != 1 || fb.calls[0] != tt.replica {
				t.Errorf("calls %v", fb.calls)
			}
			if len(adm.asked) != 1 || adm.asked[0].Model != "qwen" {
				t.Errorf("admitted %+v, want once for qwen", adm.asked)
			}
		})
	}
}

// TestFallback: no replica of qwen can take the request, so gemma, its
// fallback, answers within the same request, unless the client refuses,
// the credential does not cover gemma, or the failure is not qwen's
// unavailability.
func TestFallback(t *testing.T) {
	gemmaOK := script{deltas: []string{"gem"}}
	for _, tt := range []struct {
		name     string
		scripts  map[string]script
		qwenURLs []string
		scopes   string
		header   []string
		stream   bool
		off      bool
		status   int
		answered string
		calls    []string
		admitted []string // the models admitted, in order
	}{
		{name: "no replica: the fallback answers", scripts: map[string]script{"http://gemma:1": gemmaOK},
			scopes: "model:qwen model:gemma", status: 200, answered: "gemma", calls: []string{"http://gemma:1"},
			admitted: []string{"qwen", "gemma"}},
		{name: "streamed too", scripts: map[string]script{"http://gemma:1": gemmaOK}, stream: true,
			scopes: "model:qwen model:gemma", status: 200, answered: "gemma", calls: []string{"http://gemma:1"},
			admitted: []string{"qwen", "gemma"}},
		{name: "every replica refuses connections", scripts: map[string]script{"http://qwen:1": {err: errConnect}, "http://qwen:2": {err: errConnect}, "http://gemma:1": gemmaOK},
			qwenURLs: []string{"http://qwen:1", "http://qwen:2"}, scopes: "model:qwen model:gemma", status: 200, answered: "gemma",
			calls: []string{"http://qwen:1", "http://qwen:2", "http://gemma:1"}, admitted: []string{"qwen", "gemma"}},
		{name: "the credential lacks the fallback: the model's 503", scripts: map[string]script{"http://gemma:1": gemmaOK},
			scopes: "model:qwen", status: 503, admitted: []string{"qwen"}},
		{name: "the client refuses fallbacks", scripts: map[string]script{"http://gemma:1": gemmaOK},
			scopes: "model:qwen model:gemma", header: []string{NoFallbackHeader, "1"}, status: 503, admitted: []string{"qwen"}},
		{name: "the operator turned them off", scripts: map[string]script{"http://gemma:1": gemmaOK}, off: true,
			scopes: "model:qwen model:gemma", status: 503, admitted: []string{"qwen"}},
		{name: "off, but the client asks", scripts: map[string]script{"http://gemma:1": gemmaOK}, off: true,
			scopes: "model:qwen model:gemma", header: []string{NoFallbackHeader, "0"}, status: 200, answered: "gemma",
			calls: []string{"http://gemma:1"}, admitted: []string{"qwen", "gemma"}},
		{name: "the model refused the request: no fallback", scripts: map[string]script{"http://qwen:1": {err: errBadReq}, "http://gemma:1": gemmaOK},
			qwenURLs: []string{"http://qwen:1"}, scopes: "model:qwen model:gemma", status: 422, calls: []string{"http://qwen:1"}, admitted: []string{"qwen"}},
		{name: "the model's replica failed after its first token: no fallback", stream: true,
			scripts:  map[string]script{"http://qwen:1": {deltas: []string{"par"}, err: errServer}, "http://gemma:1": gemmaOK},
			qwenURLs: []string{"http://qwen:1"}, scopes: "model:qwen model:gemma", status: 200, calls: []string{"http://qwen:1"}, admitted: []string{"qwen"}},
		{name: "the fallback is down too: the model's 503", scripts: map[string]script{"http://gemma:1": {err: errConnect}},
			scopes: "model:qwen model:gemma", status: 503, calls: []string{"http://gemma:1"}, admitted: []string{"qwen", "gemma"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p, fb, adm := modelsGateway(t, tt.scripts, tt.qwenURLs...)
			p.Gateway.FallbackOff = tt.off
			w := post(p, tt.scopes, "q", tt.stream, tt.header...)
			if w.Code != tt.status {
				t.Fatalf("status %d, want %d: %s", w.Code, tt.status, w.Body)
			}
			if strings.Join(fb.calls, " ") != strings.Join(tt.calls, " ") {
				t.Errorf("calls %v, want %v", fb.calls, tt.calls)
			}
			var admitted []string
			for _, a := range adm.asked {
				admitted = append(admitted, a.Model)
				if a.Fallback != (a.Model == "gemma") {
					t.Errorf("admission %+v: Fallback set wrong", a)
				}
			}
			if strings.Join(admitted, " ") != strings.Join(tt.admitted, " ") {
				t.Errorf("admitted %v, want %v", admitted, tt.admitted)
			}
			if len(adm.settled) != len(tt.admitted) {
				t.Errorf("%d settlements for %d admissions", len(adm.settled), len(tt.admitted))
			}
			route := w.Header().Get(routeHeader)
			switch {
			case tt.answered != "" && !tt.stream:
				if got := modelOf(t, w); got != tt.answered {
					t.Errorf("model %q, want %q", got, tt.answered)
				}
			case tt.answered != "":
				if !strings.Contains(w.Body.String(), `"model_type":"`+tt.answered+`"`) {
					t.Errorf("stream %q does not end with the fallback's name", w.Body)
				}
			}
			if tt.answered == "gemma" && !strings.HasSuffix(route, "; model=gemma; fallback_from=qwen") {
				t.Errorf("Llmedge-Route %q does not name the fallback", route)
			}
			if tt.answered != "gemma" && strings.Contains(route, "fallback_from") {
				t.Errorf("Llmedge-Route %q names a fallback that did not answer", route)
			}
			if tt.status == 503 && !strings.Contains(w.Body.String(), "model 'qwen'") {
				t.Errorf("the 503 names another model: %s", w.Body)
			}
		})
	}
}

// TestFallbackRefusedByLimits: a fallback whose limits refuse the request
// is passed over, as one out of scope is.
func TestFallbackRefusedByLimits(t *testing.T) {
	p, fb, _ := modelsGateway(t, map[string]script{"http://gemma:1": {deltas: []string{"gem"}}})
	p.Admitter = &limitOn{model: "gemma"}
	w := post(p, "model:qwen model:gemma", "qwen", false)
	if w.Code != 503 || len(fb.calls) != 0 {
		t.Fatalf("status %d, calls %v: %s", w.Code, fb.calls, w.Body)
	}
}

// limitOn refuses the requests for one model.
type limitOn struct {
	fakeAdmitter
	model string
}

func (l *limitOn) Admit(ctx context.Context, a *tenancy.Admission, h http.Header) (tenancy.Ticket, *api.Error) {
	if a.Model == l.model {
		return nil, api.NewError(http.StatusTooManyRequests, "Rate limit reached")
	}
	return l.fakeAdmitter.Admit(ctx, a, h)
}

func TestFallbackChains(t *testing.T) {
	for _, tt := range []struct {
		name   string
		direct map[string][]string
		want   map[string]string // model → its chain, space-separated
		err    string
	}{
		{"none", map[string][]string{"a": nil, "b": nil}, map[string]string{"a": "", "b": ""}, ""},
		{"transitive, without repeats", map[string][]string{"a": {"b", "c"}, "b": {"c", "d"}, "c": nil, "d": nil},
			map[string]string{"a": "b c d", "b": "c d", "c": "", "d": ""}, ""},
		{"itself", map[string][]string{"a": {"a"}}, nil, "fallback cycle a -> a"},
		{"a cycle", map[string][]string{"a": {"b"}, "b": {"c"}, "c": {"a"}}, nil, "fallback cycle a -> b -> c -> a"},
		{"a cycle further on", map[string][]string{"a": {"b"}, "b": {"c"}, "c": {"b"}}, nil, "fallback cycle a -> b -> c -> b"},
		{"not a model", map[string][]string{"a": {"z"}}, nil, `fallback "z" is not a configured model`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := FallbackChains(tt.direct)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for m, chain := range tt.want {
				if g := strings.Join(got[m], " "); g != chain {
					t.Errorf("%s: chain %q, want %q", m, g, chain)
				}
			}
		})
	}
}
