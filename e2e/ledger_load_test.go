package e2e

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // PostgreSQL, to sum the table directly

	"github.com/llmedge/llmedge/internal/pgtest"
)

// The ledger under load: what two instances record of many mixed requests
// (both doors, plain and streamed, retried on another replica, continued
// after a replica broke mid-stream, failed at the replicas) equals, token
// for token, what their answers said; PostgreSQL going away under load
// loses no record and fails no request.

// mixedRequest sends the i-th request of the mix to g and returns the
// tokens its answer reported (0 for a failure: nothing was served).
func mixedRequest(ctx context.Context, g *Gateway, tok string, i int) (status int, prompt, completion int64, err error) {
	var path, body string
	stream := false
	switch i % 5 {
	case 0: // native, streamed
		path, body, stream = "/tasks/assistant_inference", `{"model_type":"qwen","stream":true,"messages":[{"role":"user","content":"tell me a story `+fmt.Sprint(i)+`"}]}`, true
	case 1: // OpenAI, plain
		path, body = "/v1/chat/completions", `{"model":"qwen","messages":[{"role":"user","content":"hello `+fmt.Sprint(i)+`"}]}`
	case 2: // OpenAI, streamed with its usage
		path, body, stream = "/v1/chat/completions", `{"model":"qwen","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"count to `+fmt.Sprint(i)+`"}]}`, true
	case 3: // failed: every replica of gemma fails
		path, body = "/tasks/assistant_inference", `{"model_type":"gemma","messages":[{"role":"user","content":"x"}]}`
	default: // native, plain
		path, body = "/tasks/assistant_inference", `{"model_type":"qwen","messages":[{"role":"user","content":"hi `+fmt.Sprint(i)+`"}]}`
	}
	req, _ := http.NewRequestWithContext(ctx, "POST", g.Base+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := g.Client.Do(req)
	if err != nil {
		return 0, 0, 0, err
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(resp.Body); err != nil {
		return resp.StatusCode, 0, 0, err
	}
	p, c, ok := answerUsage(buf.Bytes(), stream)
	if resp.StatusCode == 200 && !ok {
		return resp.StatusCode, 0, 0, fmt.Errorf("request %d: an answer without usage: %s", i, lastLines(buf.String(), 3))
	}
	return resp.StatusCode, p, c, nil
}

// answerUsage reads the usage of a plain answer (its body) or a stream
// (the last event that carries one), in either door's shape.
func answerUsage(b []byte, stream bool) (prompt, completion int64, ok bool) {
	var u struct {
		Usage *struct {
			Prompt     int64 `json:"prompt_tokens"`
			Completion int64 `json:"completion_tokens"`
		} `json:"usage"`
	}
	if !stream {
		if json.Unmarshal(b, &u) == nil && u.Usage != nil {
			return u.Usage.Prompt, u.Usage.Completion, true
		}
		return 0, 0, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		data, found := strings.CutPrefix(line, "data: ")
		if !found || !strings.Contains(data, `"usage"`) {
			continue
		}
		u.Usage = nil
		if json.Unmarshal([]byte(data), &u) == nil && u.Usage != nil {
			prompt, completion, ok = u.Usage.Prompt, u.Usage.Completion, true
		}
	}
	return prompt, completion, ok
}

// ledgerLoad is the mix's models: qwen on a good replica, one failing
// half its requests (retried elsewhere) and one breaking its streams
// after 3 tokens (continued elsewhere); gemma on a replica failing every
// request.
func ledgerLoad(t *testing.T) map[string]string {
	good := startSim(t, "-tokens", "12")
	flaky := startSim(t, "-tokens", "12", "-error-rate", "0.5")
	breaking := startSim(t, "-tokens", "12", "-drop-after", "3")
	failing := startSim(t, "-error-rate", "1")
	return map[string]string{
		"qwen":  staticModel(good, flaky, breaking) + "\n\t\t\tlb_policy round_robin\n\t\t\tprice 1 0.5 2",
		"gemma": staticModel(failing) + "\n\t\t\tmax_attempts 1",
	}
}

// tally is what the clients saw.
type tally struct {
	requests, failed, prompt, completion atomic.Int64
}

// runMix sends n mixed requests over gws from workers clients; during
// pause (when set), it calls it once at a third of the way.
func runMix(t *testing.T, gws []*Gateway, tok string, n, workers int, during func()) *tally {
	t.Helper()
	var tl tally
	var next atomic.Int64
	var once sync.Once
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if during != nil && i == n/3 {
					once.Do(during)
				}
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				st, p, c, err := mixedRequest(ctx, gws[(i+w)%len(gws)], tok, i)
				cancel()
				tl.requests.Add(1)
				switch {
				case err != nil:
					t.Errorf("request %d: %v", i, err)
				case i%5 == 3:
					if st != 502 && st != 503 {
						t.Errorf("request %d to the failing model: status %d", i, st)
					}
					tl.failed.Add(1)
				case st != 200:
					t.Errorf("request %d: status %d", i, st)
				}
				tl.prompt.Add(p)
				tl.completion.Add(c)
			}
		}()
	}
	wg.Wait()
	return &tl
}

