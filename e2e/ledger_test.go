package e2e

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	_ "modernc.org/sqlite" // to look into the ledger's file

	"github.com/llmedge/llmedge/internal/pgtest"
)

// usageSum is one line of `llmedge usage --format json`.
type usageSum struct {
	Key              string  `json:"key"`
	Requests         int64   `json:"requests"`
	PromptTokens     int64   `json:"prompt_tokens"`
	CompletionTokens int64   `json:"completion_tokens"`
	Cost             float64 `json:"cost"`
}

// usageCmd runs `llmedge usage --format json` with args and returns its
// sums by key.
func usageCmd(t *testing.T, args ...string) map[string]usageSum {
	t.Helper()
	out, errOut, err := llmedgeCmd(t, "", append([]string{"usage", "--format", "json"}, args...)...)
	if err != nil {
		t.Fatalf("usage %v: %v\n%s", args, err, errOut)
	}
	var res struct {
		Usage []usageSum `json:"usage"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("usage %v printed %q: %v", args, out, err)
	}
	m := map[string]usageSum{}
	for _, s := range res.Usage {
		m[s.Key] = s
	}
	return m
}

// TestLedgerCountsWhatAnswersSaid: mixed requests through the native and
// OpenAI doors (plain, streamed), by an access token and an API key, are
// each recorded once in the SQLite ledger at its default path (those
// refused before admission, with a 4xx, are counted in a metric, not
// recorded); its sums of tokens equal the sums of the usage the
// answers reported, per model and per user, the priced model's cost is
// its tokens at its price, and `llmedge usage` reports the same from the
// admin API and, once the gateway has stopped (flushing), from the file.
func TestLedgerCountsWhatAnswersSaid(t *testing.T) {
	sim := startSim(t)
	g := startGateway(t, GatewayConfig{
		Models: map[string]string{
			// The batch price is batch lines' alone: online requests pay
			// the whole price.
			"qwen":  staticModel(sim) + "\n\t\t\tprice 1 0.5 2 batch 0.5",
			"gemma": staticModel(sim),
		},
		Options: "\t\tledger {\n\t\t\tflush_interval 100ms\n\t\t}",
	})
	tok := g.Token(t, "demo", "demo", "")
	alice := g.Token(t, "alice", "demo", "")
	key := createKey(t, g, "--user", "demo", "--name", "ledger-bot")

	type tally struct{ requests, prompt, completion int64 }
	byModel, byUser := map[string]*tally{}, map[string]*tally{}
	count := func(model, user string, prompt, completion int) {
		for _, m := range []struct {
			m map[string]*tally
			k string
		}{{byModel, model}, {byUser, user}} {
			if m.m[m.k] == nil {
				m.m[m.k] = &tally{}
			}
			m.m[m.k].requests++
			m.m[m.k].prompt += int64(prompt)
			m.m[m.k].completion += int64(completion)
		}
	}
	hello := `"messages":[{"role":"user","content":"Hello there, how are you?"}]`

	const rounds = 3
	for range rounds {
		// Native, plain, access token.
		var plain inferenceResponse
		if resp := g.Infer(t, tok, withModel("qwen")); resp.StatusCode != 200 {
			t.Fatalf("native plain: %s", resp.Status)
		} else {
			readJSON(t, resp, &plain)
		}
		count("qwen", "demo", plain.Usage.PromptTokens, plain.Usage.CompletionTokens)

		// Native, streamed, API key: the usage is in the done event.
		resp := g.Infer(t, key, withModel("gemma", "stream", true))
		evs := readEvents(t, resp.Body)
		resp.Body.Close()
		var done inferenceResponse
		if last := evs[len(evs)-1]; resp.StatusCode != 200 || last.Name != "done" || json.Unmarshal([]byte(last.Data), &done) != nil {
			t.Fatalf("native stream: %s, last event %+v", resp.Status, last)
		}
		count("gemma", "demo", done.Usage.PromptTokens, done.Usage.CompletionTokens)

		// OpenAI, plain, API key.
		var cc chatCompletion
		if resp := g.v1(t, "POST", "/v1/chat/completions", key, `{"model":"qwen",`+hello+`}`); resp.StatusCode != 200 {
			t.Fatalf("openai plain: %s", resp.Status)
		} else if readJSON(t, resp, &cc); cc.Usage == nil {
			t.Fatal("openai plain: no usage")
		}
		count("qwen", "demo", cc.Usage.PromptTokens, cc.Usage.CompletionTokens)

		// OpenAI, streamed with usage, access token: the usage is in the
		// last chunk.
		resp = g.v1(t, "POST", "/v1/chat/completions", tok, `{"model":"gemma",`+hello+`,"stream":true,"stream_options":{"include_usage":true}}`)
		evs = readEvents(t, resp.Body)
		resp.Body.Close()
		var prompt, completion int
		for _, ev := range evs {
			var chunk chatCompletion
			if ev.Comment || ev.Data == "[DONE]" || json.Unmarshal([]byte(ev.Data), &chunk) != nil || chunk.Usage == nil {
				continue
			}
			prompt, completion = chunk.Usage.PromptTokens, chunk.Usage.CompletionTokens
		}
		if resp.StatusCode != 200 || completion == 0 {
			t.Fatalf("openai stream: %s, usage %d/%d", resp.Status, prompt, completion)
		}
		count("gemma", "demo", prompt, completion)

		// OpenAI, refused: no messages (400, before the model is known):
		// not admitted, not recorded.
		if resp := g.v1(t, "POST", "/v1/chat/completions", tok, `{"model":"qwen"}`); resp.StatusCode != 400 {
			t.Fatalf("openai without messages: %s", resp.Status)
		} else {
			resp.Body.Close()
		}

		// Native, refused: alice may not use gemma (403): not recorded.
		if resp := g.Infer(t, alice, withModel("gemma")); resp.StatusCode != 403 {
			t.Fatalf("alice on gemma: %s", resp.Status)
		} else {
			resp.Body.Close()
		}

		// Without a credential (401): nobody's usage, not recorded.
		if resp := g.Infer(t, "", withModel("qwen")); resp.StatusCode != 401 {
			t.Fatalf("no credential: %s", resp.Status)
		} else {
			resp.Body.Close()
		}
	}
	recorded := int64(rounds * 4)
	m := adminMetrics(t, g)
	for reason, want := range map[string]float64{"unauthenticated": rounds, "before_body": rounds, "refused": rounds} {
		if got := metricValue(t, m, `llmedge_ledger_unrecorded_total{reason="`+reason+`"}`); got != want {
			t.Errorf("llmedge_ledger_unrecorded_total{reason=%q} = %g, want %g", reason, got, want)
		}
	}
	price := func(s *tally) float64 { return (float64(s.prompt)*1 + float64(s.completion)*2) / 1e6 }

	check := func(t *testing.T, from string, args ...string) {
		t.Helper()
		total := usageCmd(t, args...)[""]
		var want tally
		for _, s := range byModel {
			want.requests, want.prompt, want.completion = want.requests+s.requests, want.prompt+s.prompt, want.completion+s.completion
		}
		if total.Requests != recorded || total.PromptTokens != want.prompt || total.CompletionTokens != want.completion {
			t.Fatalf("%s: total %+v, want %d requests, %d prompt and %d completion tokens", from, total, recorded, want.prompt, want.completion)
		}
		for by, expect := range map[string]map[string]*tally{"model": byModel, "user": byUser} {
			got := usageCmd(t, append(args, "--by", by)...)
			if len(got) != len(expect) {
				t.Fatalf("%s: by %s: %+v, want the keys of %v", from, by, got, expect)
			}
			for k, w := range expect {
				g := got[k]
				if g.Requests != w.requests || g.PromptTokens != w.prompt || g.CompletionTokens != w.completion {
					t.Fatalf("%s: by %s, %q: %+v, want %+v", from, by, k, g, *w)
				}
			}
		}
		// The priced model costs its tokens at its price; the other nothing.
		models := usageCmd(t, append(args, "--by", "model")...)
		if c, w := models["qwen"].Cost, price(byModel["qwen"]); w == 0 || math.Abs(c-w) > 1e-12 {
			t.Fatalf("%s: qwen's cost %g, want %g", from, c, w)
		}
		if c := models["gemma"].Cost; c != 0 {
			t.Fatalf("%s: gemma (no price) cost %g", from, c)
		}
		// Filters: one user, one model.
		if a := usageCmd(t, append(args, "--user", "alice")...); len(a) != 0 {
			t.Fatalf("%s: --user alice (refused, never admitted): %+v", from, a)
		}
		if q := usageCmd(t, append(args, "--model", "qwen", "--since", "1h")...)[""]; q.Requests != byModel["qwen"].requests {
			t.Fatalf("%s: --model qwen --since 1h: %+v", from, q)
		}
		if none := usageCmd(t, append(args, "--until", "2000-01-01")...); len(none) != 0 {
			t.Fatalf("%s: --until 2000-01-01: %+v", from, none)
		}
	}

	// The writer flushes every 100 ms: wait for the last request's record.
	admin := []string{"--address", g.adminAddr()}
	waitFor(t, 10*time.Second, func() bool { return usageCmd(t, admin...)[""].Requests >= recorded })
	check(t, "admin API", admin...)

	// The other formats, and the admin API's refusal of a bad filter.
	out, _, err := llmedgeCmd(t, "", "usage", "--by", "user", "--format", "csv", "--address", g.adminAddr())
	if err != nil || !strings.HasPrefix(out, "user,requests,prompt_tokens,cached_tokens,completion_tokens,cost\n") || strings.Contains(out, "alice") || !strings.Contains(out, "\ndemo,") {
		t.Fatalf("usage --format csv: %v\n%s", err, out)
	}
	out, _, err = llmedgeCmd(t, "", "usage", "--by", "model", "--address", g.adminAddr())
	if err != nil || !strings.Contains(out, "REQUESTS") || !strings.Contains(out, "qwen") {
		t.Fatalf("usage (table): %v\n%s", err, out)
	}
	resp, err := http.Get(g.Admin + "/llmedge/usage?by=week")
	if err != nil {
		t.Fatal(err)
	}
	body := readJSON(t, resp, nil)
	if resp.StatusCode != 400 || !strings.Contains(string(body), "want day, model, user, team or key") {
		t.Fatalf("admin API, by=week: %s %s", resp.Status, body)
	}

	// Reloads: the configuration loaded second holds a record for its
	// hour-long flush interval; when the third replaces it, it writes the
	// record before letting go of the database (both configurations have
	// the file open meanwhile).
	g.Reload(t, func(c string) string { return strings.Replace(c, "flush_interval 100ms", "flush_interval 1h", 1) })
	var held inferenceResponse
	if resp := g.Infer(t, tok, withModel("qwen")); resp.StatusCode != 200 {
		t.Fatalf("native plain after the reload: %s", resp.Status)
	} else {
		readJSON(t, resp, &held)
	}
	count("qwen", "demo", held.Usage.PromptTokens, held.Usage.CompletionTokens)
	recorded++
	g.Reload(t, func(c string) string { return strings.Replace(c, "flush_interval 1h", "flush_interval 100ms", 1) })
	waitFor(t, 10*time.Second, func() bool { return usageCmd(t, admin...)[""].Requests >= recorded })
	check(t, "after two reloads", admin...)

	// Stopped, the gateway has written everything; the file reads alike.
	g.Stop(t)
	db := filepath.Join(g.data, "llmedge", "ledger.db") // under the configured storage
	check(t, "the file", "--db", db)

	// What the file holds: the API key's id on its requests, never the
	// key, nor the access token.
	conn, err := sql.Open("sqlite", db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var withKey, doors int
	if err := conn.QueryRow(`SELECT COUNT(*) FROM usage_records WHERE key_id != ''`).Scan(&withKey); err != nil || withKey != rounds*2 {
		t.Fatalf("records with a key id: %d, %v; want %d", withKey, err, rounds*2)
	}
	if err := conn.QueryRow(`SELECT COUNT(DISTINCT door) FROM usage_records`).Scan(&doors); err != nil || doors != 2 {
		t.Fatalf("doors recorded: %d, %v; want native and openai", doors, err)
	}
	rows, err := conn.Query(`SELECT request_id, user_name, key_id, model, alias, replica, door FROM usage_records`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var f [7]string
		if err := rows.Scan(&f[0], &f[1], &f[2], &f[3], &f[4], &f[5], &f[6]); err != nil {
			t.Fatal(err)
		}
		all := fmt.Sprint(f)
		if strings.Contains(all, key[5:]) || strings.Contains(all, tok) {
			t.Fatalf("a record holds a credential: %v", f)
		}
	}
}

// TestLedgerPostgres: two gateways keep one ledger in a real PostgreSQL
// (`ledger postgres <dsn>`, the DSN from the environment): either one's
// `llmedge usage` counts the requests both answered, with the tokens
// their answers reported.
func TestLedgerPostgres(t *testing.T) {
	pg := pgtest.Start(t)
	sim := startSim(t)
	cfg := GatewayConfig{
		Models:  map[string]string{"qwen": staticModel(sim), "gemma": staticModel(sim)},
		Options: "\t\tledger postgres {env.LEDGER_DSN} {\n\t\t\tflush_interval 100ms\n\t\t}",
		Env:     []string{"LEDGER_DSN=" + pg.DSN},
	}
	a, b := startGateway(t, cfg), startGateway(t, cfg)
	var prompt, completion int64
	for _, g := range []*Gateway{a, b, a} {
		var out inferenceResponse
		resp := g.Infer(t, g.Token(t, "demo", "demo", ""), withModel("qwen"))
		if resp.StatusCode != 200 {
			t.Fatalf("infer: %s", resp.Status)
		}
		readJSON(t, resp, &out)
		prompt, completion = prompt+int64(out.Usage.PromptTokens), completion+int64(out.Usage.CompletionTokens)
	}
	waitFor(t, 10*time.Second, func() bool { return usageCmd(t, "--address", b.adminAddr())[""].Requests >= 3 })
	for _, g := range []*Gateway{a, b} {
		got := usageCmd(t, "--address", g.adminAddr(), "--by", "user")["demo"]
		if got.Requests != 3 || got.PromptTokens != prompt || got.CompletionTokens != completion {
			t.Fatalf("usage on %s: %+v, want 3 requests, %d prompt and %d completion tokens", g.Base, got, prompt, completion)
		}
	}
}
