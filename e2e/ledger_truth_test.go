package e2e

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"io"
	"math"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llmedge/llmedge/internal/freeport"
	"github.com/llmedge/llmedge/internal/pgtest"
)

// tokenChunk matches a stream's chunk that carries text (the first
// carries the role and no text).
var tokenChunk = regexp.MustCompile(`"content":"[^"]`)

// ledgerStore is a ledger the truth tests run on: its lines of the
// llmedge option, the gateway's environment, and how to read its table
// while the gateway runs.
type ledgerStore struct {
	name    string
	options string
	env     []string
	open    func(t *testing.T, g *Gateway) *sql.DB
}

// eachLedgerStore runs f on the SQLite ledger, then on a PostgreSQL one
// (skipped, saying so, without PostgreSQL's binaries).
func eachLedgerStore(t *testing.T, f func(t *testing.T, st ledgerStore)) {
	t.Run("sqlite", func(t *testing.T) {
		f(t, ledgerStore{name: "sqlite", options: "\t\tledger {\n\t\t\tflush_interval 100ms\n\t\t}",
			open: func(t *testing.T, g *Gateway) *sql.DB {
				// The default path, under the configured storage; WAL mode
				// lets a reader in while the gateway writes.
				db, err := sql.Open("sqlite", filepath.Join(g.data, "llmedge", "ledger.db"))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { db.Close() })
				return db
			}})
	})
	t.Run("postgres", func(t *testing.T) {
		pg := pgtest.Start(t)
		f(t, ledgerStore{name: "postgres", options: "\t\tledger postgres {env.LEDGER_DSN} {\n\t\t\tflush_interval 100ms\n\t\t}",
			env: []string{"LEDGER_DSN=" + pg.DSN},
			open: func(t *testing.T, _ *Gateway) *sql.DB {
				db, err := sql.Open("pgx", pg.DSN)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { db.Close() })
				return db
			}})
	})
}

// ledgerRow is what the truth tests read of a record.
type ledgerRow struct {
	requestID, clientID, user, model, served string
	status, prompt, completion               int
	cost                                     float64
}

