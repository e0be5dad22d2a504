package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmedge/llmedge/internal/redistest"
	"github.com/llmedge/llmedge/limits"
)

// budgetBody is a chat request whose reservation is known: its prompt's
// estimate plus the model's max_tokens (20 below).
func budgetBody(model string, stream bool) map[string]any { return chatBody(model, stream) }

// budgetReservation is what budgetBody reserves: "hello there" (11 bytes,
// one message) and a reply cap of 20.
var budgetReservation = limits.EstimateTokens(len("hello there"), 1) + 20

// TestBudgetsAcrossInstances: two gateways sharing Redis hold a user's
// monthly token budget exactly: clients on both, many at once, get answers
// whose usage sums to at most the budget plus one request's reservation;
// then every door refuses with 429 budget_exceeded in its own shape, with
// the reset time (the first of next month) in the message and Retry-After.
// The budget's use is a metric.
func TestBudgetsAcrossInstances(t *testing.T) {
	const budget = 1500
	srv := redistest.Start(t)
	sim := startSim(t, "-tokens", "20")
	cfg := GatewayConfig{Data: t.TempDir(), // one storage: one signing key
		Models:  map[string]string{"qwen": staticModel(sim) + "\n\t\t\tmax_tokens 20", "gemma": staticModel(sim)},
		Options: patientRedisOption(srv, "\t\tlimits {\n\t\t\tbudget tokens "+strconv.Itoa(budget)+" per month\n\t\t\tbudget_warning 50%\n\t\t}"),
	}
	a, b := startGateway(t, cfg), startGateway(t, cfg)
	tok := a.Token(t, "demo", "demo", "")

	var used, answered atomic.Int64
	var refusals sync.Map // one 429 per worker
	var wg sync.WaitGroup
	for i := range 8 {
		g := []*Gateway{a, b}[i%2]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; n < 200; n++ { // bounded: a budget that never refuses fails below
				r := g.infer(context.Background(), nil, tok, budgetBody("qwen", i%3 == 0))
				if r.status == 429 {
					refusals.Store(i, r)
					return
				}
				if err := r.ok(i%3 == 0); err != nil {
					t.Errorf("worker %d: %v", i, err)
					return
				}
				answered.Add(1)
				used.Add(int64(usageOf(t, r.body)))
			}
		}()
	}
	wg.Wait()
	noRedisFallback(t, a)
	noRedisFallback(t, b)
	if got := used.Load(); got > budget+int64(budgetReservation) || got < budget-8*int64(budgetReservation) {
		t.Errorf("%d answers used %d tokens of a %d budget; want at most %d (one reservation of %d over)",
			answered.Load(), got, budget, budget+budgetReservation, budgetReservation)
	}
	t.Logf("%d answers used %d tokens of a %d token budget (a reservation is %d)", answered.Load(), used.Load(), budget, budgetReservation)

	reset := limits.PeriodEnd(limits.PerMonth, time.Now()).Format(time.RFC3339)
	n := 0
	refusals.Range(func(_, v any) bool {
		n++
		r := v.(result)
		checkBudgetRefusal(t, "native", r.header, detailOf(r), reset)
		var body map[string]any
		_ = json.Unmarshal(r.body, &body)
		if body["error"] != "budget_exceeded" || body["reset_at"] != reset {
			t.Errorf("native refusal body %s", r.body)
		}
		return true
	})
	if n != 8 {
		t.Errorf("%d workers were refused, want all 8", n)
	}

	// OpenAI's door, in its shape.
	resp := b.v1(t, "POST", "/v1/chat/completions", tok, `{"model":"qwen","messages":[{"role":"user","content":"hi"}]}`)
	var oe openAIError
	readJSON(t, resp, &oe)
	if resp.StatusCode != 429 || oe.Error == nil || str(oe.Error.Code) != "budget_exceeded" || oe.Error.Type != "requests" {
		t.Fatalf("OpenAI door: %d %+v", resp.StatusCode, oe.Error)
	}
	checkBudgetRefusal(t, "openai", resp.Header, oe.Error.Message, reset)

	// Anthropic's door, in its shape.
	resp = a.anthropicPost(t, a.Base, "/v1/messages", `{"model":"qwen","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`, "X-Api-Key", tok)
	var ae struct {
		Type  string `json:"type"`
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	readJSON(t, resp, &ae)
	if resp.StatusCode != 429 || ae.Type != "error" || ae.Error.Type != "rate_limit_error" {
		t.Fatalf("Anthropic door: %d %+v", resp.StatusCode, ae)
	}
	checkBudgetRefusal(t, "anthropic", resp.Header, ae.Error.Message, reset)

	// Another user's budget is its own.
	alice := a.Token(t, "alice", "demo", "")
	if r := b.infer(context.Background(), nil, alice, budgetBody("qwen", false)); r.status != 200 {
		t.Fatalf("alice: %d %s", r.status, r.body)
	}

	m := adminMetrics(t, a)
	if !strings.Contains(m, `llmedge_budget_used_ratio{name="demo",per="month",scope="user",unit="tokens"}`) ||
		!strings.Contains(m, "llmedge_budget_warning_ratio 0.5") ||
		!strings.Contains(m, `llmedge_ratelimit_refusals_total{limit="budget",scope="user"}`) {
		t.Errorf("metrics lack the budget's figures:\n%s", grepLines(m, "budget"))
	}
}

