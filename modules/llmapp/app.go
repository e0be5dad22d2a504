// Package llmapp is the `llmedge` Caddy app: configuration turned into
// constructors. It parses the global option, resolves the guest modules
// (a model's policy, protocols and replica source: namespaces
// llmedge.policies, llmedge.protocols, llmedge.sources), and builds the
// plain-Go services llmedge's handlers share: the credentials (package
// auth), the tenants' limits and revocations (package tenancy) and the
// models' replicas (package fleet), joined in the request pipeline
// (package gateway). What outlives a reload is kept in one place (kept.go).
package llmapp

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/auth"
	"github.com/llmedge/llmedge/backends/fleet"
	"github.com/llmedge/llmedge/gateway"
	"github.com/llmedge/llmedge/internal/portlock"
	"github.com/llmedge/llmedge/metrics"
	"github.com/llmedge/llmedge/modules/llmauthenticator"
	"github.com/llmedge/llmedge/routing/share"
	"github.com/llmedge/llmedge/tenancy"
)

func init() {
	caddy.RegisterModule(App{})
}

// App is the llmedge app. With no configuration it serves the models
// `qwen` and `gemma` with no replicas and no users.
type App struct {
	// Issuer is the `iss` of issued tokens. Default: "llmedge".
	Issuer string `json:"issuer,omitempty"`
	// Audience is the `aud` of issued tokens. Default: the issuer.
	Audience string `json:"audience,omitempty"`
	// TokenTTL is the lifetime of issued tokens. Default: 1h.
	TokenTTL caddy.Duration `json:"token_ttl,omitempty"`
	// Users are the accounts allowed to get tokens.
	Users []auth.User `json:"users,omitempty"`
	// UsersFile is a JSON file of more users ({"users":[...]}).
	UsersFile string `json:"users_file,omitempty"`
	// Models are the model types served, in the order error messages name them.
	Models []*ModelConfig `json:"models,omitempty"`
	// DefaultModel is used when a request names no model_type. Default:
	// "qwen" when served, else the first model.
	DefaultModel string `json:"default_model,omitempty"`
	// FallbackDefault is "on" (default: a request may go to its model's
	// fallbacks unless it refuses with Llmedge-No-Fallback: 1) or "off"
	// (only a request that asks, with Llmedge-No-Fallback: 0, may).
	FallbackDefault string `json:"fallback_default,omitempty"`
	// Limits on inference request bodies.
	Limits api.Limits `json:"limits,omitempty"`
	// BodyTimeout bounds the reading of an inference request's body, from
	// its arrival: 408 after. Default: 30s; negative: none of llmedge's
	// own (the server's read_body timeout still applies).
	BodyTimeout caddy.Duration `json:"body_timeout,omitempty"`
	// TokenMaxBodyBytes and TokenBodyTimeout bound the forms of the token
	// and revocation endpoints. Defaults: 16KiB, 10s (negative: none).
	TokenMaxBodyBytes int64          `json:"token_max_body_bytes,omitempty"`
	TokenBodyTimeout  caddy.Duration `json:"token_body_timeout,omitempty"`
	// PingInterval spaces keep-alive comments of streams waiting for a first
	// token. Default: 15s.
	PingInterval caddy.Duration `json:"ping_interval,omitempty"`
	// UsageDrain is how long a stream's replica is still read once its
	// client has left, for the usage its end reports. Default: off (the
	// replica's request ends at once; what was relayed is counted).
	UsageDrain caddy.Duration `json:"usage_drain,omitempty"`
	// MaxAttempts bounds tries on distinct replicas per request. Default: 3.
	MaxAttempts int `json:"max_attempts,omitempty"`
	// DialTimeout bounds connecting to a replica. Default: 5s.
	DialTimeout caddy.Duration `json:"dial_timeout,omitempty"`
	// SigningAlg of tokens: EdDSA (default), ES256, or HS256 with
	// HMACSecret or HMACSecretFile.
	SigningAlg     string `json:"signing_alg,omitempty"`
	HMACSecret     string `json:"hmac_secret,omitempty"`
	HMACSecretFile string `json:"hmac_secret_file,omitempty"`
	// CacheSecret or CacheSecretFile is the secret the cache partitions'
	// keys and engine salts derive from, the same on every instance; by
	// default one made once and kept in Caddy's storage.
	CacheSecret     string `json:"cache_secret,omitempty"`
	CacheSecretFile string `json:"cache_secret_file,omitempty"`
	// KeyRotation makes a new signing key when the active one is older;
	// 0 never rotates on a schedule (`llmedge rotate-keys` still does).
	KeyRotation caddy.Duration `json:"key_rotation,omitempty"`
	// KeyRefresh is how often keys are reloaded from storage, to see
	// rotations by other instances. Default: 1m.
	KeyRefresh caddy.Duration `json:"key_refresh,omitempty"`
	// UsersFileRefresh is how often UsersFile is checked for changes.
	// Default: 2s.
	UsersFileRefresh caddy.Duration `json:"users_file_refresh,omitempty"`
	// Clients, client_id → bcrypt hash of the secret, are required at the
	// token endpoint when any are configured.
	Clients map[string]string `json:"clients,omitempty"`
	// Consul says how to reach Consul for models whose source is consul
	// and for the `consul` upstream source.
	Consul *ConsulOptions `json:"consul,omitempty"`
	// APIKeyTTL is the lifetime of API keys created without one.
	// Default: 90 days.
	APIKeyTTL caddy.Duration `json:"api_key_ttl,omitempty"`
	// APIKeysRefresh is how often API keys are reloaded from storage, so
	// that keys created or revoked on other instances take effect.
	// Default: 10s.
	APIKeysRefresh caddy.Duration `json:"api_keys_refresh,omitempty"`
	// RefreshTokenTTL is how long after a login its refresh tokens work;
	// negative turns refresh tokens off. Default: 720h.
	RefreshTokenTTL caddy.Duration `json:"refresh_token_ttl,omitempty"`
	// Redis holds the state every instance shares: tenants' limits and
	// revoked tokens. Without it, limits are per instance and
	// revocations travel through Caddy's storage.
	Redis *RedisConfig `json:"redis,omitempty"`
	// OnRedisFailure is what limits do while Redis is unreachable: "open"
	// (default) enforces them per instance, "closed" refuses the requests
	// they apply to.
	OnRedisFailure string `json:"on_redis_failure,omitempty"`
	// ShareRouting shares routing decisions with the other instances over
	// Redis, so that each routes as if it were the only one (a
	// conversation whose turns reach different instances stays on the
	// replica holding its history). Default: on when Redis is configured.
	ShareRouting *bool `json:"share_routing,omitempty"`
	// RateLimits are every user's default limits (users and models may
	// override them).
	RateLimits *RateLimitsConfig `json:"rate_limits,omitempty"`
	// RevocationRefresh is how often revocations are read from Caddy's
	// storage when there is no Redis. Default: 1s.
	RevocationRefresh caddy.Duration `json:"revocation_refresh,omitempty"`
	// AuthenticatorsRaw check a request's credential, asked in order
	// (modules of llmedge.authenticators). Default: bearer.
	AuthenticatorsRaw []json.RawMessage `json:"authenticators,omitempty" caddy:"namespace=llmedge.authenticators inline_key=authenticator"`
	// Trusts are trusted identity providers (the `trust` lines): their
	// access tokens are accepted, and exchanged at /auth/token, by an
	// oidc authenticator added after the others (after bearer when none
	// is named).
	Trusts []llmauthenticator.Trust `json:"trusts,omitempty"`
	// Tiers are limits tiers (rpm, tpm, concurrency) that identity
	// providers' users and client certificates are mapped to.
	Tiers map[string]*TierConfig `json:"tiers,omitempty"`
	// Teams group users and API keys: a team's models cap its members',
	// and its limits and budgets apply on top of theirs.
	Teams map[string]*TeamConfig `json:"teams,omitempty"`
	// Ledger keeps a record of every answered request (docs/ledger.md).
	Ledger *LedgerConfig `json:"ledger,omitempty"`
	// Batches turns on OpenAI's Files and Batches API (docs/batch.md).
	Batches *BatchesConfig `json:"batches,omitempty"`
	// AdmittersRaw admit or refuse requests after their scope is checked,
	// asked in order (modules of llmedge.admitters). Default: limits.
	AdmittersRaw []json.RawMessage `json:"admitters,omitempty" caddy:"namespace=llmedge.admitters inline_key=admitter"`

	// The services this configuration is made of, built by Provision.
	creds   *auth.Service
	fleet   *fleet.Fleet
	tenants *tenancy.Service
	// share passes routing decisions between instances (nil without
	// Redis or with share_routing off); shareKey is its key in kept.
	share    *share.Hub
	shareKey string
	ledger   *usageLedger
	batches  *batches
	// idps report the trusted issuers' keys (oidc authenticators);
	// otherWays counts the authenticators that need no outside keys
	// (bearer, mtls), ready from the start.
	idps      []identityStatus
	otherWays int
	// refs and userRefs are the models the Caddyfile's lines name, with
	// where, checked once the block is read (checkRefs).
	refs, userRefs []modelRef
	// dry is the storage's dry layer while validating.
	dry *dryStorage
	// readyStop ends the watch that logs changes of readiness; readyDone
	// says it ended.
	readyStop chan struct{}
	readyDone chan struct{}
	// credHeaders are the request headers no log may show (redact.go).
	credHeaders []string

	pipeline  *gateway.Pipeline
	validator *api.Validator
	metrics   *metrics.Metrics
	client    *http.Client
	openapi   []byte
	logger    *zap.Logger
	ctx       caddy.Context
	portLocks []func()
}