// ledgerRows reads the records that where selects (SQL the test wrote).
func ledgerRows(t *testing.T, db *sql.DB, where string) []ledgerRow {
	t.Helper()
	rows, err := db.Query(`SELECT request_id, client_request_id, user_name, model, served_model, status, prompt_tokens, completion_tokens, cost
		FROM usage_records WHERE ` + where + ` ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []ledgerRow
	for rows.Next() {
		var r ledgerRow
		if err := rows.Scan(&r.requestID, &r.clientID, &r.user, &r.model, &r.served, &r.status, &r.prompt, &r.completion, &r.cost); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// waitRows waits until where selects n records, and returns them.
func waitRows(t *testing.T, db *sql.DB, where string, n int) []ledgerRow {
	t.Helper()
	var got []ledgerRow
	waitFor(t, 10*time.Second, func() bool { got = ledgerRows(t, db, where); return len(got) >= n })
	if len(got) != n {
		t.Fatalf("%d records where %s, want %d: %+v", len(got), where, n, got)
	}
	return got
}

// chatWith posts an OpenAI chat request with headers (name, value, ...).
func (g *Gateway) chatWith(t *testing.T, c *http.Client, cred, body string, header ...string) *http.Response {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, "POST", g.Base+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if cred != "" {
		req.Header.Set("Authorization", "Bearer "+cred)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// TestLedgerTellsTheTruth (issue 32, item 7), on SQLite and PostgreSQL:
// a fallback's record names the model that answered and is priced at its
// price, as the cost budget is charged; a stream the client leaves after
// most of it is recorded and charged with the tokens the engine
// generated; the gateway's own id is the record's, the client's
// X-Request-ID kept beside it without markup; and a burst of requests
// without a credential or of HTTP/2 streams reset before their body
// writes no rows, but is counted.
func TestLedgerTellsTheTruth(t *testing.T) {
	eachLedgerStore(t, func(t *testing.T, st ledgerStore) {
		gemma := startSim(t, "-tokens", "6")
		long := startSim(t, "-tokens", "40", "-itl", "25ms")
		down := fmt.Sprintf("http://127.0.0.1:%d", freeport.Must(t)) // nothing listens there
		g := startGateway(t, GatewayConfig{
			Models: map[string]string{
				"qwen":  "\t\t\tstatic " + down + "\n\t\t\tprice 1 1 1\n\t\t\tfallback gemma",
				"gemma": staticModel(gemma) + "\n\t\t\tprice 50 50 50",
				"long":  staticModel(long) + "\n\t\t\tprice 1 1 1",
			},
			Options: st.options + "\n\t\tuser fb " + demoHash + "\n\t\tuser st " + demoHash +
				"\n\t\tlimits {\n\t\t\tbudget cost 1000 per month\n\t\t\tbudget tokens 100000000 per month\n\t\t}",
			Env: st.env,
		})
		db := st.open(t, g)
		hello := `"messages":[{"role":"user","content":"Hello there, how are you?"}]`
		budget := func(user, unit string) float64 {
			return metricValue(t, adminMetrics(t, g), `llmedge_budget_used{name="`+user+`",per="month",scope="user",unit="`+unit+`"}`)
		}

		t.Run("a fallback is priced at the model that answered", func(t *testing.T) {
			tok := g.Token(t, "fb", "demo", "")
			var cc chatCompletion
			resp := g.chatWith(t, g.Client, tok, `{"model":"qwen",`+hello+`}`)
			if resp.StatusCode != 200 || !strings.HasSuffix(resp.Header.Get("Llmedge-Route"), "model=gemma; fallback_from=qwen") {
				t.Fatalf("%s, route %q", resp.Status, resp.Header.Get("Llmedge-Route"))
			}
			readJSON(t, resp, &cc)
			rec := waitRows(t, db, "user_name = 'fb'", 1)[0]
			tokens := cc.Usage.PromptTokens + cc.Usage.CompletionTokens
			want := float64(tokens) * 50 / 1e6 // gemma's price, not qwen's (1)
			if rec.model != "qwen" || rec.served != "gemma" || rec.prompt+rec.completion != tokens || math.Abs(rec.cost-want) > 1e-12 {
				t.Fatalf("record %+v; want qwen served by gemma, %d tokens, cost %g", rec, tokens, want)
			}
			waitFor(t, 5*time.Second, func() bool { return math.Abs(budget("fb", "cost")-want) < 1e-12 })
		})

		t.Run("a stream the client leaves is recorded with what was generated", func(t *testing.T) {
			tok := g.Token(t, "st", "demo", "")
			charged := 0
			// leave reads 30 of the 40 tokens' chunks of a stream, leaves,
			// and returns the request's record, the nth of st's.
			leave := func(t *testing.T, nth int) ledgerRow {
				resp := g.chatWith(t, g.Client, tok, `{"model":"long",`+hello+`,"stream":true}`)
				if resp.StatusCode != 200 {
					t.Fatalf("stream: %s", resp.Status)
				}
				sc := bufio.NewScanner(resp.Body)
				chunks := 0
				for chunks < 30 && sc.Scan() {
					if strings.HasPrefix(sc.Text(), "data: {") && tokenChunk.MatchString(sc.Text()) {
						chunks++
					}
				}
				resp.Body.Close()
				if chunks != 30 {
					t.Fatalf("read %d chunks before leaving, want 30", chunks)
				}
				rec := waitRows(t, db, "user_name = 'st'", nth)[nth-1]
				if want := float64(rec.prompt+rec.completion) / 1e6; rec.status != 499 || rec.prompt == 0 || math.Abs(rec.cost-want) > 1e-12 {
					t.Fatalf("record %+v; want 499, a prompt, cost %g", rec, want)
				}
				// The budget is charged what the record says.
				charged += rec.prompt + rec.completion
				waitFor(t, 5*time.Second, func() bool { return budget("st", "tokens") == float64(charged) })
				return rec
			}

			// By default the engine's request ends with the client's: the
			// tokens relayed are recorded, the engine having stopped.
			cancelled := long.Stats(t).Cancelled
			rec := leave(t, 1)
			if rec.completion < 30 || rec.completion >= 40 {
				t.Fatalf("record %+v; want the 30 or so tokens relayed", rec)
			}
			waitFor(t, 5*time.Second, func() bool { return long.Stats(t).Cancelled == cancelled+1 })
			t.Logf("no drain: the client read 30 of 40 tokens, %d recorded, the engine's request cancelled", rec.completion)

			// With usage_drain, the engine's stream is read on to its end,
			// within the drain: its own count of all 40 is recorded.
			g.Reload(t, func(c string) string {
				return strings.Replace(c, "\t\tuser st ", "\t\tusage_drain 3s\n\t\tuser st ", 1)
			})
			completed := long.Stats(t).Completed
			rec = leave(t, 2)
			if rec.completion != 40 {
				t.Fatalf("record %+v; want the engine's 40 completion tokens", rec)
			}
			if got := long.Stats(t).Completed; got != completed+1 {
				t.Errorf("the engine completed %d answers, want 1", got-completed)
			}
			t.Logf("usage_drain 3s: the client read 30 of 40 tokens, %d recorded, from the engine's usage", rec.completion)
		})

		t.Run("the gateway's id is the record's, the client's kept beside it", func(t *testing.T) {
			tok := g.Token(t, "demo", "demo", "")
			var ids []string
			for _, id := range []string{"dup-1", "dup-1", `<script>alert("x")</script>`} {
				resp := g.chatWith(t, g.Client, tok, `{"model":"gemma",`+hello+`}`, "X-Request-ID", id)
				readJSON(t, resp, nil)
				got := resp.Header.Get("X-Request-ID")
				if resp.StatusCode != 200 || len(got) != 32 || got == id {
					t.Fatalf("%s: X-Request-ID %q for the client's %q", resp.Status, got, id)
				}
				ids = append(ids, got)
			}
			recs := waitRows(t, db, "user_name = 'demo'", 3)
			seen := map[string]bool{}
			for i, rec := range recs {
				want := []string{"dup-1", "dup-1", ""}[i]
				if rec.requestID != ids[i] || seen[rec.requestID] || rec.clientID != want {
					t.Errorf("record %d: id %q, client's %q; want %q (the answer's), %q", i, rec.requestID, rec.clientID, ids[i], want)
				}
				seen[rec.requestID] = true
			}
			if n := len(ledgerRows(t, db, "request_id LIKE '%<%' OR client_request_id LIKE '%<%'")); n != 0 {
				t.Errorf("%d records hold markup", n)
			}
		})

		t.Run("refusals and resets before the body write no rows", func(t *testing.T) {
			tok := g.Token(t, "demo", "demo", "")
			rowsBefore := len(ledgerRows(t, db, "1 = 1"))
			m := adminMetrics(t, g)
			unauth := metricValue(t, m, `llmedge_ledger_unrecorded_total{reason="unauthenticated"}`)
			unread := metricValue(t, m, `llmedge_ledger_unrecorded_total{reason="before_body"}`)
			const burst = 100

			// Without a credential, all at once.
			var wg sync.WaitGroup
			for range burst {
				wg.Add(1)
				go func() {
					defer wg.Done()
					resp := g.chatWith(t, g.Client, "", `{"model":"gemma",`+hello+`}`)
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != 401 {
						t.Errorf("no credential: %s", resp.Status)
					}
				}()
			}
			wg.Wait()

			// HTTP/2 streams with a valid credential, reset before their
			// body is sent.
			h2 := &http.Client{Transport: &http.Transport{
				TLSClientConfig: g.Client.Transport.(*http.Transport).TLSClientConfig.Clone(), ForceAttemptHTTP2: true}}
			defer h2.CloseIdleConnections()
			if resp := g.chatWith(t, h2, tok, `{"model":"gemma",`+hello+`}`, "X-Request-ID", "h2-check"); resp.ProtoMajor != 2 || resp.StatusCode != 200 {
				t.Fatalf("HTTP/2 check: %s %s", resp.Proto, resp.Status)
			} else {
				readJSON(t, resp, nil)
			}
			for range burst {
				wg.Add(1)
				go func() {
					defer wg.Done()
					body, w := io.Pipe()
					defer w.Close()
					ctx, cancel := context.WithCancel(context.Background())
					req, _ := http.NewRequestWithContext(ctx, "POST", g.Base+"/v1/chat/completions", body)
					req.ContentLength = 4096
					req.Header.Set("Authorization", "Bearer "+tok)
					time.AfterFunc(300*time.Millisecond, cancel) // RST_STREAM, the body unsent
					if resp, err := h2.Do(req); err == nil {
						resp.Body.Close()
						t.Errorf("a reset stream got %s", resp.Status)
					}
				}()
			}
			wg.Wait()

			// A request after the bursts: once its record is written,
			// everything the bursts could have written is too.
			if resp := g.chatWith(t, g.Client, tok, `{"model":"gemma",`+hello+`}`, "X-Request-ID", "after-bursts"); resp.StatusCode != 200 {
				t.Fatalf("after the bursts: %s", resp.Status)
			} else {
				readJSON(t, resp, nil)
			}
			waitFor(t, 10*time.Second, func() bool { return len(ledgerRows(t, db, "1 = 1")) >= rowsBefore+2 })
			time.Sleep(500 * time.Millisecond) // five flush intervals more
			if n := len(ledgerRows(t, db, "1 = 1")); n != rowsBefore+2 {
				t.Errorf("%d records after the bursts, want %d (the two answered requests)", n, rowsBefore+2)
			}
			waitRows(t, db, "client_request_id = 'after-bursts'", 1)
			waitFor(t, 10*time.Second, func() bool {
				m := adminMetrics(t, g)
				return metricValue(t, m, `llmedge_ledger_unrecorded_total{reason="unauthenticated"}`) == max(unauth, 0)+burst &&
					metricValue(t, m, `llmedge_ledger_unrecorded_total{reason="before_body"}`) == max(unread, 0)+burst
			})
		})
	})
}
