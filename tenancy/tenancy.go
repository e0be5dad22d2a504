// Package tenancy is what the gateway does about tenants: the limits that
// admit or refuse their requests (and the answers and rate-limit headers
// that go with them), and the revoked credentials, both shared by every
// instance through Redis when one is configured (through Caddy's storage
// for revocations otherwise).
//
// A Service holds the Redis client, the limiter and the revocation list in
// a keep.Store, so that a configuration reload with the same settings
// keeps the counters, the tickets in flight and the connection. Its
// Admitter is the pipeline's admission stage.
package tenancy

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/llmedge/llmedge/keep"
	"github.com/llmedge/llmedge/limits"
	"github.com/llmedge/llmedge/metrics"
	"github.com/llmedge/llmedge/revocation"
)

// Redis says how to reach the Redis every instance shares; every value is
// resolved (no placeholders). One of URL, Sentinel and Cluster is set.
type Redis struct {
	// URL is redis://[user:password@]host:port[/db] or rediss:// (TLS).
	URL string
	// Sentinel reaches the primary its sentinels name, and the new one
	// after they fail it over.
	Sentinel *Sentinel
	// Cluster is the seed nodes (host:port) of a Redis Cluster.
	Cluster []string
	// TLS talks TLS to the servers of a Sentinel or Cluster deployment
	// (a URL says it with rediss://).
	TLS bool
	// Username and Password, when set, replace the URL's (the servers'
	// own, not the sentinels').
	Username, Password string
	// Timeout bounds every Redis call on the request path; 0 means
	// limits.DefaultTimeout.
	Timeout time.Duration
	// Prefix starts every key and channel; "" means DefaultPrefix.
	Prefix string
	// CAFile verifies a rediss:// server with this CA instead of the
	// system's.
	CAFile string
}

// Sentinel is a Redis Sentinel deployment: the sentinels' addresses
// (host:port) and the name of the primary they watch.
type Sentinel struct {
	Master string
	Addrs  []string
	// Username and Password are the sentinels' own (requirepass in
	// sentinel.conf), when they have one.
	Username, Password string
}

// Defaults.
const (
	DefaultPrefix = "llmedge:"
	// DefaultReplyReservation is the reply reserved against tpm for a
	// request that sets no max_tokens, when the config says nothing.
	DefaultReplyReservation = 1024
	// DefaultRevocationRefresh is how often revocations are read from
	// storage (without Redis), so they reach every instance within it.
	DefaultRevocationRefresh = time.Second
)

// Config is a Service's configuration.
type Config struct {
	// Redis, when set, shares limits and revocations between instances.
	Redis *Redis
	// FailClosed refuses the requests limits apply to while Redis is
	// unreachable; otherwise each instance enforces them alone.
	FailClosed bool
	// Limits says which limits apply to whom; nil admits everything (the
	// pipeline then has no admission stage).
	Limits *Limits
	// Storage carries revocations between instances without Redis.
	Storage revocation.Storage
	// RevocationRefresh is how often Storage is read again.
	RevocationRefresh time.Duration
	// MaxTokenLifetime is the longest a token lives (TTL plus leeway):
	// revocations older than that are forgotten.
	MaxTokenLifetime time.Duration
	// Kept holds what outlives a configuration.
	Kept   *keep.Store
	Logger *zap.Logger
	// Registry receives the tenancy metrics.
	Registry prometheus.Registerer
	// Teams are the configured teams, by name.
	Teams map[string]Team
	// BudgetSeed starts a budget's counter from the recorded use of its
	// period (the ledger); nil starts it at 0.
	BudgetSeed limits.BudgetSeed
	// BudgetWarning is the part of a budget used past which the status
	// page warns; 0 means DefaultBudgetWarning.
	BudgetWarning float64
}

// DefaultBudgetWarning is the part of a budget used past which the status
// page warns.
const DefaultBudgetWarning = 0.8

// Service is the tenants' limits and revocations of one configuration.
type Service struct {
	cfg      Config
	key      string                  // of the shared state in Kept
	opts     *redis.UniversalOptions // nil without Redis
	state    *state
	sync     *revocation.Sync
	admitter *limitsAdmitter
	metrics  *metrics.Tenancy
	logger   *zap.Logger
	// userTeams finds a local user's team (set with the users).
	userTeams atomic.Pointer[UserTeams]

	closeOnce sync.Once
}

// state outlives configurations: the Redis client, the limiter (its
// counters and its tickets in flight) are the same before and after a
// reload with the same settings.
type state struct {
	client  redis.UniversalClient // nil without Redis
	limiter *limits.Limiter
	// seed is the newest configuration's BudgetSeed: the limiter outlives
	// configurations, and an older one's ledger may be closed.
	seed atomic.Pointer[limits.BudgetSeed]
}

func (s *state) seedBudget(ctx context.Context, scope limits.Scope, name string, unit limits.Unit, since time.Time) (float64, error) {
	if f := s.seed.Load(); f != nil && *f != nil {
		return (*f)(ctx, scope, name, unit, since)
	}
	return 0, nil
}

func (s *state) Destruct() error {
	s.limiter.Close()
	if s.client != nil {
		return s.client.Close()
	}
	return nil
}

// revokedKey is the process's list of revoked tokens in Kept: every
// configuration checks it, and loads the shared one into it.
const revokedKey = "tenancy.revoked"

