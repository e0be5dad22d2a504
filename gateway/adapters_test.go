package gateway

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/auth"
	"github.com/llmedge/llmedge/backends/adapters"
	"github.com/llmedge/llmedge/backends/pool"
	"github.com/llmedge/llmedge/backends/protocols"
	"github.com/llmedge/llmedge/routing"
)

// loraReplica is a replica's adapter endpoint: it counts the loads it is
// asked for, and takes delay to answer each.
type loraReplica struct {
	*httptest.Server
	loads atomic.Int32
	names sync.Map
}

func newLoRAReplica(t *testing.T, delay time.Duration) *loraReplica {
	l := &loraReplica{}
	l.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/load_lora_adapter" {
			http.NotFound(w, r)
			return
		}
		var body struct {
			LoRAName string `json:"lora_name"`
			LoRAPath string `json:"lora_path"`
		}
		_ = json.NewDecoder(r.Body).Decode(&body)
		l.loads.Add(1)
		l.names.Store(r.Header.Get("Authorization")+" "+string(must(json.Marshal(body))), true)
		time.Sleep(delay)
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(l.Close)
	return l
}

// loraGateway serves qwen (adapters sql and poem listed, others loaded on
// demand) on replicas urls, and gemma (adapter tuned only) on one.
func loraGateway(t *testing.T, scripts map[string]script, urls ...string) (*Pipeline, *fakeBackend, *Model) {
	t.Helper()
	fb := &fakeBackend{scripts: scripts}
	mk := func(name string, a *adapters.Set, urls ...string) *Model {
		p := testPool(t, t.Name()+"/"+name, &routing.RoundRobin{}, pool.Options{}, urls...)
		return &Model{Name: name, Pool: p, Protocol: "fake", Policy: "round_robin", APIKey: "k",
			Protocols: map[string]protocols.Protocol{"fake": fb}, Adapters: a,
			Timeouts: Timeouts{FirstToken: time.Second, Idle: time.Second, Total: 5 * time.Second}}
	}
	qwen := mk("qwen", &adapters.Set{Names: []string{"sql", "poem"}, Dynamic: true, Path: "/loras/{adapter}", Cap: 2, Known: adapters.NewTable()}, urls...)
	gemma := mk("gemma", &adapters.Set{Names: []string{"tuned"}, Known: adapters.NewTable()}, "http://gemma:1")
	g := &Gateway{Models: map[string]*Model{"qwen": qwen, "gemma": gemma}, PingInterval: -1}
	return &Pipeline{Auth: scopedAuth{}, Realm: "llmedge", Gateway: g}, fb, qwen
}

func postLoRA(p *Pipeline, scopes, model, content string) *httptest.ResponseRecorder {
	door := testDoor{v: &api.Validator{Models: []string{"qwen", "gemma"}, DefaultModel: "qwen", Names: p.Gateway.AcceptsName}}
	body := `{"model_type":"` + model + `","messages":[{"role":"user","content":"` + content + `"}]}`
	r := httptest.NewRequest("POST", "/tasks/assistant_inference", strings.NewReader(body))
	r.Header.Set("Authorization", "Bearer ok:"+scopes)
	w := httptest.NewRecorder()
	p.Serve(w, r, door)
	return w
}

func TestResolveAdapter(t *testing.T) {
	p, _, qwen := loraGateway(t, nil, "http://a:1", "http://b:1")
	qwen.Adapters.Known.SetListed("http://b:1", []string{"found"}, time.Now())
	for _, tc := range []struct {
		name, model, adapter string
	}{
		{"qwen:sql", "qwen", "sql"},
		{"sql", "qwen", "sql"},
		{"qwen:anything", "qwen", "anything"}, // dynamic
		{"found", "qwen", "found"},            // dynamic, loaded on a replica
		{"gemma:tuned", "gemma", "tuned"},
		{"tuned", "gemma", "tuned"},
		{"gemma:other", "", ""}, // a static list
		{"unknown", "", ""},
		{"qwen", "", ""},
		{"qwen:", "", ""},
		{"qwen:has space", "", ""},
	} {
		m, a, ok := p.Gateway.ResolveAdapter(tc.name)
		if m != tc.model || a != tc.adapter || ok != (tc.model != "") {
			t.Errorf("%q: %q %q %v, want %q %q", tc.name, m, a, ok, tc.model, tc.adapter)
		}
	}
}