// checkLedger waits until the ledger holds n records (through g's admin
// API) and compares its sums with what the clients saw.
func checkLedger(t *testing.T, gws []*Gateway, n int64, tl *tally) {
	t.Helper()
	total := func() usageSum {
		var s usageSum
		for _, g := range gws {
			u := usageCmd(t, "--address", g.adminAddr())[""]
			s.Requests, s.PromptTokens, s.CompletionTokens, s.Cost = s.Requests+u.Requests, s.PromptTokens+u.PromptTokens,
				s.CompletionTokens+u.CompletionTokens, s.Cost+u.Cost
		}
		return s
	}
	var got usageSum
	poll(60*time.Second, func() bool { got = total(); return got.Requests >= n })
	if got.Requests != n || got.PromptTokens != tl.prompt.Load() || got.CompletionTokens != tl.completion.Load() {
		t.Errorf("ledger: %d requests, %d prompt and %d completion tokens; the answers said %d requests, %d and %d",
			got.Requests, got.PromptTokens, got.CompletionTokens, n, tl.prompt.Load(), tl.completion.Load())
	}
	// The cost is the tokens at qwen's price (1, 2 per million; nothing cached).
	if want := float64(tl.prompt.Load()+2*tl.completion.Load()) / 1e6; got.Cost < want*0.999999 || got.Cost > want*1.000001 {
		t.Errorf("ledger cost %v, want %v", got.Cost, want)
	}
	t.Logf("%d requests (%d failed at the replicas): %d prompt and %d completion tokens, recorded exactly",
		n, tl.failed.Load(), tl.prompt.Load(), tl.completion.Load())
}