// Defaults.
const (
	DefaultIssuer      = "llmedge"
	DefaultTokenTTL    = time.Hour
	DefaultDialTimeout = 5 * time.Second
	// Realm in WWW-Authenticate challenges.
	Realm = "llmedge"
)

// DefaultModels are served when the configuration names none.
var DefaultModels = []string{"qwen", "gemma"}

// CaddyModule returns the Caddy module information.
func (App) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "llmedge",
		New: func() caddy.Module { return new(App) },
	}
}

// Provision turns the configuration into its services (credentials,
// tenancy, the fleet of models), then the pipeline that serves them.
func (a *App) Provision(ctx caddy.Context) (err error) {
	a.ctx, a.logger = ctx, ctx.Logger()
	a.setDefaults()
	defer func() {
		if err != nil {
			_ = a.Cleanup() // a failed load leaves no watcher or breaker behind
		}
	}()
	// Metrics first: whatever is built next reports to them. The replica
	// gauges read the fleet when scraped.
	if a.metrics, err = metrics.New(metricsRegistry(ctx), a); err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	if err = metrics.RegisterShare(metricsRegistry(ctx), a); err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	repl := caddy.NewReplacer() // {env.*} and {file.*} in secrets and paths
	tcfg, err := a.tenancyConfig(ctx, repl)
	if err != nil {
		return err
	}
	if a.tenants, err = tenancy.New(ctx, tcfg); err != nil {
		return err
	}
	acfg, err := a.authConfig(ctx, repl)
	if err != nil {
		return err
	}
	if a.creds, err = auth.NewService(ctx, acfg); err != nil {
		return err
	}
	a.tenants.SetUsers(a.creds.Users())
	if err = a.shareRouting(); err != nil {
		return err
	}
	names, err := a.naming()
	if err != nil {
		return err
	}
	keys, err := a.cacheKeys(ctx, repl)
	if err != nil {
		return err
	}
	a.client = newReplicaClient(time.Duration(a.DialTimeout))
	if a.fleet, err = a.buildFleet(ctx, repl); err != nil {
		return err
	}
	names.apply(a.fleet.Models())
	a.warnEmptyModels()
	a.validator = &api.Validator{Limits: a.doorLimits(), Models: names.accepted, Aliases: names.aliases, DefaultModel: a.DefaultModel}
	authn, err := a.authenticators(ctx)
	if err != nil {
		return err
	}
	admit, err := a.admitters(ctx)
	if err != nil {
		return err
	}
	if a.ledger, err = a.buildLedger(ctx, repl); err != nil {
		return err
	}
	a.pipeline = &gateway.Pipeline{
		Auth:           authn,
		Realm:          Realm,
		MaxHeaderBytes: a.Limits.WithDefaults().MaxHeaderBytes,
		BodyTimeout:    time.Duration(a.BodyTimeout),
		Admitter:       admit,
		TierCaps:       a.tierCaps(),
		Teams:          a.teams(),
		Gateway: &gateway.Gateway{
			Models:       a.fleet.Models(),
			Client:       a.client,
			PingInterval: time.Duration(a.PingInterval),
			UsageDrain:   time.Duration(a.UsageDrain),
			MaxAttempts:  a.MaxAttempts,
			Logger:       a.logger,
			ReadyLog:     readyLog(),
			Metrics:      a.metrics,
			Status:       observability(),
			Shares:       a.tierShares(),
			Aliases:      names.aliases,
			FallbackOff:  a.FallbackDefault == "off",
			PriorityOf:   priorityOf(a.creds.Users(), a.tierPriorities()),
			CacheKeys:    keys,
		},
	}
	if a.ledger != nil {
		a.pipeline.Gateway.Ledger = a.ledger.writer
	}
	if a.batches, err = a.buildBatches(ctx, repl); err != nil {
		return err
	}
	if a.batches != nil {
		a.pipeline.Batches = a.batches.api
		a.pipeline.Owners = a.creds // revoked owners' lines are refused
	}
	// The doors accept the names of the models' LoRA adapters besides
	// the models and aliases (the gateway resolves them).
	a.validator.Names = a.pipeline.Gateway.AcceptsName
	if configured, _, _ := a.tenants.RedisHealth(); configured {
		a.pipeline.Gateway.Dependencies = []gateway.Dependency{gateway.DependencyFunc{
			Dependency: "redis",
			Func: func() gateway.DependencyStatus {
				_, st, detail := a.tenants.RedisHealth()
				return gateway.DependencyStatus{Status: st, Detail: detail}
			},
		}}
	}
	a.pipeline.Gateway.Dependencies = append(a.pipeline.Gateway.Dependencies, a.shareDependencies()...)
	a.pipeline.Gateway.Dependencies = append(a.pipeline.Gateway.Dependencies, a.identityDependencies()...)
	a.pipeline.Gateway.Dependencies = append(a.pipeline.Gateway.Dependencies, a.credentialsDependency()...)
	if a.openapi, err = api.OpenAPI(a.validator); err != nil {
		return err
	}
	return nil
}

