package tenancy

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/auth"
	"github.com/llmedge/llmedge/internal/redistest"
	"github.com/llmedge/llmedge/limits"
)

// testAdmitter is an admitter over a per-instance limiter, with users.
func testAdmitter(t testing.TB, lim *limits.Limiter, users []auth.User) *limitsAdmitter {
	t.Helper()
	hash, _ := auth.HashPasswordCost("pw", 4)
	for i := range users {
		users[i].PasswordHash = hash
	}
	us, err := auth.NewUsers(users)
	if err != nil {
		t.Fatal(err)
	}
	return &limitsAdmitter{svc: &Service{}, lim: lim, l: Limits{Default: limits.Limit{RPM: 3, TPM: 10000},
		APIKey: limits.Limit{Concurrency: 1}, Models: map[string]limits.Limit{"gemma": {RPM: 1}}, ReplyReservation: 100, Users: us}}
}

func admission(user, keyID, model string) *Admission {
	return &Admission{Principal: &auth.Principal{Subject: user, KeyID: keyID}, Model: model,
		PromptBytes: 300, Messages: 2}
}

func TestAdmitter(t *testing.T) {
	lim := limits.New(limits.Options{})
	ad := testAdmitter(t, lim, []auth.User{
		{Name: "alice"},
		{Name: "vip", Limits: &limits.Limit{RPM: 100}},
		{Name: "free", Limits: &limits.Limit{RPM: limits.Off, TPM: limits.Off}},
	})
	ctx := context.Background()
	admit := func(a *Admission) (Ticket, *api.Error, http.Header) {
		h := http.Header{}
		tk, err := ad.Admit(ctx, a, h)
		return tk, err, h
	}

	// The default: 3 rpm per user, with headers on every answer.
	for i := 0; i < 3; i++ {
		tk, err, h := admit(admission("alice", "", "qwen"))
		if err != nil {
			t.Fatalf("request %d: %v", i+1, err)
		}
		if h.Get("x-ratelimit-limit-requests") != "3" || h.Get("x-ratelimit-remaining-requests") != string(rune('2'-i)) ||
			h.Get("x-ratelimit-limit-tokens") != "10000" || h.Get("x-ratelimit-reset-requests") == "" {
			t.Errorf("request %d headers %v", i+1, h)
		}
		tk.Settle(Settlement{Served: true, UsageKnown: true, Usage: api.Usage{PromptTokens: 50, CompletionTokens: 50}})
	}
	_, err, h := admit(admission("alice", "", "qwen"))
	if err == nil || err.Status != 429 {
		t.Fatalf("4th request: %v", err)
	}
	if d, _ := err.Detail.(string); !strings.Contains(d, "user 'alice'") || !strings.Contains(d, "3 requests per minute") {
		t.Errorf("detail %q", d)
	}
	if err.Headers["Retry-After"] != "20" || err.Headers["Retry-After-Ms"] == "" {
		t.Errorf("retry headers %v", err.Headers)
	}
	if h.Get("x-ratelimit-remaining-requests") != "0" {
		t.Errorf("refusal headers %v", h)
	}

	// A user's own limits override the default; off means none at all.
	for i := 0; i < 10; i++ {
		if _, err, _ := admit(admission("vip", "", "qwen")); err != nil {
			t.Fatalf("vip: %v", err)
		}
	}
	tk, err, h := admit(admission("free", "", "qwen"))
	if err != nil || tk != nil || len(h) != 0 {
		t.Errorf("free user: ticket %v err %v headers %v", tk, err, h)
	}

	// A model's limits apply per user on that model, on top of the user's.
	if _, err, _ := admit(admission("vip", "", "gemma")); err != nil {
		t.Fatal(err)
	}
	_, err, _ = admit(admission("vip", "", "gemma"))
	if d, _ := err.Detail.(string); err == nil || !strings.Contains(d, "user 'vip' on model 'gemma': 1 requests per minute") {
		t.Errorf("model limit: %v", err)
	}

	// An API key's limits apply to the key.
	held, err, _ := admit(admission("vip", "key1", "qwen"))
	if err != nil {
		t.Fatal(err)
	}
	_, err, _ = admit(admission("vip", "key1", "qwen"))
	if d, _ := err.Detail.(string); err == nil || !strings.Contains(d, "API key 'key1': 1 requests at once") {
		t.Errorf("key limit: %v", err)
	}
	held.Settle(Settlement{})
	if _, err, _ := admit(admission("vip", "key1", "qwen")); err != nil {
		t.Errorf("after the key's request ended: %v", err)
	}
}

// Settling charges the real usage: the replica's count, the estimate of
// what was relayed, or nothing when no replica was called.
func TestTicketSettlement(t *testing.T) {
	prompt := limits.EstimateTokens(300, 2)
	tests := []struct {
		name string
		s    Settlement
		want int
	}{
		{"not served: all refunded", Settlement{Status: 429}, 0},
		{"usage known", Settlement{Served: true, UsageKnown: true, Usage: api.Usage{PromptTokens: 70, CompletionTokens: 30}}, 100},
		{"client left mid-stream", Settlement{Served: true, Status: 499, Relayed: 400}, prompt + 100},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lim := limits.New(limits.Options{})
			ad := testAdmitter(t, lim, []auth.User{{Name: "alice"}})
			tk, err := ad.Admit(context.Background(), admission("alice", "", "qwen"), http.Header{})
			if err != nil {
				t.Fatal(err)
			}
			tk.Settle(tt.s)
			_, tokens, _ := lim.Load(context.Background(), limits.Bucket{Key: limits.UserKey("alice"), Limit: ad.l.Default})
			if d := tokens - float64(tt.want); d > 2 || d < -2 {
				t.Errorf("charged %.0f tokens, want %d", tokens, tt.want)
			}
		})
	}
}