// TestLedgerMixedLoadPostgres: 1,000 mixed requests on two instances
// sharing one PostgreSQL ledger; `llmedge usage` equals the answers and a
// SQL sum over the table.
func TestLedgerMixedLoadPostgres(t *testing.T) {
	pg := pgtest.Start(t)
	cfg := GatewayConfig{Data: t.TempDir(), Models: ledgerLoad(t),
		Options: "\t\tledger postgres {env.LEDGER_DSN} {\n\t\t\tflush_interval 100ms\n\t\t}",
		Env:     []string{"LEDGER_DSN=" + pg.DSN}}
	a, b := startGateway(t, cfg), startGateway(t, cfg)
	tok := a.Token(t, "demo", "demo", "")
	const n = 1000
	tl := runMix(t, []*Gateway{a, b}, tok, n, 8, nil)
	checkLedger(t, []*Gateway{a}, n, tl) // one database: either gateway reports both
	checkMixHappened(t, a, b)

	// The command's numbers are a SQL sum over the table.
	db, err := sql.Open("pgx", pg.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var rows, prompt, completion int64
	var cost float64
	if err := db.QueryRow(`SELECT COUNT(*), SUM(prompt_tokens), SUM(completion_tokens), SUM(cost) FROM usage_records`).
		Scan(&rows, &prompt, &completion, &cost); err != nil {
		t.Fatal(err)
	}
	for _, by := range []string{"", "model", "user", "day"} {
		args := []string{"--address", b.adminAddr()}
		if by != "" {
			args = append(args, "--by", by)
		}
		var s usageSum
		for _, u := range usageCmd(t, args...) {
			s.Requests, s.PromptTokens, s.CompletionTokens, s.Cost = s.Requests+u.Requests, s.PromptTokens+u.PromptTokens,
				s.CompletionTokens+u.CompletionTokens, s.Cost+u.Cost
		}
		if s.Requests != rows || s.PromptTokens != prompt || s.CompletionTokens != completion || s.Cost < cost*0.999999 || s.Cost > cost*1.000001 {
			t.Errorf("usage --by %q adds up to %+v; SQL: %d rows, %d, %d, %v", by, s, rows, prompt, completion, cost)
		}
	}
}

// TestLedgerMixedLoadSQLite: the same 1,000 requests on two instances,
// each with its own embedded SQLite ledger: together they hold them all.
func TestLedgerMixedLoadSQLite(t *testing.T) {
	models := ledgerLoad(t)
	data := t.TempDir()
	opts := "\t\tledger sqlite %s {\n\t\t\tflush_interval 100ms\n\t\t}"
	a := startGateway(t, GatewayConfig{Data: data, Models: models, Options: fmt.Sprintf(opts, t.TempDir()+"/a.db")})
	b := startGateway(t, GatewayConfig{Data: data, Models: models, Options: fmt.Sprintf(opts, t.TempDir()+"/b.db")})
	tok := a.Token(t, "demo", "demo", "")
	const n = 1000
	tl := runMix(t, []*Gateway{a, b}, tok, n, 8, nil)
	checkLedger(t, []*Gateway{a, b}, n, tl)
	checkMixHappened(t, a, b)
}

// checkMixHappened checks that the mix retried requests and continued
// streams (the instances' metrics), so that the ledger was tested on them.
func checkMixHappened(t *testing.T, gws ...*Gateway) {
	t.Helper()
	var m strings.Builder
	for _, g := range gws {
		m.WriteString(adminMetrics(t, g))
	}
	for _, name := range []string{`llmedge_retries_total{model_type="qwen"}`, `llmedge_continuations_total{model_type="qwen",outcome="completed"}`} {
		if !strings.Contains(m.String(), name) {
			t.Errorf("the mix made no %s:\n%s", name, grepLines(m.String(), "llmedge_retries_total")+grepLines(m.String(), "llmedge_continuations_total"))
		}
	}
}

// TestLedgerPostgresOutageUnderLoad: PostgreSQL killed while two
// instances serve, and started again: no request fails, and once it is
// back every record the buffers held is written.
func TestLedgerPostgresOutageUnderLoad(t *testing.T) {
	pg := pgtest.Start(t)
	cfg := GatewayConfig{Data: t.TempDir(), Models: ledgerLoad(t),
		Options: "\t\tledger postgres {env.LEDGER_DSN} {\n\t\t\tflush_interval 100ms\n\t\t}",
		Env:     []string{"LEDGER_DSN=" + pg.DSN}}
	// The suite's PostgreSQL commits without waiting for its WAL (fast,
	// and lossy when killed): this test kills it, so the gateways' sessions
	// ask for commits that are in the WAL when they succeed, as in
	// production.
	cfg.Env = []string{"LEDGER_DSN=" + pg.DSN + "&synchronous_commit=on"}
	a, b := startGateway(t, cfg), startGateway(t, cfg)
	tok := a.Token(t, "demo", "demo", "")
	const n = 600
	tl := runMix(t, []*Gateway{a, b}, tok, n, 4, pg.Kill)
	// Down for the last two thirds of the load: the writers kept what
	// they could not write. Now it comes back.
	for _, g := range []*Gateway{a, b} {
		if !strings.Contains(g.Log(), "ledger") {
			t.Errorf("%s logged nothing of the ledger's failed writes", g.Base)
		}
	}
	pg.Restart(t)
	checkLedger(t, []*Gateway{a}, n, tl)
	for _, g := range []*Gateway{a, b} {
		if strings.Contains(g.Log(), "dropped") {
			t.Errorf("%s dropped records:\n%s", g.Base, grepLines(g.Log(), "dropped"))
		}
	}
}