// teams is the pipeline's view of the teams; nil when no principal can
// have one (nothing to look up on a request).
func (a *App) teams() gateway.Teams {
	if !a.teamsInUse() {
		return nil
	}
	return a.tenants
}

func (a *App) setDefaults() {
	if a.Issuer == "" {
		a.Issuer = DefaultIssuer
	}
	if a.Audience == "" {
		a.Audience = a.Issuer
	}
	if a.TokenTTL <= 0 {
		a.TokenTTL = caddy.Duration(DefaultTokenTTL)
	}
	if a.DialTimeout <= 0 {
		a.DialTimeout = caddy.Duration(DefaultDialTimeout)
	}
	if len(a.Models) == 0 {
		for _, name := range DefaultModels {
			a.Models = append(a.Models, &ModelConfig{Name: name})
		}
	}
	if a.DefaultModel == "" {
		a.DefaultModel = a.Models[0].Name
		for _, m := range a.Models {
			if m.Name == "qwen" {
				a.DefaultModel = m.Name
			}
		}
	}
}

// Validate checks the configuration after Provision.
func (a *App) Validate() error {
	seen := map[string]bool{}
	for _, m := range a.Models {
		if seen[m.Name] {
			return fmt.Errorf("model %q is defined twice", m.Name)
		}
		seen[m.Name] = true
	}
	var aliases map[string]string
	if a.validator != nil {
		aliases = a.validator.Aliases
	}
	if _, ok := aliases[a.DefaultModel]; !seen[a.DefaultModel] && !ok {
		return fmt.Errorf("default_model %q is not a configured model", a.DefaultModel)
	}
	for _, u := range a.Users {
		for _, m := range u.Models {
			if of, ok := aliases[m]; ok {
				return fmt.Errorf("user %q: %q is an alias of model %q: a user's models (its scopes) name models, and cover their aliases", u.Name, m, of)
			}
			if !seen[m] && !a.adapterScope(m) {
				return fmt.Errorf("user %q: model %q is not a configured model", u.Name, m)
			}
		}
	}
	for name, t := range a.Tiers {
		if err := t.Limit.Validate(); err != nil {
			return fmt.Errorf("tier %s: %w", name, err)
		}
		if _, err := api.ParsePriority(t.Priority); err != nil {
			return fmt.Errorf("tier %s: %w", name, err)
		}
		if err := t.CapsConfig.validate("tier " + name); err != nil {
			return err
		}
	}
	if err := a.validateTeams(seen); err != nil {
		return err
	}
	if b := a.Batches; b != nil {
		if err := b.validate(); err != nil {
			return err
		}
		for m := range b.Shares {
			if !seen[m] {
				return fmt.Errorf("batches: share of %q: not a configured model", m)
			}
		}
	}
	if rl := a.RateLimits; rl != nil {
		if err := rl.Validate(); err != nil {
			return fmt.Errorf("limits: %w", err)
		}
		if rl.APIKey != nil {
			if err := rl.APIKey.Validate(); err != nil {
				return fmt.Errorf("limits api_key: %w", err)
			}
		}
		if rl.DefaultMaxTokens < 0 {
			return fmt.Errorf("limits default_max_tokens must be positive, got %d", rl.DefaultMaxTokens)
		}
	}
	return nil
}

