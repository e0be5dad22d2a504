package llmapp

import (
	"context"
	"encoding/base64"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"go.uber.org/zap"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/auth"
	"github.com/llmedge/llmedge/gateway"
	"github.com/llmedge/llmedge/internal/redistest"
	"github.com/llmedge/llmedge/limits"
)

func TestTenancyCaddyfileErrors(t *testing.T) {
	tests := []struct {
		name, input, want string
	}{
		{"redis without URL", "llmedge {\nredis\n}", "want a URL"},
		{"redis http URL", "llmedge {\nredis http://x:6379\n}", "redis:// or rediss://"},
		{"redis unknown option", "llmedge {\nredis redis://x:6379 {\ndb 3\n}\n}", `unrecognized redis option "db"`},
		{"failure mode", "llmedge {\non_redis_failure maybe\n}", "want open or closed"},
		{"zero rpm", "llmedge {\nlimits {\nrpm 0\n}\n}", "want a whole number ≥ 1 or off"},
		{"negative tpm", "llmedge {\nlimits {\ntpm -5\n}\n}", "want a whole number ≥ 1 or off"},
		{"unknown limit", "llmedge {\nlimits {\nrph 5\n}\n}", `unrecognized option "rph"`},
		{"limits with args", "llmedge {\nlimits 5\n}", "want a block"},
		{"limits twice", "llmedge {\nlimits {\nrpm 1\n}\nlimits {\nrpm 2\n}\n}", "given twice"},
		{"user block option", "llmedge {\nuser a $2a$10$x qwen {\nquota 5\n}\n}", `unrecognized option "quota" for user "a"`},
		{"model limits", "llmedge {\nmodel qwen {\nlimits {\nconcurrency none\n}\n}\n}", "concurrency: want a whole number"},
		{"queue order", "llmedge {\nmodel qwen {\nqueue {\norder lifo\n}\n}\n}", "want fair or fifo"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := new(App).UnmarshalCaddyfile(caddyfile.NewTestDispenser(tt.input))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want one containing %q", err, tt.want)
			}
		})
	}
}

func TestTenancyCaddyfile(t *testing.T) {
	a := new(App)
	err := a.UnmarshalCaddyfile(caddyfile.NewTestDispenser(`llmedge {
		limits {
			rpm 60
			concurrency off
			api_key {
				tpm 5000
			}
		}
		user bob $2a$10$x {
			limits {
				rpm 5
			}
		}
		user carol $2a$10$x qwen
	}`))
	if err != nil {
		t.Fatal(err)
	}
	if a.RateLimits.Limit != (limits.Limit{RPM: 60, Concurrency: limits.Off}) || *a.RateLimits.APIKey != (limits.Limit{TPM: 5000}) {
		t.Errorf("limits %+v api_key %+v", a.RateLimits.Limit, a.RateLimits.APIKey)
	}
	if len(a.Users) != 2 || a.Users[0].Limits == nil || a.Users[0].Limits.RPM != 5 || a.Users[1].Limits != nil ||
		!slices.Equal(a.Users[1].Models, []string{"qwen"}) {
		t.Errorf("users %+v", a.Users)
	}
}

// testAdmitter is an admitter over a per-instance limiter, with users.
func testAdmitter(t testing.TB, lim *limits.Limiter, users []auth.User) *admitter {
	t.Helper()
	hash, _ := auth.HashPasswordCost("pw", 4)
	for i := range users {
		users[i].PasswordHash = hash
	}
	us, err := auth.NewUsers(users)
	if err != nil {
		t.Fatal(err)
	}
	app := &App{users: us, logger: zap.NewNop()}
	return &admitter{app: app, lim: lim, def: limits.Limit{RPM: 3, TPM: 10000},
		keyDef: limits.Limit{Concurrency: 1}, models: map[string]limits.Limit{"gemma": {RPM: 1}}, reply: 100}
}