// TestAdapterRouting: a request for an adapter goes to a replica that
// has it, under the adapter's name; one whose requests run it now first.
func TestAdapterRouting(t *testing.T) {
	a, b, c := "http://a:1", "http://b:1", "http://c:1"
	ok := script{deltas: []string{"hi"}}
	p, fb, qwen := loraGateway(t, map[string]script{a: ok, b: ok, c: ok}, a, b, c)
	known := qwen.Adapters.Known
	now := time.Now()
	known.SetListed(a, []string{"sql"}, now)
	known.SetListed(b, []string{"sql", "poem"}, now)
	for _, tc := range []struct {
		model   string
		want    []string // replicas the calls may go to
		upModel string
	}{
		{"qwen:sql", []string{a, b}, "sql"},
		{"poem", []string{b}, "poem"},
		{"qwen", []string{a, b, c}, ""}, // the base model: anywhere
	} {
		for range 6 {
			fb.calls = nil
			w := postLoRA(p, "model:qwen", tc.model, "hello")
			if w.Code != 200 || modelOf(t, w) != tc.model {
				t.Fatalf("%s: %d %s", tc.model, w.Code, w.Body)
			}
			if got := fb.calls[0]; !slices.Contains(tc.want, got) {
				t.Errorf("%s went to %s, want one of %v", tc.model, got, tc.want)
			}
			if fb.last.Model != tc.upModel {
				t.Errorf("%s: the replica was asked for %q, want %q", tc.model, fb.last.Model, tc.upModel)
			}
		}
	}
	// sql runs on b now: b alone takes its requests.
	known.SetRunning(b, []string{"sql"}, nil, 4, time.Now().Add(time.Minute))
	for range 4 {
		fb.calls = nil
		if w := postLoRA(p, "model:qwen", "qwen:sql", "hello"); w.Code != 200 || fb.calls[0] != b {
			t.Fatalf("running: %d, went to %v", w.Code, fb.calls)
		}
	}
}

// TestAdapterLoadedOnce: concurrent first requests for an adapter no
// replica has share one load, on the replica with the fewest adapters,
// and all go there.
func TestAdapterLoadedOnce(t *testing.T) {
	r1, r2 := newLoRAReplica(t, 0), newLoRAReplica(t, 100*time.Millisecond)
	ok := script{deltas: []string{"hi"}}
	p, fb, qwen := loraGateway(t, map[string]script{r1.URL: ok, r2.URL: ok}, r1.URL, r2.URL)
	qwen.Adapters.Known.SetListed(r1.URL, []string{"sql"}, time.Now())
	const n = 10
	var wg sync.WaitGroup
	codes := make([]int, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes[i] = postLoRA(p, "model:qwen", "qwen:fresh", "hello").Code
		}()
	}
	wg.Wait()
	for i, c := range codes {
		if c != 200 {
			t.Errorf("request %d: %d", i, c)
		}
	}
	if r1.loads.Load() != 0 || r2.loads.Load() != 1 {
		t.Fatalf("loads: %d on the first replica, %d on the second; want 0 and 1", r1.loads.Load(), r2.loads.Load())
	}
	_, found := r2.names.Load(`Bearer k {"lora_name":"fresh","lora_path":"/loras/fresh"}`)
	if !found {
		var seen []any
		r2.names.Range(func(k, _ any) bool { seen = append(seen, k); return true })
		t.Errorf("the load asked for %v", seen)
	}
	for _, u := range fb.calls {
		if u != r2.URL {
			t.Errorf("a request for the new adapter went to %s", u)
		}
	}
	// At the cap (2 each), a new adapter has nowhere to go: 503.
	qwen.Adapters.Known.SetListed(r1.URL, []string{"sql", "poem"}, time.Now())
	qwen.Adapters.Known.MarkLoaded(r2.URL, "other")
	if w := postLoRA(p, "model:qwen", "qwen:more", "hello"); w.Code != http.StatusServiceUnavailable {
		t.Errorf("at the cap: %d %s", w.Code, w.Body)
	}
	if r1.loads.Load()+r2.loads.Load() != 1 {
		t.Errorf("a load was tried at the cap")
	}
}

// TestAdapterScopes: a model's scope covers its adapters; an adapter's
// scope that adapter alone.
func TestAdapterScopes(t *testing.T) {
	a := "http://a:1"
	p, _, qwen := loraGateway(t, map[string]script{a: {deltas: []string{"hi"}}}, a)
	qwen.Adapters.Known.SetListed(a, []string{"sql", "poem"}, time.Now())
	for _, tc := range []struct {
		scopes, model string
		code          int
	}{
		{"model:qwen", "qwen:sql", 200},
		{"model:qwen", "poem", 200},
		{"model:qwen:sql", "qwen:sql", 200},
		{"model:qwen:sql", "sql", 200},
		{"model:qwen:sql", "qwen:poem", 403},
		{"model:qwen:sql", "qwen", 403},
		{"model:gemma", "qwen:sql", 403},
		{"model:qwen", "gemma:nope", 422}, // not a name of this gateway
	} {
		if w := postLoRA(p, tc.scopes, tc.model, "hello"); w.Code != tc.code {
			t.Errorf("%s asking for %s: %d %s, want %d", tc.scopes, tc.model, w.Code, w.Body, tc.code)
		}
	}
}