func (a *App) modelNames() []string {
	names := make([]string, len(a.Models))
	for i, m := range a.Models {
		names[i] = m.Name
	}
	return names
}

// Start runs the services' periodic work: key refresh and rotation,
// API keys and the users file, the revocations' sharing, health probes
// and load scrapes.
func (a *App) Start() error {
	if err := a.lockAddresses(); err != nil {
		return err
	}
	a.creds.Start()
	a.tenants.Start()
	if a.share != nil {
		a.share.Start() // the models are attached: what it reads first reaches them
	}
	if err := a.fleet.Start(); err != nil {
		return err
	}
	a.readyStop, a.readyDone = make(chan struct{}), make(chan struct{})
	go watchReadiness(a.pipeline.Gateway, a.readyStop, a.readyDone)
	return a.startBatches()
}

// Stop ends the periodic work and waits for it, so nothing of this
// configuration outlives a reload.
func (a *App) Stop() error {
	if a.readyStop != nil {
		close(a.readyStop)
		<-a.readyDone
		a.readyStop = nil
	}
	a.batches.stop() // its lines in flight end first, while the fleet still serves them
	if a.fleet != nil {
		a.fleet.Stop()
	}
	if a.creds != nil {
		a.creds.Stop()
	}
	if a.tenants != nil {
		a.tenants.Stop()
	}
	for _, release := range a.portLocks {
		release()
	}
	a.portLocks = nil
	return nil
}