func admission(user, keyID, model string) *gateway.Admission {
	return &gateway.Admission{Principal: &auth.Principal{Subject: user, KeyID: keyID}, Model: model,
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
	admit := func(a *gateway.Admission) (gateway.Ticket, *api.Error, http.Header) {
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
		tk.Settle(gateway.Settlement{Served: true, UsageKnown: true, Usage: api.Usage{PromptTokens: 50, CompletionTokens: 50}})
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
	held.Settle(gateway.Settlement{})
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
		s    gateway.Settlement
		want int
	}{
		{"not served: all refunded", gateway.Settlement{Status: 429}, 0},
		{"usage known", gateway.Settlement{Served: true, UsageKnown: true, Usage: api.Usage{PromptTokens: 70, CompletionTokens: 30}}, 100},
		{"client left mid-stream", gateway.Settlement{Served: true, Status: 499, Relayed: 400}, prompt + 100},
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
			_, tokens, _ := lim.Load(context.Background(), limits.Bucket{Key: limits.UserKey("alice"), Limit: ad.def})
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
	if d := (redisDependency{lim}).Check(); d.Status != "down" {
		t.Errorf("readiness %+v", d)
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

func TestTokenID(t *testing.T) {
	payload := base64.RawURLEncoding.EncodeToString([]byte(`{"sub":"alice","jti":"abc","exp":1700000000}`))
	tests := []struct {
		in, jti string
		exp     time.Time
	}{
		{"eyJhbGciOiJFZERTQSJ9." + payload + ".sig", "abc", time.Unix(1700000000, 0)},
		{"plain-jti", "plain-jti", time.Time{}},
		{"a.!!!.c", "a.!!!.c", time.Time{}},
	}
	for _, tt := range tests {
		jti, exp := tokenID(tt.in)
		if jti != tt.jti || !exp.Equal(tt.exp) {
			t.Errorf("tokenID(%q) = %q %v", tt.in, jti, exp)
		}
	}
}

func TestRedisOptions(t *testing.T) {
	t.Setenv("LLMEDGE_TEST_REDIS_PW", "s3cret")
	repl := caddy.NewReplacer()
	a := &App{Redis: &RedisConfig{URL: "redis://:{env.LLMEDGE_TEST_REDIS_PW}@127.0.0.1:6390/3"}}
	o, key, err := a.redisOptions(repl)
	if err != nil {
		t.Fatal(err)
	}
	if o.Password != "s3cret" || o.DB != 3 || o.MaxRetries != -1 || o.ReadTimeout != limits.DefaultTimeout {
		t.Errorf("options %+v", o)
	}
	if strings.Contains(key, "s3cret") {
		t.Error("the pool key holds the password")
	}
	a.Redis.Password = "{env.LLMEDGE_TEST_REDIS_PW}x"
	if o, _, _ := a.redisOptions(repl); o.Password != "s3cretx" {
		t.Errorf("password option: %q", o.Password)
	}
	a.Redis = &RedisConfig{URL: "redis://:hunter2@[bad"}
	if _, _, err := a.redisOptions(repl); err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("bad URL error %v", err)
	}
	a.Redis = &RedisConfig{URL: "redis://x:1", CAFile: "/nonexistent"}
	if _, _, err := a.redisOptions(repl); err == nil || !strings.Contains(err.Error(), "rediss://") {
		t.Errorf("ca_file with redis://: %v", err)
	}
}

// BenchmarkLimitCheck is what limits cost one request through the
// gateway's admitter: resolving its buckets (user default, and the model's
// limit), the decision, the headers and the settlement — with no limit
// applying, per instance, and shared in Redis on loopback:
//
//	go test ./modules/llmapp -run '^$' -bench LimitCheck -benchtime 20000x
func BenchmarkLimitCheck(b *testing.B) {
	run := func(b *testing.B, ad *admitter, user string) {
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
				tk.Settle(gateway.Settlement{Served: true, UsageKnown: true, Usage: api.Usage{PromptTokens: 100, CompletionTokens: 100}})
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
		ad.models = nil
		run(b, ad, "free")
	})
	b.Run("local", func(b *testing.B) {
		ad := testAdmitter(b, limits.New(limits.Options{}), users)
		ad.def, ad.models = huge, map[string]limits.Limit{"gemma": huge}
		run(b, ad, "alice")
	})
	b.Run("redis", func(b *testing.B) {
		srv := redistest.Start(b)
		lim := limits.New(limits.Options{Redis: srv.Client(b), Prefix: "bench:"})
		lim.Start()
		defer lim.Close()
		ad := testAdmitter(b, lim, users)
		ad.def, ad.models = huge, map[string]limits.Limit{"gemma": huge}
		run(b, ad, "alice")
	})
}