// checkBudgetRefusal checks a budget refusal's message and Retry-After.
func checkBudgetRefusal(t *testing.T, door string, h http.Header, msg, reset string) {
	t.Helper()
	want := "budget_exceeded: the monthly token budget of user 'demo' (1500 tokens) is spent"
	if !strings.HasPrefix(msg, want) || !strings.HasSuffix(msg, "it resets at "+reset) {
		t.Errorf("%s: message %q, want %q... resetting at %s", door, msg, want, reset)
	}
	ra, err := strconv.Atoi(h.Get("Retry-After"))
	until := time.Until(limits.PeriodEnd(limits.PerMonth, time.Now())).Seconds()
	if err != nil || float64(ra) < until-60 || float64(ra) > until+60 {
		t.Errorf("%s: Retry-After %q, want about %.0f s", door, h.Get("Retry-After"), until)
	}
}

// usageOf reads the tokens (prompt and completion) of a native answer,
// plain or streamed (its done event carries the usage).
func usageOf(t *testing.T, body []byte) int {
	t.Helper()
	var ans inferenceResponse
	if json.Unmarshal(body, &ans) == nil {
		if n := ans.Usage.PromptTokens + ans.Usage.CompletionTokens; n > 0 {
			return n
		}
	}
	lines := strings.Split(string(body), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		data, ok := strings.CutPrefix(lines[i], "data: ")
		if !ok || !strings.Contains(data, `"usage"`) {
			continue
		}
		if json.Unmarshal([]byte(data), &ans) == nil {
			if n := ans.Usage.PromptTokens + ans.Usage.CompletionTokens; n > 0 {
				return n
			}
		}
	}
	t.Errorf("an answer without usage: %s", lastLines(string(body), 4))
	return 0
}

// TestTeams: a team's models cap its members' (403 naming the team), its
// limits hold for all its members together, on top of their own (a
// member's request must pass both), whether they come with a token or an
// API key put in the team with create-key --team; the ledger records the
// team, and `llmedge usage --by team` reports it.
func TestTeams(t *testing.T) {
	sim := startSim(t)
	users := filepath.Join(t.TempDir(), "users.json")
	addUserTo(t, users, "carol", "pw", "--models", "qwen,gemma")
	setUserTeam(t, users, "carol", "research")
	cfg := GatewayConfig{
		Models: map[string]string{"qwen": staticModel(sim), "gemma": staticModel(sim)},
		Options: "\t\tusers_file " + users + "\n\t\tledger {\n\t\t\tflush_interval 100ms\n\t\t}\n" +
			"\t\tteam research {\n\t\t\tmodels qwen\n\t\t\trpm 4\n\t\t}\n" +
			"\t\tteam ops\n" +
			"\t\tuser bob " + demoHash + " qwen gemma {\n\t\t\tteam research\n\t\t}",
	}
	g := startGateway(t, cfg)
	bob := g.Token(t, "bob", "demo", "")

	// The team's models cap bob's: gemma is refused, naming the team.
	st, e, _ := inferWith(t, g, bob, "gemma")
	if st != 403 || !strings.Contains(e.detailText(), "team 'research' may not use model 'gemma'") {
		t.Fatalf("bob on gemma: %d %q", st, e.detailText())
	}
	// An API key of demo (no team) put in the team: capped the same way.
	key := createKey(t, g, "--user", "demo", "--team", "research", "--name", "research-bot")
	if st, e, _ := inferWith(t, g, key, "gemma"); st != 403 || !strings.Contains(e.detailText(), "team 'research'") {
		t.Fatalf("the team's key on gemma: %d %q", st, e.detailText())
	}
	if _, errOut, err := llmedgeCmd(t, "", "create-key", "--address", g.adminAddr(), "--user", "demo", "--team", "nope"); err == nil ||
		!strings.Contains(errOut, "is not configured") {
		t.Fatalf("create-key --team nope: %v %s", err, errOut)
	}

	// The team's 4 rpm hold for bob, carol (users file) and the key together.
	carol := g.Token(t, "carol", "pw", "")
	statuses := map[int]int{}
	var lastDetail string
	for _, cred := range []string{bob, carol, key, bob, carol, key} {
		st, e, _ := inferWith(t, g, cred, "qwen")
		statuses[st]++
		if st == 429 {
			lastDetail = e.detailText()
		}
	}
	if statuses[200] != 4 || statuses[429] != 2 || !strings.Contains(lastDetail, "Rate limit reached for team 'research': 4 requests per minute") {
		t.Fatalf("six requests of the team's members: %v, last refusal %q", statuses, lastDetail)
	}
	// demo outside the team is not affected.
	if st, e, _ := inferWith(t, g, g.Token(t, "demo", "demo", ""), "gemma"); st != 200 {
		t.Fatalf("demo: %d %q", st, e.detailText())
	}

	// The ledger has the team of each admitted request (the 403s and 429s
	// are counted in a metric, not recorded).
	waitFor(t, 10*time.Second, func() bool {
		return usageCmd(t, "--address", g.adminAddr(), "--by", "team")[""].Requests >= 1
	})
	byTeam := usageCmd(t, "--address", g.adminAddr(), "--by", "team")
	if byTeam["research"].Requests != 4 || byTeam[""].Requests != 1 {
		t.Errorf("usage by team: %+v, want research 4 and none 1", byTeam)
	}
	// A team that is not configured (the users file names one) refuses its
	// members rather than lifting the caps.
	setUserTeam(t, users, "carol", "typo")
	waitFor(t, 10*time.Second, func() bool {
		st, e, _ := inferWith(t, g, carol, "qwen")
		return st == 403 && strings.Contains(e.detailText(), "team 'typo' is not configured")
	})
}