// lockAddresses takes, for this process, the address of every server of
// the http app: a second llmedge started on the same port would otherwise
// share it silently (Caddy listens with SO_REUSEPORT) and take half of the
// connections, with its own certificate, keys and users.
func (a *App) lockAddresses() error {
	v, err := a.ctx.AppIfConfigured("http")
	if err != nil {
		return nil // no HTTP servers in this config
	}
	for _, srv := range v.(*caddyhttp.App).Servers {
		for _, addr := range srv.Listen {
			release, err := portlock.Acquire("llmedge", addr)
			if errors.Is(err, portlock.ErrHeld) {
				return fmt.Errorf("another llmedge process already serves %s: stop it, or give this one other addresses (and another admin address)", addr)
			}
			if err != nil {
				a.logger.Warn("could not lock the address against a second process", zap.String("address", addr), zap.Error(err))
				continue
			}
			a.portLocks = append(a.portLocks, release)
		}
	}
	return nil
}

// Cleanup releases the replica sources (a Consul watcher the next
// configuration uses keeps running), the breakers, the shared tenancy
// state and the replica connections of this configuration.
func (a *App) Cleanup() error {
	// Nothing is cleared: the old configuration's requests in flight and
	// its metrics may still read the services.
	if a.fleet != nil {
		a.fleet.Close()
	}
	if a.client != nil {
		a.client.CloseIdleConnections()
	}
	if a.share != nil {
		_, _ = kept.Delete(a.shareKey)
	}
	if a.tenants != nil {
		a.tenants.Close()
	}
	a.batches.close(a.logger)
	// Last: the old configuration's requests have ended, and what they
	// handed the ledger is written before it closes.
	if err := a.ledger.close(); err != nil {
		a.logger.Error("closing the usage ledger", zap.Error(err))
	}
	return nil
}

