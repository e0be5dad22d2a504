package llmapp

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"math"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/auth"
	"github.com/llmedge/llmedge/gateway"
	"github.com/llmedge/llmedge/limits"
	"github.com/llmedge/llmedge/metrics"
	"github.com/llmedge/llmedge/revocation"
)

// RedisConfig is the `redis` option: the shared state of every gateway
// instance (tenants' limits, revocations).
type RedisConfig struct {
	// URL is redis://[user:password@]host:port[/db] or rediss:// (TLS);
	// placeholders such as {env.REDIS_PASSWORD} are replaced.
	URL string `json:"url"`
	// Username and Password, when set, replace the URL's; placeholders
	// are replaced (keep secrets out of the Caddyfile).
	Username string `json:"username,omitempty"`
	Password string `json:"password,omitempty"`
	// Timeout bounds every Redis call on the request path. Default 250ms.
	Timeout caddy.Duration `json:"timeout,omitempty"`
	// Prefix starts every key and channel. Default "llmedge:".
	Prefix string `json:"prefix,omitempty"`
	// CAFile verifies a rediss:// server with this CA instead of the
	// system's.
	CAFile string `json:"ca_file,omitempty"`
}

// RateLimitsConfig is the `limits` block of the llmedge option: every
// user's default limits (rpm, tpm, concurrency), an API key's, and the
// reply size reserved for a request that sets no max_tokens.
type RateLimitsConfig struct {
	limits.Limit
	// APIKey limits each API key, on top of its user's limits.
	APIKey *limits.Limit `json:"api_key,omitempty"`
	// DefaultMaxTokens is the reply size reserved against tpm when
	// neither the request nor the model sets max_tokens. Default 1024.
	DefaultMaxTokens int `json:"default_max_tokens,omitempty"`
}

// Failure modes when Redis is unreachable.
const (
	RedisFailOpen   = "open"
	RedisFailClosed = "closed"
	// DefaultReplyReservation is DefaultMaxTokens' default.
	DefaultReplyReservation = 1024
	defaultRedisPrefix      = "llmedge:"
	// DefaultRevocationRefresh is how often revocations are read from
	// storage (without Redis), so they reach every instance within it.
	DefaultRevocationRefresh = time.Second
)

// tenancyState outlives configurations: the Redis client, the limiter
// (its counters and its tickets in flight) and the revocation list are
// the same before and after a reload with the same settings.
type tenancyState struct {
	client  *redis.Client // nil without Redis
	limiter *limits.Limiter
}

func (s *tenancyState) Destruct() error {
	s.limiter.Close()
	if s.client != nil {
		return s.client.Close()
	}
	return nil
}

var (
	tenancyPool = caddy.NewUsagePool()
	// revoked is the process's list of revoked tokens: every configuration
	// checks it, and loads the shared one into it.
	revoked = &revocation.List{}
)