// setUserTeam rewrites a user's team in a users file.
func setUserTeam(t *testing.T, file, user, team string) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Users []map[string]any `json:"users"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	for _, u := range f.Users {
		if u["username"] == user {
			u["team"] = team
		}
	}
	out, _ := json.Marshal(f)
	tmp := file + ".tmp"
	if err := os.WriteFile(tmp, out, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, file); err != nil {
		t.Fatal(err)
	}
}

// TestBudgetReconciledFromTheLedger: a budget's counter that Redis lost
// (a flushed or new Redis) starts again from the ledger's records of the
// period, so the budget still holds what was used before.
func TestBudgetReconciledFromTheLedger(t *testing.T) {
	srv := redistest.Start(t)
	sim := startSim(t, "-tokens", "20")
	g := startGateway(t, GatewayConfig{
		Models: map[string]string{"qwen": staticModel(sim) + "\n\t\t\tmax_tokens 20", "gemma": staticModel(sim)},
		Options: redisOption(srv, "\t\tledger {\n\t\t\tflush_interval 100ms\n\t\t}\n"+
			"\t\tlimits {\n\t\t\tbudget tokens 100000 per day\n\t\t}"),
	})
	tok := g.Token(t, "demo", "demo", "")
	total := 0
	for range 3 {
		r := g.infer(context.Background(), nil, tok, budgetBody("qwen", false))
		if err := r.ok(false); err != nil {
			t.Fatal(err)
		}
		total += usageOf(t, r.body)
	}
	waitFor(t, 10*time.Second, func() bool { return usageCmd(t, "--address", g.adminAddr())[""].Requests >= 3 })
	rc := srv.Client(t)
	ctx := context.Background()
	key := "llmedge:b:td" + time.Now().UTC().Format("20060102") + ":u:demo"
	if v, err := rc.Get(ctx, key).Float64(); err != nil || int(v) != total {
		t.Fatalf("counter %s = %v (%v), want the answers' %d", key, v, err, total)
	}
	if err := rc.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	r := g.infer(ctx, nil, tok, budgetBody("qwen", false))
	if err := r.ok(false); err != nil {
		t.Fatal(err)
	}
	total += usageOf(t, r.body)
	if v, err := rc.Get(ctx, key).Float64(); err != nil || int(v) != total {
		t.Fatalf("after Redis lost it, counter = %v (%v), want the ledger's plus the last answer's: %d", v, err, total)
	}

	// The status page's data: the budget, and today's top users from the
	// ledger (read in the background: polled for).
	var snap struct {
		Budgets []struct {
			Scope, Name, Unit, Per, Line string
			Used                         float64
			Warning                      bool
		} `json:"budgets"`
		UsageToday *struct {
			Users []struct {
				Name     string
				Requests int64
				Tokens   int64
			} `json:"users"`
		} `json:"usage_today"`
	}
	waitFor(t, 45*time.Second, func() bool {
		resp, err := http.Get(g.Admin + "/llmedge/status.json")
		if err != nil {
			return false
		}
		_ = json.NewDecoder(resp.Body).Decode(&snap)
		resp.Body.Close()
		return snap.UsageToday != nil && len(snap.UsageToday.Users) > 0
	})
	if len(snap.Budgets) != 1 || snap.Budgets[0].Name != "demo" || snap.Budgets[0].Scope != "user" || int(snap.Budgets[0].Used) != total ||
		snap.Budgets[0].Warning || !strings.Contains(snap.Budgets[0].Line, "user demo: "+strconv.Itoa(total)+" of its tokens budget of 100000 per day used") {
		t.Errorf("status budgets %+v", snap.Budgets)
	}
	if u := snap.UsageToday.Users[0]; u.Name != "demo" || u.Requests < 3 {
		t.Errorf("status usage today %+v", snap.UsageToday.Users)
	}
}