// Pipeline is the inference pipeline handlers run.
func (a *App) Pipeline() *gateway.Pipeline { return a.pipeline }

// Validator reads native requests with the configuration's models and
// body limits; the doors take both from it.
func (a *App) Validator() *api.Validator { return a.validator }

// TokenEndpoint serves POST /auth/token.
func (a *App) TokenEndpoint() http.Handler { return a.creds.TokenEndpoint() }

// RevokeEndpoint serves POST /auth/revoke (RFC 7009).
func (a *App) RevokeEndpoint() http.Handler { return a.creds.RevokeEndpoint() }

// OpenAPI is the OpenAPI 3.1 description of the API this app serves.
func (a *App) OpenAPI() []byte { return a.openapi }

// JWKS is the JSON Web Key Set of the verifying keys, as they are now.
func (a *App) JWKS() []byte { return a.creds.JWKS() }

// Credentials are this configuration's users, keys and tokens.
func (a *App) Credentials() *auth.Service { return a.creds }

// Tenancy is this configuration's limits and revocations.
func (a *App) Tenancy() *tenancy.Service { return a.tenants }

// FromContext returns the llmedge app of the configuration ctx belongs to,
// provisioning it with defaults when the configuration has none.
func FromContext(ctx caddy.Context) (*App, error) {
	v, err := ctx.App("llmedge")
	if err != nil {
		return nil, err
	}
	// Every site that mounts an llmedge handler asks for the app: its
	// server's logs then never show a credential header.
	if err := redactServerLogs(ctx, v.(*App).credHeaders); err != nil {
		return nil, err
	}
	return v.(*App), nil
}

// clientIP is the client address as Caddy determined it (trusted proxies
// applied), for the per-address login limit.
func clientIP(r *http.Request) string {
	if ip, ok := caddyhttp.GetVar(r.Context(), caddyhttp.ClientIPVarKey).(string); ok && ip != "" {
		return ip
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// dialer is the replica dialer with its connect timeout.
// Interface guards.
var (
	_ caddy.App          = (*App)(nil)
	_ caddy.Provisioner  = (*App)(nil)
	_ caddy.Validator    = (*App)(nil)
	_ caddy.CleanerUpper = (*App)(nil)
)

// Logger is the app's logger.
func (a *App) Logger() *zap.Logger { return a.logger }