// provisionTenancy sets up Redis, the limiter, the admitter and the
// revocations, after auth and the models.
func (a *App) provisionTenancy(ctx caddy.Context, repl *caddy.Replacer) error {
	switch a.OnRedisFailure {
	case "", RedisFailOpen, RedisFailClosed:
	default:
		return fmt.Errorf("on_redis_failure %q: want open or closed", a.OnRedisFailure)
	}
	opts, key, err := a.redisOptions(repl)
	if err != nil {
		return err
	}
	logger := a.logger
	v, _, err := tenancyPool.LoadOrNew(key, func() (caddy.Destructor, error) {
		st := &tenancyState{}
		lo := limits.Options{FailClosed: a.OnRedisFailure == RedisFailClosed,
			OnRedisState: func(up bool, err error) {
				if up {
					logger.Info("redis reachable again: limits are shared again")
				} else {
					logger.Error("redis unreachable: limits are enforced per instance until it answers",
						zap.Bool("fail_closed", a.OnRedisFailure == RedisFailClosed), zap.Error(err))
				}
			}}
		if opts != nil {
			st.client = redis.NewClient(opts)
			lo.Redis, lo.Prefix, lo.Timeout = st.client, a.redisPrefix(), a.redisTimeout()
		}
		st.limiter = limits.New(lo)
		st.limiter.Start()
		return st, nil
	})
	if err != nil {
		return err
	}
	a.tenancyKey, a.tenancy = key, v.(*tenancyState)
	if a.tenancyMetrics, err = metrics.NewTenancy(ctx.GetMetricsRegistry(), a); err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	if err := a.provisionRevocation(ctx); err != nil {
		return err
	}
	if a.limitsConfigured() {
		a.admitter = &admitter{app: a, lim: a.tenancy.limiter}
		if rl := a.RateLimits; rl != nil {
			a.admitter.def = rl.Limit
			if rl.APIKey != nil {
				a.admitter.keyDef = *rl.APIKey
			}
			a.admitter.reply = rl.DefaultMaxTokens
		}
		if a.admitter.reply <= 0 {
			a.admitter.reply = DefaultReplyReservation
		}
		a.admitter.models = map[string]limits.Limit{}
		for _, m := range a.Models {
			if m.RateLimits != nil && m.RateLimits.Enforced() {
				a.admitter.models[m.Name] = *m.RateLimits
			}
		}
	}
	return nil
}

// limitsConfigured reports whether any limit may apply: without one, the
// pipeline has no Admitter and the admission stage costs nothing. A users
// file may gain limits while the gateway runs, so it counts.
func (a *App) limitsConfigured() bool {
	if a.RateLimits != nil && (a.RateLimits.Enforced() || (a.RateLimits.APIKey != nil && a.RateLimits.APIKey.Enforced())) {
		return true
	}
	for _, m := range a.Models {
		if m.RateLimits != nil && m.RateLimits.Enforced() {
			return true
		}
	}
	for _, u := range a.Users {
		if u.Limits != nil && u.Limits.Enforced() {
			return true
		}
	}
	return a.usersFile != ""
}

