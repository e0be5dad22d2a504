package gateway_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/auth"
	"github.com/llmedge/llmedge/backends/pool"
	"github.com/llmedge/llmedge/backends/protocols"
	"github.com/llmedge/llmedge/backends/protocols/openaicompat"
	"github.com/llmedge/llmedge/batch"
	"github.com/llmedge/llmedge/doors/openai"
	"github.com/llmedge/llmedge/gateway"
	"github.com/llmedge/llmedge/ledger"
	"github.com/llmedge/llmedge/limits"
	"github.com/llmedge/llmedge/metrics"
	"github.com/llmedge/llmedge/routing"
	"github.com/llmedge/llmedge/simulator"
	"github.com/llmedge/llmedge/tenancy"
)

// bearerAuth admits "Bearer online" as an online user of every model and
// refuses anything else: a batch line that reached it would be refused.
type bearerAuth struct{}

func (bearerAuth) Authenticate(r *http.Request) (*auth.Principal, *api.Error) {
	if r.Header.Get("Authorization") != "Bearer online" {
		return nil, api.NewError(http.StatusUnauthorized, auth.DetailNotAuthenticated).WithHeader("WWW-Authenticate", "Bearer")
	}
	return &auth.Principal{Subject: "online", Scopes: []string{"model:qwen"}}, nil
}

// records is a ledger store that keeps what the writer wrote.
type records struct {
	mu   sync.Mutex
	recs []ledger.Record
}

func (s *records) Write(_ context.Context, recs []ledger.Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.recs = append(s.recs, recs...)
	return nil
}
func (s *records) Sum(context.Context, ledger.Filter) ([]ledger.Sum, error) { return nil, nil }
func (s *records) Prune(context.Context, time.Time) (int64, error)          { return 0, nil }
func (s *records) Close() error                                             { return nil }

// noStorage is a revocation storage that holds nothing: no revocations.
type noStorage struct{}

func (noStorage) Load(context.Context, string) ([]byte, error) { return nil, fs.ErrNotExist }
func (noStorage) Store(context.Context, string, []byte) error  { return nil }
func (noStorage) Lock(context.Context, string) error           { return nil }
func (noStorage) Unlock(context.Context, string) error         { return nil }

// batchSite is a gateway for model qwen in front of one in-process
// simulator (vLLM's dialect), served through the OpenAI door.
type batchSite struct {
	g       *gateway.Gateway
	pool    *pool.Pool
	replica *pool.Replica
	mount   *openai.Mount
	ledger  *ledger.Writer
	store   *records
	budgets *tenancy.Service
	sim     *simulator.Server
}

type siteOpts struct {
	pool    pool.Options
	slots   int                     // the replica's max concurrency; 0: none
	sim     simulator.Config        // Model is set to qwen
	budgets []limits.Budget         // each user's, when set
	rpm     int                     // each user's requests a minute, when set
	price   map[string]ledger.Price // the ledger's prices
	owners  gateway.BatchOwners     // the pipeline's Owners
}