func TestAdmitterUnavailable(t *testing.T) {
	srv := redistest.Start(t)
	lim := limits.New(limits.Options{Redis: srv.Client(t), FailClosed: true, Timeout: 100 * time.Millisecond})
	defer lim.Close()
	ad := testAdmitter(t, lim, []auth.User{{Name: "alice"}})
	srv.Kill()
	_, err := ad.Admit(context.Background(), admission("alice", "", "qwen"), http.Header{})
	if err == nil || err.Status != 503 || err.Headers["Retry-After"] == "" {
		t.Fatalf("closed mode with Redis down: %v", err)
	}
	svc := &Service{cfg: Config{Redis: &Redis{}}, state: &state{limiter: lim}}
	if _, st, _ := svc.RedisHealth(); st != "down" {
		t.Errorf("readiness %q", st)
	}
}

// A request no limit applies to costs no allocation.
func TestAdmitterNoLimitAllocatesNothing(t *testing.T) {
	lim := limits.New(limits.Options{})
	ad := testAdmitter(t, lim, []auth.User{{Name: "free", Limits: &limits.Limit{RPM: limits.Off, TPM: limits.Off}}})
	a := admission("free", "", "qwen")
	h := http.Header{}
	if n := testing.AllocsPerRun(1000, func() { _, _ = ad.Admit(context.Background(), a, h) }); n != 0 {
		t.Errorf("%v allocations", n)
	}
}

// BenchmarkLimitCheck is what limits cost one request through the
// gateway's admitter: resolving its buckets (user default, and the model's
// limit), the decision, the headers and the settlement — with no limit
// applying, per instance, and shared in Redis on loopback:
//
//	go test ./tenancy -run '^$' -bench LimitCheck -benchtime 20000x
func BenchmarkLimitCheck(b *testing.B) {
	run := func(b *testing.B, ad *limitsAdmitter, user string) {
		a := admission(user, "", "gemma")
		lat := make([]time.Duration, 0, b.N)
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			start := time.Now()
			h := http.Header{}
			tk, err := ad.Admit(context.Background(), a, h)
			if err != nil {
				b.Fatal(err)
			}
			if tk != nil {
				tk.Settle(Settlement{Served: true, UsageKnown: true, Usage: api.Usage{PromptTokens: 100, CompletionTokens: 100}})
			}
			lat = append(lat, time.Since(start))
		}
		b.StopTimer()
		slices.Sort(lat)
		b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds())/1e3, "p50-µs")
		b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds())/1e3, "p99-µs")
	}
	huge := limits.Limit{RPM: 1 << 30, TPM: 1 << 30, Concurrency: 1 << 20}
	users := []auth.User{{Name: "free", Limits: &limits.Limit{RPM: limits.Off, TPM: limits.Off}}, {Name: "alice"}}
	b.Run("no-limit", func(b *testing.B) {
		ad := testAdmitter(b, limits.New(limits.Options{}), users)
		ad.l.Models = nil
		run(b, ad, "free")
	})
	b.Run("local", func(b *testing.B) {
		ad := testAdmitter(b, limits.New(limits.Options{}), users)
		ad.l.Default, ad.l.Models = huge, map[string]limits.Limit{"gemma": huge}
		run(b, ad, "alice")
	})
	b.Run("redis", func(b *testing.B) {
		srv := redistest.Start(b)
		lim := limits.New(limits.Options{Redis: srv.Client(b), Prefix: "bench:"})
		lim.Start()
		defer lim.Close()
		ad := testAdmitter(b, lim, users)
		ad.l.Default, ad.l.Models = huge, map[string]limits.Limit{"gemma": huge}
		run(b, ad, "alice")
	})
}

// TestAdmitterFallback: a request admitted for its model and then sent to
// a fallback is checked against the fallback's own limits alone: the
// user's and key's were taken once, for the model asked for.
func TestAdmitterFallback(t *testing.T) {
	ad := testAdmitter(t, limits.New(limits.Options{}), []auth.User{{Name: "alice"}})
	ctx := context.Background()
	fallback := func(model string) (Ticket, *api.Error) {
		a := admission("alice", "key1", model)
		a.Fallback = true
		return ad.Admit(ctx, a, http.Header{})
	}
	// No limit of qwen's own: nothing to take, whatever the user's.
	for i := 0; i < 5; i++ {
		if tk, err := fallback("qwen"); tk != nil || err != nil {
			t.Fatalf("fallback to qwen %d: ticket %v, err %v", i+1, tk, err)
		}
	}
	// gemma's 1 rpm applies, and the user's 3 rpm was not charged: her
	// own requests still pass three times.
	if _, err := fallback("gemma"); err != nil {
		t.Fatalf("first fallback to gemma: %v", err)
	}
	if _, err := fallback("gemma"); err == nil || err.Status != 429 {
		t.Fatalf("second fallback to gemma: %v, want gemma's 429", err)
	}
	for i := 0; i < 3; i++ {
		tk, err := ad.Admit(ctx, admission("alice", "", "qwen"), http.Header{})
		if err != nil {
			t.Fatalf("alice's own request %d: %v", i+1, err)
		}
		tk.Settle(Settlement{})
	}
}

func TestJoin(t *testing.T) {
	var n int
	count := ticketFunc(func(Settlement) { n++ })
	if Join(nil, nil) != nil || Join(count, nil) == nil || Join(nil, count) == nil {
		t.Fatal("Join of nil tickets")
	}
	Join(count, count).Settle(Settlement{})
	if n != 2 {
		t.Fatalf("a joined ticket settled %d of 2", n)
	}
}

type ticketFunc func(Settlement)

func (f ticketFunc) Settle(s Settlement) { f(s) }