// redisOptions parses the redis option; nil options without Redis. key
// identifies the settings (secrets hashed) for the shared state.
func (a *App) redisOptions(repl *caddy.Replacer) (*redis.Options, string, error) {
	if a.Redis == nil {
		return nil, "llmedge.tenancy.local", nil
	}
	rc := a.Redis
	opts, err := redis.ParseURL(repl.ReplaceAll(rc.URL, ""))
	if err != nil {
		// The URL may hold a password: name the problem, not the URL.
		return nil, "", fmt.Errorf("redis: the URL does not parse (want redis://[user:password@]host:port[/db] or rediss://...)")
	}
	if rc.Username != "" {
		opts.Username = repl.ReplaceAll(rc.Username, "")
	}
	if rc.Password != "" {
		opts.Password = repl.ReplaceAll(rc.Password, "")
	}
	if rc.CAFile != "" {
		if opts.TLSConfig == nil {
			return nil, "", fmt.Errorf("redis: ca_file needs a rediss:// URL")
		}
		pem, err := os.ReadFile(repl.ReplaceAll(rc.CAFile, ""))
		if err != nil {
			return nil, "", fmt.Errorf("redis: ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, "", fmt.Errorf("redis: ca_file %s holds no PEM certificate", rc.CAFile)
		}
		opts.TLSConfig.RootCAs = pool
		opts.TLSConfig.MinVersion = tls.VersionTLS12
	}
	// Fail fast on the request path: one try, short deadlines; the limiter
	// falls back (or refuses) and finds Redis again by itself.
	to := a.redisTimeout()
	opts.MaxRetries = -1
	opts.DialTimeout = max(time.Second, 4*to)
	opts.ReadTimeout, opts.WriteTimeout, opts.PoolTimeout = to, to, to
	opts.ContextTimeoutEnabled = true
	opts.MinIdleConns = 2
	h := sha256.Sum256([]byte(opts.Network + "\x00" + opts.Addr + "\x00" + opts.Username + "\x00" + opts.Password +
		"\x00" + strconv.Itoa(opts.DB) + "\x00" + a.redisPrefix() + "\x00" + to.String() + "\x00" + a.OnRedisFailure +
		"\x00" + fmt.Sprint(opts.TLSConfig != nil) + "\x00" + rc.CAFile))
	return opts, "llmedge.tenancy.redis." + hex.EncodeToString(h[:8]), nil
}

func (a *App) redisPrefix() string {
	if a.Redis != nil && a.Redis.Prefix != "" {
		return a.Redis.Prefix
	}
	return defaultRedisPrefix
}

func (a *App) redisTimeout() time.Duration {
	if a.Redis != nil && a.Redis.Timeout > 0 {
		return time.Duration(a.Redis.Timeout)
	}
	return limits.DefaultTimeout
}

// provisionRevocation loads the revoked tokens before the configuration
// serves, from Redis when configured, else from Caddy's storage.
func (a *App) provisionRevocation(ctx caddy.Context) error {
	maxLife := time.Duration(a.TokenTTL) + verifyLeeway + time.Minute
	var backend revocation.Backend
	if a.tenancy.client != nil {
		backend = &revocation.RedisBackend{Client: a.tenancy.client, Prefix: a.redisPrefix(), MaxLifetime: maxLife}
	} else {
		backend = &revocation.StorageBackend{Storage: ctx.Storage(), MaxLifetime: maxLife}
	}
	poll := time.Duration(a.RevocationRefresh)
	if poll <= 0 {
		poll = DefaultRevocationRefresh
	}
	logger := a.logger
	a.revocations = revocation.NewSync(revoked, backend, revocation.Options{Poll: poll, MaxLifetime: maxLife,
		OnError: func(op string, err error) {
			if op == "add" {
				logger.Error("a revocation could not be shared with the other instances (it holds on this one)", zap.Error(err))
			} else {
				logger.Debug("reading the revocations failed; keeping the ones known", zap.Error(err))
			}
		}})
	if err := a.revocations.Load(ctx); err != nil {
		a.logger.Warn("could not read the revoked tokens; starting with those this process knows, retrying in the background", zap.Error(err))
	}
	return nil
}

// tokenRevoked is the verifier's Revoked hook: a revoked token, a token
// of a user revoked since, a disabled or removed user.
func (a *App) tokenRevoked(p *auth.Principal) bool {
	return revoked.Revoked(p.Subject, p.TokenID, p.IssuedAt) || !a.users.Usable(p.Subject)
}

// RevokeUser refuses every token issued to user before now, on every
// instance. An error means the other instances may not know yet (this one
// does).
func (a *App) RevokeUser(ctx context.Context, user string) (time.Time, error) {
	cut := revocation.Cutoff(time.Now())
	a.tenancyMetrics.Revoked("user")
	err := a.revocations.Revoke(ctx, revocation.Entry{User: user, Before: cut})
	a.logger.Info("revoked a user's tokens", zap.String("user", user), zap.Time("issued_before", cut), zap.Bool("shared", err == nil))
	return cut, err
}

// RevokeToken refuses the token with id jti until it expires; a zero
// expires means the longest a token can live from now.
func (a *App) RevokeToken(ctx context.Context, jti string, expires time.Time) (time.Time, error) {
	if expires.IsZero() {
		expires = time.Now().Add(time.Duration(a.TokenTTL) + verifyLeeway)
	}
	a.tenancyMetrics.Revoked("token")
	err := a.revocations.Revoke(ctx, revocation.Entry{JTI: jti, Expires: expires})
	a.logger.Info("revoked a token", zap.String("jti", jti), zap.Bool("shared", err == nil))
	return expires, err
}

// revokeDisabled revokes the tokens of the users a users-file reload
// disabled or removed, so that instances with their own copy of the file
// refuse them too.
func (a *App) revokeDisabled(before, after []auth.User) {
	now := make(map[string]bool, len(after))
	for _, u := range after {
		now[u.Name] = !u.Disabled
	}
	for _, u := range before {
		if u.Disabled || now[u.Name] {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		cut := revocation.Cutoff(time.Now())
		err := a.revocations.Revoke(ctx, revocation.Entry{User: u.Name, Before: cut})
		cancel()
		a.tenancyMetrics.Revoked("disabled_user")
		a.logger.Info("revoked the tokens of a user disabled or removed from the users file",
			zap.String("user", u.Name), zap.Bool("shared", err == nil))
	}
}

// RedisState implements metrics.TenancySource.
func (a *App) RedisState() (bool, bool) {
	if a.tenancy == nil {
		return false, false
	}
	return a.tenancy.limiter.Shared(), a.tenancy.limiter.RedisUp()
}

// RedisErrors implements metrics.TenancySource.
func (a *App) RedisErrors() map[string]uint64 { return a.tenancy.limiter.Stats().RedisErrors }

// FallbackDecisions implements metrics.TenancySource.
func (a *App) FallbackDecisions() uint64 { return a.tenancy.limiter.Stats().Fallback }

// redisDependency reports Redis in /readyz.
type redisDependency struct{ lim *limits.Limiter }

func (redisDependency) Name() string { return "redis" }

func (d redisDependency) Check() gateway.DependencyStatus {
	switch {
	case d.lim.RedisUp():
		return gateway.DependencyStatus{Status: "up"}
	case d.lim.FailClosed():
		return gateway.DependencyStatus{Status: "down",
			Detail: "unreachable: requests that have limits are refused until it answers (on_redis_failure closed)"}
	}
	return gateway.DependencyStatus{Status: "degraded",
		Detail: "unreachable: limits are enforced per instance until it answers (on_redis_failure open)"}
}

// admitter resolves which limits apply to a request and asks the limiter.
type admitter struct {
	app    *App
	lim    *limits.Limiter
	def    limits.Limit            // every user's default
	keyDef limits.Limit            // every API key's
	models map[string]limits.Limit // per user, on one model
	reply  int                     // tokens reserved for a reply without max_tokens
}

// Admit implements gateway.Admitter. A request no limit applies to costs
// two map lookups and no allocation.
func (ad *admitter) Admit(ctx context.Context, adm *gateway.Admission, h http.Header) (gateway.Ticket, *api.Error) {
	p := adm.Principal
	var buf [limits.MaxBuckets]limits.Bucket
	bs := buf[:0]
	ul := ad.def
	if own := ad.app.users.Limits(p.Subject); own != nil {
		ul = own.Over(ad.def)
	}
	if ul.Enforced() {
		bs = append(bs, limits.Bucket{Key: limits.UserKey(p.Subject), Scope: limits.ScopeUser, Limit: ul})
	}
	if ml, ok := ad.models[adm.Model]; ok {
		bs = append(bs, limits.Bucket{Key: limits.ModelKey(adm.Model, p.Subject), Scope: limits.ScopeModel, Limit: ml})
	}
	if p.KeyID != "" && ad.keyDef.Enforced() {
		bs = append(bs, limits.Bucket{Key: limits.KeyKey(p.KeyID), Scope: limits.ScopeKey, Limit: ad.keyDef})
	}
	if len(bs) == 0 {
		return nil, nil
	}
	reply := adm.MaxTokens
	if reply <= 0 {
		reply = ad.reply
	}
	prompt := limits.EstimateTokens(adm.PromptBytes, adm.Messages)
	req := limits.Request{Buckets: bs, Tokens: prompt + reply}
	t, d := ad.lim.Admit(ctx, &req)
	setRateHeaders(h, d)
	if !d.Allowed {
		b := limits.Bucket{}
		if d.Bucket >= 0 && d.Bucket < len(bs) {
			b = bs[d.Bucket]
		}
		ad.app.tenancyMetrics.Refused(b.Scope.String(), d.Refused.String())
		return nil, refusal(p, adm, b, d, req.Tokens)
	}
	return &ticket{t: t, prompt: prompt}, nil
}

// ticket settles a limits.Ticket with the request's real usage.
type ticket struct {
	t      *limits.Ticket
	prompt int
}

// Settle implements gateway.Ticket: nothing used when no replica was
// called; the replica's counts when it reported them; otherwise (the
// client left mid-stream, the replica failed or reports no usage) the
// prompt's estimate plus the text relayed at about 4 bytes a token.
func (t *ticket) Settle(s gateway.Settlement) {
	used := 0
	switch {
	case !s.Served:
	case s.UsageKnown:
		used = s.Usage.PromptTokens + s.Usage.CompletionTokens
	default:
		used = t.prompt + (s.Relayed+3)/4
	}
	t.t.Settle(used)
}

// Rate-limit headers, in OpenAI's names.
const (
	hLimitRequests     = "X-Ratelimit-Limit-Requests"
	hRemainingRequests = "X-Ratelimit-Remaining-Requests"
	hResetRequests     = "X-Ratelimit-Reset-Requests"
	hLimitTokens       = "X-Ratelimit-Limit-Tokens"
	hRemainingTokens   = "X-Ratelimit-Remaining-Tokens"
	hResetTokens       = "X-Ratelimit-Reset-Tokens"
)

// setRateHeaders describes the tightest request and token buckets.
func setRateHeaders(h http.Header, d limits.Decision) {
	if q := d.Requests; q.Limit > 0 {
		h[hLimitRequests] = []string{strconv.Itoa(q.Limit)}
		h[hRemainingRequests] = []string{strconv.Itoa(q.Remaining)}
		h[hResetRequests] = []string{resetValue(q.Reset)}
	}
	if q := d.Tokens; q.Limit > 0 {
		h[hLimitTokens] = []string{strconv.Itoa(q.Limit)}
		h[hRemainingTokens] = []string{strconv.Itoa(q.Remaining)}
		h[hResetTokens] = []string{resetValue(q.Reset)}
	}
}

// resetValue writes a duration as OpenAI does ("1s", "6m0s", "250ms").
func resetValue(d time.Duration) string { return d.Round(time.Millisecond).String() }

// refusal is the answer to a refused request: 429 with Retry-After naming
// the limit, or 503 when the limits cannot be checked.
func refusal(p *auth.Principal, adm *gateway.Admission, b limits.Bucket, d limits.Decision, reserved int) *api.Error {
	retry := max(d.RetryAfter, time.Millisecond)
	secs := int64(math.Ceil(retry.Seconds()))
	if d.Refused == limits.KindUnavailable {
		return api.NewError(http.StatusServiceUnavailable,
			"Rate limits cannot be checked right now (the shared limit store is unreachable); retry later").
			WithHeader("Retry-After", strconv.FormatInt(secs, 10))
	}
	var who string
	switch b.Scope {
	case limits.ScopeModel:
		who = "user '" + p.Subject + "' on model '" + adm.Model + "'"
	case limits.ScopeKey:
		who = "API key '" + p.KeyID + "'"
	default:
		who = "user '" + p.Subject + "'"
	}
	var what string
	switch d.Refused {
	case limits.KindRequests:
		what = strconv.Itoa(b.Limit.RPM) + " requests per minute"
	case limits.KindTokens:
		what = strconv.Itoa(b.Limit.TPM) + " tokens per minute; this request reserves " +
			strconv.Itoa(min(reserved, b.Limit.TPM)) + " (its prompt's estimate and its max_tokens)"
	case limits.KindConcurrency:
		what = strconv.Itoa(b.Limit.Concurrency) + " requests at once"
	}
	return api.NewError(http.StatusTooManyRequests,
		"Rate limit reached for "+who+": "+what+"; retry in "+strconv.FormatInt(secs, 10)+"s").
		WithHeader("Retry-After", strconv.FormatInt(secs, 10)).
		WithHeader("Retry-After-Ms", strconv.FormatInt(retry.Milliseconds(), 10))
}