func TestAdapterNames(t *testing.T) {
	p, _, qwen := loraGateway(t, nil, "http://a:1")
	qwen.Adapters.Known.SetListed("http://a:1", []string{"extra", "sql"}, time.Now())
	g := p.Gateway
	for _, tc := range []struct {
		scopes string
		want   string
	}{
		{"model:qwen model:gemma", "gemma:tuned qwen:extra qwen:poem qwen:sql"},
		{"model:qwen:sql", "qwen:sql"},
		{"model:other", ""},
	} {
		pr := &auth.Principal{Scopes: strings.Fields(tc.scopes)}
		if got := strings.Join(g.AdapterNames(pr), " "); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.scopes, got, tc.want)
		}
	}
	pr := &auth.Principal{Scopes: []string{"model:qwen:sql"}}
	if !g.CoversName(pr, "sql") || g.CoversName(pr, "qwen:poem") || g.CoversName(nil, "qwen:sql") {
		t.Error("CoversName")
	}
}

// TestAdapterGone: a replica that says the adapter does not exist loses
// it in the gateway's view, so the next request loads it again.
func TestAdapterGone(t *testing.T) {
	r1 := newLoRAReplica(t, 0)
	gone := script{err: &protocols.Error{Kind: protocols.KindBadRequest, Status: http.StatusNotFound, Message: "The model `sql` does not exist."}}
	p, fb, qwen := loraGateway(t, map[string]script{r1.URL: gone}, r1.URL)
	qwen.Adapters.Known.SetListed(r1.URL, []string{"sql"}, time.Now().Add(-time.Minute))
	if w := postLoRA(p, "model:qwen", "qwen:sql", "hello"); w.Code == 200 {
		t.Fatalf("got %d", w.Code)
	}
	fb.mu.Lock()
	fb.scripts[r1.URL] = script{deltas: []string{"hi"}}
	fb.mu.Unlock()
	if w := postLoRA(p, "model:qwen", "qwen:sql", "hello"); w.Code != 200 || r1.loads.Load() != 1 {
		t.Fatalf("after: %d, %d loads", w.Code, r1.loads.Load())
	}
}

// TestAdapterKeyed: the routing policy sees an adapter's prompts apart
// from the base model's.
func TestAdapterKeyed(t *testing.T) {
	msgs := []api.Message{{Role: api.RoleUser, Content: "x"}}
	got := adapterKeyed(msgs, "sql")
	if len(got) != 2 || got[0].Role != adapterRole || got[0].Content != "sql" || !reflect.DeepEqual(got[1], msgs[0]) {
		t.Fatalf("%+v", got)
	}
}

// TestAdapterBadNames: a name that is not an identifier (a path, a
// hidden file, a control character) or falls outside the model's
// adapter_pattern is a 400 naming the model and the adapter, and no
// replica is asked to load anything.
func TestAdapterBadNames(t *testing.T) {
	r1 := newLoRAReplica(t, 0)
	p, _, qwen := loraGateway(t, map[string]script{r1.URL: {deltas: []string{"hi"}}}, r1.URL)
	re, err := adapters.CompilePattern("[a-z]+")
	if err != nil {
		t.Fatal(err)
	}
	qwen.Adapters.Pattern = re
	for _, name := range []string{"qwen:../../../etc/passwd", "qwen:/etc/shadow", "qwen:.env", "qwen:a\\u0000b",
		"qwen:a..b", "gemma:/etc/shadow", "qwen:team1"} {
		w := postLoRA(p, "model:qwen model:gemma", name, "hello")
		model, _, _ := strings.Cut(name, ":")
		if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "model '"+model+"'") ||
			!strings.Contains(w.Body.String(), "Adapter") {
			t.Errorf("%s: %d %s", name, w.Code, w.Body)
		}
	}
	if n := r1.loads.Load(); n != 0 {
		t.Errorf("%d loads asked for", n)
	}
}

// TestAdapterRefusals: every replica full of adapters in use is a 503
// that names the cause, with Retry-After; a tenant past its loads, a 429.
func TestAdapterRefusals(t *testing.T) {
	r1 := newLoRAReplica(t, 0)
	p, _, qwen := loraGateway(t, map[string]script{r1.URL: {deltas: []string{"hi"}}}, r1.URL)
	qwen.Adapters.Idle = time.Hour
	qwen.Adapters.TenantLoads = 1
	qwen.Adapters.Known.MarkLoaded(r1.URL, "x1")
	qwen.Adapters.Known.MarkLoaded(r1.URL, "x2")
	w := postLoRA(p, "model:qwen", "qwen:x3", "hello")
	if w.Code != http.StatusServiceUnavailable || !strings.Contains(w.Body.String(), "adapter slots full") ||
		w.Header().Get("Retry-After") == "" || strings.Contains(w.Body.String(), "healthy") {
		t.Errorf("slots full: %d %v %s", w.Code, w.Header(), w.Body)
	}
	w = postLoRA(p, "model:qwen", "qwen:x4", "hello") // the same tenant's second new name
	if w.Code != http.StatusTooManyRequests || !strings.Contains(w.Body.String(), "LoRA adapter loads") || w.Header().Get("Retry-After") == "" {
		t.Errorf("tenant bound: %d %v %s", w.Code, w.Header(), w.Body)
	}
	if n := r1.loads.Load(); n != 0 {
		t.Errorf("%d loads asked for", n)
	}
}