// New sets up Redis, the limiter, the admitter and the revocations, and
// reads the revocations before the configuration serves.
func New(ctx context.Context, cfg Config) (*Service, error) {
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	if cfg.Kept == nil {
		cfg.Kept = keep.New()
	}
	s := &Service{cfg: cfg, logger: cfg.Logger}
	opts, key, err := redisOptions(cfg.Redis, cfg.FailClosed)
	if err != nil {
		return nil, err
	}
	v, _, err := cfg.Kept.LoadOrNew(key, func() (any, error) { return s.newState(opts), nil })
	if err != nil {
		return nil, err
	}
	s.key, s.state, s.opts = key, v.(*state), opts
	s.state.seed.Store(&cfg.BudgetSeed)
	if s.metrics, err = metrics.NewTenancy(cfg.Registry, s); err != nil {
		s.Close()
		return nil, fmt.Errorf("metrics: %w", err)
	}
	if err := s.loadRevocations(ctx); err != nil {
		s.Close()
		return nil, err
	}
	if cfg.Limits != nil {
		s.admitter = newAdmitter(s, *cfg.Limits)
	}
	return s, nil
}

func (s *Service) newState(opts *redis.UniversalOptions) *state {
	st := &state{}
	logger, failClosed := s.logger, s.cfg.FailClosed
	lo := limits.Options{FailClosed: failClosed, BudgetSeed: st.seedBudget,
		OnSeedError: func(err error) {
			logger.Warn("budgets: a counter starts at 0: its period's use could not be read from the ledger", zap.Error(err))
		},
		OnRedisState: func(up bool, err error) {
			if up {
				logger.Info("redis reachable again: limits are shared again")
			} else {
				logger.Error("redis unreachable: limits are enforced per instance until it answers",
					zap.Bool("fail_closed", failClosed), zap.Error(err))
			}
		}}
	if opts != nil {
		st.client = redis.NewUniversalClient(opts)
		lo.Redis, lo.Prefix, lo.Timeout = st.client, s.prefix(), s.timeout()
	}
	st.limiter = limits.New(lo)
	st.limiter.Start()
	return st
}

func timeoutOf(rc *Redis) time.Duration {
	if rc != nil && rc.Timeout > 0 {
		return rc.Timeout
	}
	return limits.DefaultTimeout
}

func (s *Service) prefix() string         { return prefixOf(s.cfg.Redis) }
func (s *Service) timeout() time.Duration { return timeoutOf(s.cfg.Redis) }

// SetUsers gives the admitter the users' own limits, once the users are
// loaded (the credentials are built after the tenancy, which they use for
// revocations).
func (s *Service) SetUsers(u UserLimits) {
	if ut, ok := u.(UserTeams); ok {
		s.userTeams.Store(&ut)
	}
	if s.admitter != nil {
		s.admitter.l.Users = u
	}
}

// Admitter is the pipeline's admission stage; nil when no limit is
// configured (the stage then costs a nil check).
func (s *Service) Admitter() Admitter {
	if s.admitter == nil {
		return nil
	}
	return s.admitter
}

// Start begins sharing revocations with the other instances.
func (s *Service) Start() { s.sync.Start() }

// Stop ends the sharing and waits for it.
func (s *Service) Stop() {
	if s.sync != nil {
		s.sync.Stop()
	}
}

// Close lets go of the shared state (the last configuration using it
// closes the Redis connection). The service stays usable by the requests
// still in flight on the closed configuration: nothing is cleared.
func (s *Service) Close() {
	s.closeOnce.Do(func() {
		if s.state != nil {
			_, _ = s.cfg.Kept.Delete(s.key)
		}
		if s.sync != nil {
			_, _ = s.cfg.Kept.Delete(revokedKey)
		}
	})
}

// RedisHealth reports Redis for /readyz: configured false without Redis;
// status "up", "degraded" (unreachable, limits per instance) or "down"
// (unreachable, limits refuse), with a detail.
func (s *Service) RedisHealth() (configured bool, status, detail string) {
	if s.cfg.Redis == nil {
		return false, "", ""
	}
	lim := s.state.limiter
	switch {
	case lim.RedisUp():
		return true, "up", ""
	case lim.FailClosed():
		return true, "down", "unreachable: requests that have limits are refused until it answers (on_redis_failure closed)"
	}
	return true, "degraded", "unreachable: limits are enforced per instance until it answers (on_redis_failure open)"
}

// RedisState implements metrics.TenancySource.
func (s *Service) RedisState() (bool, bool) {
	st := s.state
	if st == nil {
		return false, false
	}
	return st.limiter.Shared(), st.limiter.RedisUp()
}

// RedisErrors implements metrics.TenancySource.
func (s *Service) RedisErrors() map[string]uint64 { return s.state.limiter.Stats().RedisErrors }

// FallbackDecisions implements metrics.TenancySource.
func (s *Service) FallbackDecisions() uint64 { return s.state.limiter.Stats().Fallback }

// SharedRedis returns, for other state the instances share over the same
// Redis (the routing decisions), a copy of its client's options, the
// prefix of keys and an identity of the settings; nil options without
// Redis.
func (s *Service) SharedRedis() (opts *redis.UniversalOptions, prefix, key string) {
	if s.state == nil || s.state.client == nil || s.opts == nil {
		return nil, "", ""
	}
	o := *s.opts
	return &o, s.prefix(), s.key
}