func newBatchSite(t *testing.T, o siteOpts) *batchSite {
	t.Helper()
	o.sim.Model = "qwen"
	sim := simulator.New(o.sim)
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	p := pool.NewWithOptions(t.Name(), &routing.RoundRobin{}, o.pool)
	t.Cleanup(p.Close)
	rep, err := pool.NewReplica(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	rep.MaxConcurrency = o.slots
	p.Set([]*pool.Replica{rep})
	s := &batchSite{pool: p, replica: rep, store: &records{}, sim: sim}
	s.ledger = ledger.NewWriter(s.store, ledger.WriterOptions{Batch: 1, Interval: time.Millisecond, Prices: o.price})
	t.Cleanup(func() { _ = s.ledger.Close() })
	s.g = &gateway.Gateway{
		Models: map[string]*gateway.Model{"qwen": {
			Name: "qwen", Pool: p, Protocol: "vllm", UpstreamModel: "qwen", Policy: "round_robin",
			Protocols: map[string]protocols.Protocol{"vllm": &openaicompat.Protocol{Tokenizer: "vllm"}},
			Timeouts:  gateway.Timeouts{Total: 10 * time.Second},
		}},
		Client: srv.Client(), PingInterval: -1, Ledger: s.ledger,
	}
	pl := &gateway.Pipeline{Auth: bearerAuth{}, Gateway: s.g, Owners: o.owners}
	if o.budgets != nil || o.rpm > 0 {
		// Cost budgets price tokens as the ledger does (the Caddy glue's
		// way).
		cost := func(model string, prompt, cached, completion int) float64 {
			return o.price[model].Cost(&ledger.Record{PromptTokens: prompt, CachedTokens: cached, CompletionTokens: completion})
		}
		svc, err := tenancy.New(context.Background(), tenancy.Config{Registry: prometheus.NewRegistry(), Storage: noStorage{},
			Limits: &tenancy.Limits{Default: limits.Limit{RPM: o.rpm, Budgets: o.budgets}, Cost: cost}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(svc.Close)
		s.budgets, pl.Admitter = svc, svc.Admitter()
	}
	s.mount = openai.NewMount(pl, openai.New(api.Limits{}, []string{"qwen"}), nil)
	return s
}

// flushed is what the ledger holds once every record is written.
func (s *batchSite) flushed(t *testing.T) []ledger.Record {
	t.Helper()
	if err := s.ledger.Close(); err != nil {
		t.Fatal(err)
	}
	s.store.mu.Lock()
	defer s.store.mu.Unlock()
	return append([]ledger.Record(nil), s.store.recs...)
}

// recorded is what the ledger holds for results: a line's record goes
// with its result (Result.Usage), written here as the batch store writes
// it, in the transaction of the result, into a real SQLite ledger. The
// writer itself gets none.
func (s *batchSite) recorded(t *testing.T, results ...batch.Result) []ledger.Record {
	t.Helper()
	if recs := s.flushed(t); len(recs) != 0 {
		t.Fatalf("the ledger's writer got %d records of batch lines: they go with their results", len(recs))
	}
	path := filepath.Join(t.TempDir(), "ledger.db")
	st, err := ledger.OpenSQLite(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	_ = st.Close()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, res := range results {
		if res.Usage == nil {
			continue
		}
		tx, err := db.Begin()
		if err != nil {
			t.Fatal(err)
		}
		if err := res.Usage(context.Background(), tx, "sqlite"); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	rows, err := db.Query(`SELECT request_id, user_name, key_id, batch_id, status, prompt_tokens, cached_tokens, completion_tokens, cost FROM usage_records`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var recs []ledger.Record
	for rows.Next() {
		var r ledger.Record
		if err := rows.Scan(&r.RequestID, &r.User, &r.KeyID, &r.Batch, &r.Status, &r.PromptTokens, &r.CachedTokens, &r.CompletionTokens, &r.Cost); err != nil {
			t.Fatal(err)
		}
		recs = append(recs, r)
	}
	return recs
}

var alice = batch.Owner{Subject: "alice", KeyID: "key-1", Scopes: []string{"model:qwen"}}
var bob = batch.Owner{Subject: "bob", KeyID: "key-2", Scopes: []string{"model:qwen"}}

func line(owner batch.Owner, endpoint, body string) batch.Line {
	return batch.Line{BatchID: "batch_1", Index: 1, CustomID: "req-1", Body: []byte(body), Owner: owner,
		Endpoint: endpoint, Model: "qwen"}
}

const chatBody = `{"model":"qwen","max_tokens":8,"messages":[{"role":"user","content":"hello there"}]}`

// TestBatchLineRunsAsItsOwner: a line goes through the pipeline as its
// owner, without a credential (the Authenticator refuses everything but
// online users): authorized by the owner's scopes, answered on every
// endpoint a batch may name, recorded with the batch's id and priced at
// the model's batch price.
func TestBatchLineRunsAsItsOwner(t *testing.T) {
	s := newBatchSite(t, siteOpts{slots: 4, price: map[string]ledger.Price{"qwen": {Input: 1e6, Output: 2e6, Batch: 0.5}}})
	d := gateway.NewBatchDispatcher(s.mount.Handler, 0)
	bodies := map[string]string{
		openai.PathChatCompletions: chatBody,
		openai.PathCompletions:     `{"model":"qwen","max_tokens":8,"prompt":"once upon a time"}`,
		openai.PathEmbeddings:      `{"model":"qwen","input":"embed me"}`,
		openai.PathResponses:       `{"model":"qwen","max_output_tokens":16,"input":"hello there"}`,
	}
	ids := map[string]bool{}
	var results []batch.Result
	for endpoint, body := range bodies {
		res, err := d.Dispatch(context.Background(), line(alice, endpoint, body))
		results = append(results, res)
		if err != nil {
			t.Fatalf("%s: %v", endpoint, err)
		}
		if res.StatusCode != 200 || res.Err != nil || res.Failed() || !json.Valid(res.Body) {
			t.Fatalf("%s: %d %v %s", endpoint, res.StatusCode, res.Err, res.Body)
		}
		if res.CustomID != "req-1" || res.BatchID != "batch_1" || res.RequestID == "" {
			t.Fatalf("%s: result %+v", endpoint, res)
		}
		ids[res.RequestID] = true
	}
	// An owner whose scopes do not cover the model: 403 is the line's
	// own answer, in OpenAI's shape.
	res, err := d.Dispatch(context.Background(), line(batch.Owner{Subject: "bob"}, openai.PathChatCompletions, chatBody))
	if err != nil || res.StatusCode != http.StatusForbidden || !res.Failed() || !strings.Contains(string(res.Body), "model_not_allowed") {
		t.Fatalf("scope-less owner: %d %v %s", res.StatusCode, err, res.Body)
	}
	results = append(results, res)

	recs := s.recorded(t, results...)
	if len(recs) != len(bodies) {
		t.Fatalf("%d records, want %d (one per answered line; none for the refusals)", len(recs), len(bodies))
	}
	for _, r := range recs {
		if r.Batch != "batch_1" || r.User != "alice" || r.KeyID != "key-1" || !ids[r.RequestID] || r.Status != 200 {
			t.Errorf("record %+v", r)
		}
		if r.PromptTokens == 0 {
			t.Errorf("record %s: no usage", r.RequestID)
		}
		want := float64(r.PromptTokens-r.CachedTokens)*1*0.5 + float64(r.CompletionTokens)*2*0.5
		if r.Cost != want {
			t.Errorf("record %s: cost %g, want the batch price %g", r.RequestID, r.Cost, want)
		}
	}
	// A line that asks for a stream: 400, naming the member.
	res, err = d.Dispatch(context.Background(), line(alice, openai.PathChatCompletions,
		`{"model":"qwen","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	if err != nil || res.StatusCode != http.StatusBadRequest || !strings.Contains(string(res.Body), `"param":"stream"`) {
		t.Fatalf("streamed line: %d %v %s", res.StatusCode, err, res.Body)
	}
	// A client's request goes through the Authenticator as ever.
	w := httptest.NewRecorder()
	s.mount.Handler(openai.PathChatCompletions).ServeHTTP(w, httptest.NewRequest("POST", openai.PathChatCompletions, strings.NewReader(chatBody)))
	if w.Code != http.StatusUnauthorized {
		t.Fatalf("client without a credential: %d", w.Code)
	}
}

// TestBatchLineChargesItsOwnersBudget: a line's tokens go to its owner's
// budget; once it is spent, the next line's answer is the door's refusal.
func TestBatchLineChargesItsOwnersBudget(t *testing.T) {
	s := newBatchSite(t, siteOpts{slots: 4, budgets: []limits.Budget{{Unit: limits.UnitTokens, Amount: 5, Per: limits.PerDay}}})
	d := gateway.NewBatchDispatcher(s.mount.Handler, 0)
	res, err := d.Dispatch(context.Background(), line(alice, openai.PathChatCompletions, chatBody))
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("first line: %d %v %s", res.StatusCode, err, res.Body)
	}
	var used float64
	for _, b := range s.budgets.Budgets() {
		if b.Name == "alice" {
			used = b.Used
		}
	}
	first := res
	res, err = d.Dispatch(context.Background(), line(alice, openai.PathChatCompletions, chatBody))
	if err != nil || res.StatusCode < 400 || res.StatusCode > 499 || !strings.Contains(string(res.Body), "budget") {
		t.Fatalf("line over the budget: %d %v %s, want the door's 4xx naming the budget", res.StatusCode, err, res.Body)
	}
	recs := s.recorded(t, first, res)
	if len(recs) != 1 || float64(recs[0].PromptTokens+recs[0].CompletionTokens) != used || used == 0 {
		t.Fatalf("alice's budget holds %v; records %+v", used, recs)
	}
}

// A line refused by its owner's rate limit is not answered 429: it is
// deferred (run again once the window has room), counted as no attempt
// and not recorded; a budget spent, which time alone does not mend within
// the batch's window, is the line's answer (TestBatchLineChargesItsOwnersBudget).
func TestBatchLineRateLimitedIsDeferred(t *testing.T) {
	s := newBatchSite(t, siteOpts{slots: 4, rpm: 1})
	d := gateway.NewBatchDispatcher(s.mount.Handler, 0)
	res, err := d.Dispatch(context.Background(), line(alice, openai.PathChatCompletions, chatBody))
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("first line: %d %v %s", res.StatusCode, err, res.Body)
	}
	first := res
	res, err = d.Dispatch(context.Background(), line(alice, openai.PathChatCompletions, chatBody))
	if !errors.Is(err, gateway.ErrBusy) || res.StatusCode != 0 || res.Body != nil {
		t.Fatalf("line over the rate limit: %d %v %s, want it deferred (ErrBusy)", res.StatusCode, err, res.Body)
	}
	if recs := s.recorded(t, first); len(recs) != 1 {
		t.Fatalf("records %+v, want the first line's", recs)
	}
	// Another owner's line is not held by alice's window.
	if res, err := d.Dispatch(context.Background(), line(bob, openai.PathChatCompletions, chatBody)); err != nil || res.StatusCode != 200 {
		t.Fatalf("bob's line: %d %v %s", res.StatusCode, err, res.Body)
	}
}

// TestBatchLineNeverWaits: while the model is saturated, even with a
// queue where sheddable requests would wait (shedding off), a line is
// refused at once with an error (it is tried again later), counted as
// deferred and not recorded; with a slot free again it runs.
func TestBatchLineNeverWaits(t *testing.T) {
	s := newBatchSite(t, siteOpts{slots: 1, pool: pool.Options{QueueLength: 10, QueueTimeout: 5 * time.Second, NoShed: true}})
	reg := prometheus.NewRegistry()
	m, err := newMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	s.g.Metrics = m
	d := gateway.NewBatchDispatcher(s.mount.Handler, 0)
	held, err := s.pool.Acquire(nil, nil) // an online request on the only slot
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = d.Dispatch(context.Background(), line(alice, openai.PathChatCompletions, chatBody))
	if !errors.Is(err, gateway.ErrBusy) {
		t.Fatalf("Dispatch on a saturated model = %v, want ErrBusy", err)
	}
	if took := time.Since(start); took > time.Second {
		t.Fatalf("refused after %v: it waited", took)
	}
	held.Release(pool.Success)
	res, err := d.Dispatch(context.Background(), line(alice, openai.PathChatCompletions, chatBody))
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("with the slot free: %d %v", res.StatusCode, err)
	}
	if recs := s.recorded(t, res); len(recs) != 1 {
		t.Fatalf("%d records, want 1: a deferred line is recorded when it runs", len(recs))
	}
	for outcome, want := range map[string]float64{"deferred": 1, "completed": 1} {
		if got := gaugeOrCounter(t, reg, "llmedge_batch_lines_total", outcome); got != want {
			t.Errorf("llmedge_batch_lines_total{outcome=%q} = %v, want %v", outcome, got, want)
		}
	}
	if got := gaugeOrCounter(t, reg, "llmedge_batch_lines_running", ""); got != 0 {
		t.Errorf("llmedge_batch_lines_running = %v after the lines, want 0", got)
	}
	if got := gaugeOrCounter(t, reg, "llmedge_requests_total", ""); got != 1 {
		t.Errorf("llmedge_requests_total = %v, want 1: the deferred line answered nobody", got)
	}
}

// TestBatchLineBehindItsOwnQueue: on engines that order their queue by
// class, a queue of the gateway's own sheddable work there does not
// refuse a line (it waits in the engine for a sequence, behind the
// online requests); a queue holding more, or engines that do not order
// by class, refuse it as busy.
func TestBatchLineBehindItsOwnQueue(t *testing.T) {
	for _, tt := range []struct {
		name     string
		byClass  bool
		waiting  float64 // the engine's queue
		wantBusy bool
	}{
		{name: "by class, its own queue", byClass: true, waiting: 1},
		{name: "by class, a better request queued", byClass: true, waiting: 2, wantBusy: true},
		{name: "not by class", waiting: 1, wantBusy: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := newBatchSite(t, siteOpts{slots: 4})
			if tt.byClass {
				s.g.Models["qwen"].EnginePriority = []int{0, 1, 2}
			}
			s.replica.SetEngineLoad(pool.EngineLoad{Running: 8, Waiting: tt.waiting, OwnSheddable: 1, KVUsage: 0.5,
				Until: time.Now().Add(time.Minute)})
			res, err := gateway.NewBatchDispatcher(s.mount.Handler, 0).Dispatch(context.Background(),
				line(alice, openai.PathChatCompletions, chatBody))
			if busy := errors.Is(err, gateway.ErrBusy); busy != tt.wantBusy {
				t.Fatalf("busy = %v (%v), want %v", busy, err, tt.wantBusy)
			}
			if !tt.wantBusy && res.StatusCode != http.StatusOK {
				t.Fatalf("status %d, want 200", res.StatusCode)
			}
		})
	}
}

// TestBatchAnswerTooLarge: an answer beyond the bound is the line's error,
// not held in memory.
func TestBatchAnswerTooLarge(t *testing.T) {
	s := newBatchSite(t, siteOpts{slots: 4})
	d := gateway.NewBatchDispatcher(s.mount.Handler, 64)
	res, err := d.Dispatch(context.Background(), line(alice, openai.PathChatCompletions, chatBody))
	if err != nil || res.Err == nil || res.Err.Code != "answer_too_large" || len(res.Body) != 0 || !res.Failed() {
		t.Fatalf("Dispatch = %+v, %v; want answer_too_large", res, err)
	}
}

// TestBatchGateBacksOff: with a real pool and simulator, Room is the free
// slots while the model is idle, and 0 as soon as an online request waits
// for a slot; it comes back once the online load is gone.
func TestBatchGateBacksOff(t *testing.T) {
	s := newBatchSite(t, siteOpts{slots: 2, pool: pool.Options{QueueLength: 10, QueueTimeout: 10 * time.Second},
		sim: simulator.Config{TTFT: simulator.Duration(400 * time.Millisecond)}})
	gate := gateway.NewBatchGate(s.g, nil)
	if got := gate.Room("qwen", 0); got != 2 {
		t.Fatalf("Room idle = %d, want 2", got)
	}
	var wg sync.WaitGroup
	sent := time.Now()
	for range 3 { // one more than the slots: one waits
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := httptest.NewRequest("POST", openai.PathChatCompletions, strings.NewReader(chatBody))
			r.Header.Set("Authorization", "Bearer online")
			s.mount.Handler(openai.PathChatCompletions).ServeHTTP(httptest.NewRecorder(), r)
		}()
	}
	// From the online requests' arrival, the gate closes within a second
	// (at once, in fact: as the third request waits).
	for gate.Room("qwen", 0) != 0 {
		if time.Since(sent) > time.Second {
			t.Fatalf("Room still %d a second after the online load rose", gate.Room("qwen", 0))
		}
		time.Sleep(time.Millisecond)
	}
	t.Logf("the gate closed %v after the online requests were sent", time.Since(sent))
	deadline := time.Now().Add(5 * time.Second)
	for s.pool.Waiting() == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	waited := time.Now()
	if s.pool.Waiting() == 0 {
		t.Fatal("no online request waited")
	}
	if got := gate.Room("qwen", 0); got != 0 {
		t.Fatalf("Room while an online request waits = %d, want 0", got)
	}
	if took := time.Since(waited); took > 100*time.Millisecond {
		t.Fatalf("Room took %v to close", took)
	}
	wg.Wait()
	if got := gate.Room("qwen", 0); got != 2 {
		t.Fatalf("Room after the online load = %d, want 2", got)
	}
}

// TestBatchGateRoom: the reserve, the lines started that hold no slot
// yet (the ramp), the operator's share, a saturated engine.
func TestBatchGateRoom(t *testing.T) {
	for _, tt := range []struct {
		name    string
		opts    pool.Options
		slots   int
		taken   int     // slots held by online requests
		share   float64 // 0: no share given
		running int     // lines the runner started
		onSlots int     // of which on a replica
		engine  *pool.EngineLoad
		byClass []int // engine_priority: the engines' priorities by class
		want    int
	}{
		{name: "idle", slots: 8, want: 8},
		{name: "online work takes slots", slots: 8, taken: 5, want: 3},
		{name: "the reserve is online work's", opts: pool.Options{Reserve: 2}, slots: 8, taken: 3, want: 3},
		{name: "within the reserve: none", opts: pool.Options{Reserve: 2}, slots: 8, taken: 6, want: 0},
		{name: "ramp: started lines not on a slot yet count", slots: 8, running: 3, onSlots: 1, want: 5},
		{name: "share caps the lines", slots: 8, share: 0.5, running: 2, onSlots: 2, want: 2},
		{name: "share reached", slots: 8, share: 0.25, running: 2, onSlots: 2, want: 0},
		{name: "share off", slots: 8, share: -1, want: 8},
		{name: "engine queueing", slots: 8, engine: &pool.EngineLoad{Waiting: 2, KVUsage: 0.1}, want: 0},
		{name: "engine KV nearly full", slots: 8, engine: &pool.EngineLoad{KVUsage: 0.97}, want: 0},
		{name: "engine queueing the gateway's sheddable work, by class", slots: 8, onSlots: 2, running: 2, byClass: []int{-1, 0, 1},
			engine: &pool.EngineLoad{Running: 8, Waiting: 2, OwnSheddable: 2, KVUsage: 0.5}, want: 6},
		{name: "engine queueing the gateway's sheddable work, not by class", slots: 8, onSlots: 2, running: 2,
			engine: &pool.EngineLoad{Running: 8, Waiting: 2, OwnSheddable: 2, KVUsage: 0.5}, want: 0},
		{name: "engine priorities that do not run sheddable work last", slots: 8, onSlots: 2, running: 2, byClass: []int{0, 1, 1},
			engine: &pool.EngineLoad{Running: 8, Waiting: 2, OwnSheddable: 2, KVUsage: 0.5}, want: 0},
		{name: "engine queueing a better request, by class", slots: 8, byClass: []int{-1, 0, 1},
			engine: &pool.EngineLoad{Running: 8, Waiting: 3, OwnSheddable: 2, KVUsage: 0.5}, want: 0},
		{name: "engine KV nearly full, by class", slots: 8, byClass: []int{-1, 0, 1},
			engine: &pool.EngineLoad{Waiting: 1, OwnSheddable: 2, KVUsage: 0.97}, want: 0},
		{name: "uncapped replica: one at a time", slots: 0, want: 1},
		{name: "uncapped replica, one starting", slots: 0, running: 1, want: 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := newBatchSite(t, siteOpts{slots: tt.slots, pool: tt.opts, sim: simulator.Config{Hang: true}})
			s.g.Models["qwen"].EnginePriority = tt.byClass
			for range tt.taken {
				l, err := s.pool.Acquire(nil, nil)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { l.Release(pool.Success) })
			}
			// Lines on a replica hold a slot and are counted by the
			// gateway: hold them through the pipeline's own path.
			for range tt.onSlots {
				holdBatchSlot(t, s)
			}
			if tt.engine != nil {
				l := *tt.engine
				l.Until = time.Now().Add(time.Minute)
				s.replica.SetEngineLoad(l)
			}
			var share func(string) float64
			switch {
			case tt.share > 0:
				share = func(string) float64 { return tt.share }
			case tt.share < 0:
				share = func(string) float64 { return 2 } // out of range: the whole
			}
			if got := gateway.NewBatchGate(s.g, share).Room("qwen", tt.running); got != tt.want {
				t.Fatalf("Room = %d, want %d", got, tt.want)
			}
		})
	}
}

// holdBatchSlot runs a line on the site's replica (whose simulator hangs)
// until the test ends, and waits until it holds its slot.
func holdBatchSlot(t *testing.T, s *batchSite) {
	t.Helper()
	m := s.g.Models["qwen"]
	before, out := m.BatchRunning(), s.replica.Outstanding()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = gateway.NewBatchDispatcher(s.mount.Handler, 0).Dispatch(ctx, line(alice, openai.PathChatCompletions, chatBody))
	}()
	t.Cleanup(func() { cancel(); <-done })
	deadline := time.Now().Add(5 * time.Second)
	for m.BatchRunning() == before || s.replica.Outstanding() == out {
		if time.Now().After(deadline) {
			t.Fatal("the line never took its slot")
		}
		time.Sleep(time.Millisecond)
	}
}

func newMetrics(reg *prometheus.Registry) (*metrics.Metrics, error) { return metrics.New(reg, nil) }

// gaugeOrCounter is the value of the series of name whose outcome label
// is outcome (any, for ""), summed.
func gaugeOrCounter(t *testing.T, reg *prometheus.Registry, name, outcome string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			match := outcome == ""
			for _, l := range m.GetLabel() {
				if l.GetName() == "outcome" && l.GetValue() == outcome {
					match = true
				}
			}
			if !match {
				continue
			}
			if c := m.GetCounter(); c != nil {
				sum += c.GetValue()
			}
			if g := m.GetGauge(); g != nil {
				sum += g.GetValue()
			}
		}
	}
	return sum
}

// TestBatchGateRollout: a weighted rollout's lines go to any of its
// shares, so it has the room of the share with the least; a share's
// online work closes it.
func TestBatchGateRollout(t *testing.T) {
	a := newBatchSite(t, siteOpts{slots: 4})
	b := newBatchSite(t, siteOpts{slots: 2})
	g := &gateway.Gateway{Models: map[string]*gateway.Model{
		"qwen-a": a.g.Models["qwen"], "qwen-b": b.g.Models["qwen"],
		"qwen": {Name: "qwen", Rollout: []gateway.Share{{Model: "qwen-a", Weight: 1}, {Model: "qwen-b", Weight: 1}}},
	}}
	gate := gateway.NewBatchGate(g, nil)
	if got := gate.Room("qwen", 0); got != 2 {
		t.Fatalf("Room = %d, want 2 (the smaller share's free slots)", got)
	}
	for range 2 {
		l, err := b.pool.Acquire(nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Release(pool.Success)
	}
	if got := gate.Room("qwen", 0); got != 0 {
		t.Fatalf("Room with a share saturated = %d, want 0", got)
	}
	if got := gate.Room("qwen-a", 0); got != 4 {
		t.Fatalf("Room of the idle share's own model = %d, want 4", got)
	}
}

// TestBatchLineCostBudgetAtBatchPrice: a line's cost budget is charged
// what the ledger records for it, the batch price.
func TestBatchLineCostBudgetAtBatchPrice(t *testing.T) {
	s := newBatchSite(t, siteOpts{slots: 4, price: map[string]ledger.Price{"qwen": {Input: 1e6, Output: 2e6, Batch: 0.5}},
		budgets: []limits.Budget{{Unit: limits.UnitCost, Amount: 1e9, Per: limits.PerDay}}})
	d := gateway.NewBatchDispatcher(s.mount.Handler, 0)
	res, err := d.Dispatch(context.Background(), line(alice, openai.PathChatCompletions, chatBody))
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("line: %d %v %s", res.StatusCode, err, res.Body)
	}
	var used float64
	for _, b := range s.budgets.Budgets() {
		if b.Name == "alice" && b.Unit == string(limits.UnitCost) {
			used = b.Used
		}
	}
	recs := s.recorded(t, res)
	if len(recs) != 1 {
		t.Fatalf("%d records", len(recs))
	}
	full := float64(recs[0].PromptTokens) + 2*float64(recs[0].CompletionTokens)
	if used != recs[0].Cost || used != full*0.5 {
		t.Fatalf("cost budget charged %v, ledger %v; want both the batch price %v", used, recs[0].Cost, full*0.5)
	}
}
