package gateway

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/llmedge/llmedge/backends/pool"
	"github.com/llmedge/llmedge/routing"
)

// readyGateway serves main (with fallback spare) and spare, one replica
// each; required marks models required.
func readyGateway(t *testing.T, required ...string) *Gateway {
	t.Helper()
	g := &Gateway{Models: map[string]*Model{}, Aliases: map[string]string{"primary": "main"}}
	for _, name := range []string{"main", "spare"} {
		g.Models[name] = &Model{Name: name, Pool: testPool(t, t.Name()+name, &routing.RoundRobin{}, pool.Options{}, "http://"+name+":1")}
	}
	g.Models["main"].Fallbacks = []string{"spare"}
	for _, name := range required {
		g.Models[name].Required = true
	}
	return g
}

func down(g *Gateway, model string, isDown bool) {
	for _, r := range g.Models[model].Pool.Replicas() {
		r.SetHealthy(!isDown)
	}
}

func TestReport(t *testing.T) {
	tests := []struct {
		name     string
		required []string
		down     []string
		fbOff    bool
		deps     []Dependency
		status   string
		detail   string // in the report's reasons
		routable map[string]bool
		via      string // main's
	}{
		{name: "all up", required: []string{"main"}, status: StatusReady,
			routable: map[string]bool{"main": true, "spare": true}},
		{name: "optional down", required: []string{"main"}, down: []string{"spare"}, status: StatusDegraded,
			routable: map[string]bool{"main": true, "spare": false}},
		{name: "required through its fallback", required: []string{"main"}, down: []string{"main"}, status: StatusDegraded,
			routable: map[string]bool{"main": true, "spare": true}, via: "spare"},
		{name: "required with nothing routable", required: []string{"main"}, down: []string{"main", "spare"}, status: StatusNotReady,
			detail: "model 'main': required, and nothing routable: no usable replica", routable: map[string]bool{"main": false, "spare": false}},
		{name: "fallbacks off by default do not count", required: []string{"main"}, down: []string{"main"}, fbOff: true, status: StatusNotReady,
			detail: "model 'main'", routable: map[string]bool{"main": false, "spare": true}},
		{name: "nothing required, everything down", down: []string{"main", "spare"}, status: StatusDegraded,
			routable: map[string]bool{"main": false, "spare": false}},
		{name: "a dependency down", deps: []Dependency{DependencyFunc{Dependency: "redis", Func: func() DependencyStatus {
			return DependencyStatus{Status: "down", Detail: "unreachable"}
		}}}, status: StatusNotReady, detail: "redis: unreachable", routable: map[string]bool{"main": true, "spare": true}},
		{name: "a dependency degraded", deps: []Dependency{DependencyFunc{Dependency: "redis", Func: func() DependencyStatus {
			return DependencyStatus{Status: "degraded"}
		}}}, status: StatusDegraded, routable: map[string]bool{"main": true, "spare": true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := readyGateway(t, tt.required...)
			g.FallbackOff, g.Dependencies = tt.fbOff, tt.deps
			for _, m := range tt.down {
				down(g, m, true)
			}
			rep := g.Report()
			if rep.Status != tt.status {
				t.Errorf("status %q, want %q (%+v)", rep.Status, tt.status, rep)
			}
			if got := strings.Join(rep.Detail, "; "); tt.detail == "" && got != "" || !strings.Contains(got, tt.detail) {
				t.Errorf("detail %q, want %q", got, tt.detail)
			}
			for m, want := range tt.routable {
				if rep.Models[m].Routable != want {
					t.Errorf("%s routable %v, want %v", m, rep.Models[m].Routable, want)
				}
			}
			if rep.Models["main"].Via != tt.via {
				t.Errorf("main via %q, want %q", rep.Models["main"].Via, tt.via)
			}
			// The public answers: bare, whatever the state.
			w := httptest.NewRecorder()
			g.ServeReady(w, httptest.NewRequest("GET", "/readyz", nil))
			wantCode, wantBody := 200, `{"status":"ready"}`+"\n"
			if tt.status == StatusNotReady {
				wantCode, wantBody = 503, `{"status":"not ready"}`+"\n"
			}
			if w.Code != wantCode || w.Body.String() != wantBody {
				t.Errorf("/readyz %d %q, want %d %q", w.Code, w.Body, wantCode, wantBody)
			}
			for m, want := range tt.routable {
				w := httptest.NewRecorder()
				g.ServeModelReady(w, httptest.NewRequest("GET", "/readyz/"+m, nil))
				if (w.Code == 200) != want || (w.Code != 200 && w.Code != 503) || bytes.Contains(w.Body.Bytes(), []byte(m)) {
					t.Errorf("/readyz/%s: %d %q, routable %v", m, w.Code, w.Body, want)
				}
			}
		})
	}
}

func TestServeModelReady(t *testing.T) {
	g := readyGateway(t)
	down(g, "main", true)
	down(g, "spare", true)
	for _, tt := range []struct {
		path string
		code int
	}{
		{"/readyz/main", 503},
		{"/readyz/primary", 503}, // an alias
		{"/readyz/llama", 404},
		{"/readyz/", 404},
		{"/readyz/ma%69n", 503}, // escaped: the name is unescaped
		{"/readyz/main/x", 404},
	} {
		w := httptest.NewRecorder()
		g.ServeModelReady(w, httptest.NewRequest("GET", tt.path, nil))
		if w.Code != tt.code {
			t.Errorf("%s: %d, want %d", tt.path, w.Code, tt.code)
		}
	}
	down(g, "spare", false)
	w := httptest.NewRecorder()
	g.ServeModelReady(w, httptest.NewRequest("GET", "/readyz/primary", nil))
	if w.Code != 200 || w.Header().Get("Cache-Control") != "no-store" {
		t.Errorf("an alias served through its fallback: %d %v", w.Code, w.Header())
	}
}

func TestServeReport(t *testing.T) {
	g := readyGateway(t, "main")
	down(g, "main", true)
	down(g, "spare", true)
	w := httptest.NewRecorder()
	g.ServeReport(w, httptest.NewRequest("GET", "/llmedge/readyz", nil))
	body := w.Body.String()
	if w.Code != http.StatusServiceUnavailable || !strings.Contains(body, `"model main"`) ||
		!strings.Contains(body, "no usable replica") {
		t.Errorf("report: %d %s", w.Code, body)
	}
}

// TestReadyLogOnce: a change is logged once however often it is
// observed: a warning with its reason when a model goes down, info when
// it is back; the instance likewise.
func TestReadyLogOnce(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	g := readyGateway(t, "main")
	g.Logger, g.ReadyLog = zap.New(core), new(ReadyLog)
	observe := func(n int) {
		for range n {
			g.ObserveReadiness(g.Report())
		}
	}
	observe(3)
	down(g, "spare", true)
	observe(5)
	down(g, "main", true)
	observe(5)
	down(g, "main", false)
	down(g, "spare", false)
	observe(5)
	var got []string
	for _, e := range logs.All() {
		line := e.Level.String() + " " + e.Message
		if m, ok := e.ContextMap()["model_type"]; ok {
			line += " " + m.(string)
		}
		if r, ok := e.ContextMap()["reason"]; ok && e.Level == zapcore.WarnLevel && r == "" {
			t.Errorf("a warning without its reason: %v", e.ContextMap())
		}
		got = append(got, line)
	}
	want := []string{
		"warn model not ready spare",
		"warn model not ready main",
		"warn instance not ready",
		"info model ready again main",
		"info model ready again spare",
		"info instance ready again",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("logged:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
