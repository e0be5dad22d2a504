// Package llmedge is the `llmedge` Caddy app: the long-lived state that
// llmedge's HTTP handlers share (users, signing keys, model pools). It
// parses configuration and provisions the plain-Go packages that do the
// work.
package llmedge

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/auth"
	"github.com/llmedge/llmedge/backends"
	"github.com/llmedge/llmedge/backends/native"
	"github.com/llmedge/llmedge/backends/ollama"
	"github.com/llmedge/llmedge/backends/openai"
	"github.com/llmedge/llmedge/discovery"
	"github.com/llmedge/llmedge/gateway"
	"github.com/llmedge/llmedge/health"
	"github.com/llmedge/llmedge/metrics"
	"github.com/llmedge/llmedge/pool"
)

func init() {
	caddy.RegisterModule(App{})
}

// App is the llmedge app. With no configuration it serves the models
// `qwen` and `gemma` with no replicas and no users.
type App struct {
	// Issuer is the `iss` of issued tokens. Default: "llmedge".
	Issuer string `json:"issuer,omitempty"`
	// Audience is the `aud` of issued tokens. Default: "llmedge".
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
	// Limits on inference request bodies.
	Limits api.Limits `json:"limits,omitempty"`
	// PingInterval spaces keep-alive comments of streams waiting for a first
	// token. Default: 15s.
	PingInterval caddy.Duration `json:"ping_interval,omitempty"`
	// MaxAttempts bounds tries on distinct replicas per request. Default: 3.
	MaxAttempts int `json:"max_attempts,omitempty"`
	// DialTimeout bounds connecting to a replica. Default: 5s.
	DialTimeout caddy.Duration `json:"dial_timeout,omitempty"`
	// SigningAlg of tokens: EdDSA (default), ES256, or HS256 with
	// HMACSecret or HMACSecretFile.
	SigningAlg     string `json:"signing_alg,omitempty"`
	HMACSecret     string `json:"hmac_secret,omitempty"`
	HMACSecretFile string `json:"hmac_secret_file,omitempty"`
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
	// Consul says how to reach Consul for models with a consul_service
	// and for the `consul` upstream source.
	Consul *ConsulOptions `json:"consul,omitempty"`

	// cleanups release this config's Consul watchers.
	cleanups []func()
	users    *auth.Users
	keys     *auth.KeyRing
	issuer   *auth.Issuer
	pipeline *gateway.Pipeline
	token    *auth.TokenEndpoint
	client   *http.Client
	models   []*gateway.Model
	prober   *health.Prober
	logger   *zap.Logger
	storage  auth.Storage // nil for HS256 keys
	bg       *background
	kidLimit *rateGate // bounds storage reloads for unknown kids

	usersFile string // UsersFile with placeholders replaced
	openapi   []byte
}

// newReplicaClient is the HTTP client for replicas, with its dial timeout.
func newReplicaClient(dial time.Duration) *http.Client {
	return &http.Client{Transport: &http.Transport{
		Proxy:               nil, // replicas are reached directly, never through an env proxy
		DialContext:         (&net.Dialer{Timeout: dial, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        1024,
		MaxIdleConnsPerHost: 256,
		IdleConnTimeout:     90 * time.Second,
		ForceAttemptHTTP2:   false,
	}}
}

// ModelConfig configures one model type.
type ModelConfig struct {
	Name string `json:"name"`
	// Static lists replica base URLs.
	Static []string `json:"static,omitempty"`
	// Weights scale static replicas' shares of traffic, by URL; default 1.
	Weights map[string]int `json:"weights,omitempty"`
	// ConsulService is the Consul service whose passing instances are the
	// replicas (instead of Static). Instance Meta protocol, model, weight,
	// max_concurrency and scheme override the model's settings.
	ConsulService string `json:"consul_service,omitempty"`
	// ConsulTag keeps the instances with this tag.
	ConsulTag string `json:"consul_tag,omitempty"`
	// ConsulFilter is a Consul filter expression on the health entries.
	ConsulFilter string `json:"consul_filter,omitempty"`
	// ConsulDatacenter overrides the datacenter of the `consul` option.
	ConsulDatacenter string `json:"consul_datacenter,omitempty"`
	// ConsulToken overrides the ACL token of the `consul` option
	// (placeholders such as {env.QWEN_CONSUL_TOKEN} work).
	ConsulToken string `json:"consul_token,omitempty"`
	// Protocol spoken by the replicas. Default: "openai".
	Protocol string `json:"protocol,omitempty"`
	// UpstreamModel is the model name sent to replicas.
	UpstreamModel string `json:"upstream_model,omitempty"`
	// LBPolicy: p2c (default), round_robin, random, least_requests.
	LBPolicy string `json:"lb_policy,omitempty"`
	// SystemMessage is added when a request carries none.
	SystemMessage string `json:"system_message,omitempty"`
	// MaxTokens caps replies.
	MaxTokens int `json:"max_tokens,omitempty"`
	// APIKey is sent to replicas as a Bearer token ({env.VAR} works).
	APIKey string `json:"api_key,omitempty"`
	// APIKeyEnv names an environment variable holding the API key; it
	// must be set and non-empty. Exclusive with APIKey.
	APIKeyEnv string `json:"api_key_env,omitempty"`
	// HealthInterval spaces active health probes of static replicas.
	// Default: 5s; negative turns probing off.
	HealthInterval caddy.Duration `json:"health_interval,omitempty"`
	// HealthTimeout bounds one probe. Default: 2s.
	HealthTimeout caddy.Duration `json:"health_timeout,omitempty"`
	// MaxConcurrency caps outstanding requests per replica.
	MaxConcurrency int `json:"max_concurrency,omitempty"`
	// Timeouts; zero takes the gateway's defaults (60s, 30s, 10m).
	FirstTokenTimeout caddy.Duration `json:"first_token_timeout,omitempty"`
	IdleTimeout       caddy.Duration `json:"idle_timeout,omitempty"`
	TotalTimeout      caddy.Duration `json:"total_timeout,omitempty"`
	// DialTimeout bounds connecting to this model's replicas; default: the
	// app's dial_timeout.
	DialTimeout caddy.Duration `json:"dial_timeout,omitempty"`
	// MaxAttempts bounds tries on distinct replicas; default: the app's.
	MaxAttempts int `json:"max_attempts,omitempty"`
	// TryDuration bounds the time, from the request's arrival, in which a
	// retry may start. Default 0: bounded by max_attempts and total_timeout.
	TryDuration caddy.Duration `json:"try_duration,omitempty"`
	// Breaker configures the per-replica circuit breakers.
	Breaker *BreakerConfig `json:"breaker,omitempty"`
	// Queue configures the wait for a slot when every replica is at its
	// max_concurrency.
	Queue *QueueConfig `json:"queue,omitempty"`
}

// BreakerConfig configures each replica's circuit breaker (gobreaker v2).
// It trips on consecutive_failures or, with failure_ratio set, on the
// share of failures once min_requests outcomes were seen in the window.
type BreakerConfig struct {
	Disabled            bool           `json:"disabled,omitempty"`
	ConsecutiveFailures uint32         `json:"consecutive_failures,omitempty"`
	FailureRatio        float64        `json:"failure_ratio,omitempty"`
	MinRequests         uint32         `json:"min_requests,omitempty"`
	Window              caddy.Duration `json:"window,omitempty"`
	OpenTimeout         caddy.Duration `json:"open_timeout,omitempty"`
	HalfOpenRequests    uint32         `json:"half_open_requests,omitempty"`
}

func (b *BreakerConfig) settings() pool.BreakerSettings {
	if b == nil {
		return pool.BreakerSettings{}
	}
	return pool.BreakerSettings{
		Disabled:            b.Disabled,
		ConsecutiveFailures: b.ConsecutiveFailures,
		FailureRatio:        b.FailureRatio,
		MinRequests:         b.MinRequests,
		Window:              time.Duration(b.Window),
		OpenTimeout:         time.Duration(b.OpenTimeout),
		HalfOpenRequests:    b.HalfOpenRequests,
	}
}

// QueueConfig bounds the wait for a free replica slot.
type QueueConfig struct {
	// Disabled answers 429 at once when every replica is at its cap.
	Disabled bool `json:"disabled,omitempty"`
	// Length is how many requests may wait. Default 100.
	Length int `json:"length,omitempty"`
	// Timeout is how long one request may wait. Default 5s.
	Timeout caddy.Duration `json:"timeout,omitempty"`
}

// Wait queue defaults.
const (
	DefaultQueueLength  = 100
	DefaultQueueTimeout = 5 * time.Second
)

func (q *QueueConfig) options() (length int, timeout time.Duration) {
	if q != nil && q.Disabled {
		return 0, 0
	}
	length, timeout = DefaultQueueLength, DefaultQueueTimeout
	if q != nil && q.Length > 0 {
		length = q.Length
	}
	if q != nil && q.Timeout > 0 {
		timeout = time.Duration(q.Timeout)
	}
	return length, timeout
}

// Defaults.
const (
	DefaultIssuer      = "llmedge"
	DefaultTokenTTL    = time.Hour
	DefaultDialTimeout = 5 * time.Second
	// Realm in WWW-Authenticate challenges.
	Realm = "llmedge"
	// keyStorageKey is where the signing keys live in Caddy's storage.
	keyStorageKey = "llmedge/signing_keys.json"
)

// tokenCacheSize bounds the verified tokens remembered (a few MB at most).
const tokenCacheSize = 10_000

// Brute-force protection of the token endpoint: after this many failed
// logins within loginWindow, a username or a client address gets 429.
const (
	loginFailuresPerUser = 10
	loginFailuresPerAddr = 100
	loginWindow          = 15 * time.Minute
)

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

// DefaultModels are served when the configuration names none.
var DefaultModels = []string{"qwen", "gemma"}

// protocols maps protocol names to adapters. The engine names are aliases
// of openai (their dialects are handled by the one tolerant parser); they
// also pick the engine's health path.
var protocols = map[string]backends.Backend{
	"openai":   &openai.Backend{},
	"vllm":     &openai.Backend{},
	"sglang":   &openai.Backend{},
	"tgi":      &openai.Backend{},
	"llamacpp": &openai.Backend{},
	"ollama":   &ollama.Backend{},
	"native":   &native.Backend{},
}

// protocolNames lists the protocols, for error messages.
func protocolNames() string {
	names := make([]string, 0, len(protocols))
	for n := range protocols {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// splitProtocol splits a static replica address "<protocol>+http://..."
// into its protocol and URL; a plain URL has no protocol.
func splitProtocol(addr string) (string, string, error) {
	i := strings.Index(addr, "://")
	j := strings.IndexByte(addr, '+')
	if i < 0 || j < 0 || j > i {
		return "", addr, nil
	}
	proto := addr[:j]
	if _, ok := protocols[proto]; !ok {
		return "", "", fmt.Errorf("replica %q: unknown protocol %q (want one of %s)", addr, proto, protocolNames())
	}
	return proto, addr[j+1:], nil
}

// CaddyModule returns the Caddy module information.
func (App) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "llmedge",
		New: func() caddy.Module { return new(App) },
	}
}

// Provision sets up users, keys and model pools.
func (a *App) Provision(ctx caddy.Context) error {
	a.logger = ctx.Logger()
	a.setDefaults()

	repl := caddy.NewReplacer() // {env.*} and {file.*} in secrets and paths
	a.usersFile = repl.ReplaceAll(a.UsersFile, "")
	var fileUsers []auth.User
	if a.usersFile != "" {
		var err error
		if fileUsers, err = auth.LoadUsersFile(a.usersFile); err != nil {
			return err
		}
	}
	var err error
	if a.users, err = auth.NewUsers(a.allUsers(fileUsers)); err != nil {
		return fmt.Errorf("users: %w", err)
	}
	clients, err := auth.NewClients(a.Clients)
	if err != nil {
		return fmt.Errorf("clients: %w", err)
	}

	a.kidLimit = &rateGate{every: unknownKIDReloadEvery}
	if err := a.provisionKeys(ctx, repl); err != nil {
		return err
	}
	a.issuer = &auth.Issuer{Keys: a.keys, Issuer: a.Issuer, Audience: a.Audience, TTL: time.Duration(a.TokenTTL)}
	a.token = &auth.TokenEndpoint{
		Users: a.users, Issuer: a.issuer, Realm: Realm,
		UserLimiter: auth.NewFailureLimiter(loginFailuresPerUser, loginWindow, nil),
		AddrLimiter: auth.NewFailureLimiter(loginFailuresPerAddr, loginWindow, nil),
		ClientAddr:  clientIP,
		Clients:     clients,
	}

	a.client = newReplicaClient(time.Duration(a.DialTimeout))

	models := make(map[string]*gateway.Model, len(a.Models))
	a.prober = &health.Prober{Client: a.client, Logger: a.logger}
	var consul discovery.ConsulConfig
	var watching []*discovery.Watcher
	for _, mc := range a.Models {
		m, err := mc.build(repl, a.logger)
		if err != nil {
			return fmt.Errorf("model %q: %w", mc.Name, err)
		}
		if mc.ConsulService != "" {
			if len(watching) == 0 {
				consul = a.Consul.resolved()
			}
			w, cleanup, err := mc.watchConsul(consul, m.Pool, a.logger)
			if err != nil {
				return fmt.Errorf("model %q: %w", mc.Name, err)
			}
			a.cleanups = append(a.cleanups, cleanup)
			m.Discovery = w.Status
			watching = append(watching, w)
		}
		models[mc.Name] = m
		a.models = append(a.models, m)
		if len(mc.Static) > 0 && mc.HealthInterval >= 0 {
			a.prober.Targets = append(a.prober.Targets, health.Target{
				Pool: m.Pool, Protocol: m.Protocol,
				Interval: time.Duration(mc.HealthInterval), Timeout: time.Duration(mc.HealthTimeout),
			})
		}
	}
	WaitSynced(ctx, watching, a.Consul.syncTimeout(), a.logger)
	a.pipeline = &gateway.Pipeline{
		Verifier: &auth.Verifier{Keys: a.keys, Issuer: a.Issuer, Audience: a.Audience, Leeway: verifyLeeway,
			Refresh: a.reloadOnUnknownKID, Cache: auth.NewTokenCache(tokenCacheSize)},
		Realm:     Realm,
		Validator: &api.Validator{Limits: a.Limits.WithDefaults(), Models: a.modelNames(), DefaultModel: a.DefaultModel},
		Gateway: &gateway.Gateway{
			Models:       models,
			Client:       a.client,
			PingInterval: time.Duration(a.PingInterval),
			MaxAttempts:  a.MaxAttempts,
			Logger:       a.logger,
		},
	}
	m, err := metrics.New(ctx.GetMetricsRegistry(), a)
	if err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	a.pipeline.Gateway.Metrics = m
	a.token.OnIssued = m.TokenIssued
	a.token.OnFailure = m.AuthFailure
	if a.openapi, err = api.OpenAPI(a.pipeline.Validator); err != nil {
		return err
	}
	return nil
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
		if m.Name == "" {
			return fmt.Errorf("a model has no name")
		}
		if seen[m.Name] {
			return fmt.Errorf("model %q is defined twice", m.Name)
		}
		seen[m.Name] = true
	}
	if !seen[a.DefaultModel] {
		return fmt.Errorf("default_model %q is not a configured model", a.DefaultModel)
	}
	for _, u := range a.Users {
		for _, m := range u.Models {
			if !seen[m] {
				return fmt.Errorf("user %q: model %q is not a configured model", u.Name, m)
			}
		}
	}
	return nil
}

// build turns the configuration into a gateway.Model.
func (mc *ModelConfig) build(repl *caddy.Replacer, logger *zap.Logger) (*gateway.Model, error) {
	if mc.ConsulService != "" && len(mc.Static) > 0 {
		return nil, fmt.Errorf("static and consul_service exclude each other")
	}
	if mc.ConsulService == "" && (mc.ConsulTag != "" || mc.ConsulFilter != "" || mc.ConsulDatacenter != "" || mc.ConsulToken != "") {
		return nil, fmt.Errorf("consul_tag, consul_filter, consul_datacenter and consul_token need consul_service")
	}
	proto := mc.Protocol
	if proto == "" {
		proto = "openai"
	}
	if _, ok := protocols[proto]; !ok {
		return nil, fmt.Errorf("unknown protocol %q (want one of %s)", proto, protocolNames())
	}
	apiKey := repl.ReplaceAll(mc.APIKey, "")
	if mc.APIKeyEnv != "" {
		if mc.APIKey != "" {
			return nil, fmt.Errorf("api_key and api_key_env are exclusive")
		}
		if apiKey = os.Getenv(mc.APIKeyEnv); apiKey == "" {
			return nil, fmt.Errorf("api_key_env: environment variable %s is not set", mc.APIKeyEnv)
		}
	}
	policy, err := pool.NewPolicy(mc.LBPolicy)
	if err != nil {
		return nil, err
	}
	bs := mc.Breaker.settings()
	if err := bs.Validate(); err != nil {
		return nil, err
	}
	qlen, qtimeout := mc.Queue.options()
	var replicas []*pool.Replica
	for _, addr := range mc.Static {
		rproto, u, err := splitProtocol(addr)
		if err != nil {
			return nil, err
		}
		r, err := pool.NewReplica(u)
		if err != nil {
			return nil, err
		}
		r.Protocol = rproto
		r.MaxConcurrency = mc.MaxConcurrency
		r.Weight = mc.Weights[u]
		replicas = append(replicas, r)
	}
	for u := range mc.Weights {
		if !slices.Contains(mc.Static, u) {
			return nil, fmt.Errorf("weight for %q, which is not a static replica", u)
		}
	}
	// Breakers are shared by model, replica URL and settings across config
	// reloads (see pool's registry); Cleanup closes the pool to let go.
	name := mc.Name
	p := pool.NewWithOptions(mc.Name, policy, pool.Options{
		Breaker:      bs,
		QueueLength:  qlen,
		QueueTimeout: qtimeout,
		OnBreakerChange: func(replica string, from, to pool.BreakerState) {
			log := logger.Info
			if to == pool.StateOpen {
				log = logger.Warn
			}
			log("replica circuit breaker "+to.String(), zap.String("model_type", name),
				zap.String("replica", replica), zap.String("from", from.String()))
		},
	})
	p.Set(replicas)
	var client *http.Client
	if mc.DialTimeout > 0 {
		client = newReplicaClient(time.Duration(mc.DialTimeout))
	}
	return &gateway.Model{
		MaxAttempts:   mc.MaxAttempts,
		TryDuration:   time.Duration(mc.TryDuration),
		Client:        client,
		Name:          mc.Name,
		Pool:          p,
		Backends:      protocols,
		Protocol:      proto,
		UpstreamModel: mc.UpstreamModel,
		SystemMessage: mc.SystemMessage,
		MaxTokens:     mc.MaxTokens,
		APIKey:        apiKey,
		Timeouts: gateway.Timeouts{
			FirstToken: time.Duration(mc.FirstTokenTimeout),
			Idle:       time.Duration(mc.IdleTimeout),
			Total:      time.Duration(mc.TotalTimeout),
		},
	}, nil
}

func (a *App) modelNames() []string {
	names := make([]string, len(a.Models))
	for i, m := range a.Models {
		names[i] = m.Name
	}
	return names
}

// allUsers merges inline and file users; a user without a model list may
// use every model.
func (a *App) allUsers(fileUsers []auth.User) []auth.User {
	users := append(append([]auth.User(nil), a.Users...), fileUsers...)
	for i := range users {
		if len(users[i].Models) == 0 {
			users[i].Models = a.modelNames()
		}
	}
	return users
}

// Start begins the periodic work: key refresh and rotation, reloading
// the users file, and health probing of static replicas.
func (a *App) Start() error {
	ctx, cancel := context.WithCancel(context.Background())
	a.bg = &background{cancel: cancel}
	if a.storedKeys() {
		a.bg.run(ctx, a.keyLoop)
	}
	if a.prober != nil {
		a.prober.Start()
	}
	if a.usersFile != "" {
		interval := time.Duration(a.UsersFileRefresh)
		if interval <= 0 {
			interval = 2 * time.Second
		}
		a.bg.run(ctx, func(ctx context.Context) {
			auth.WatchUsersFile(ctx, a.usersFile, interval,
				func(users []auth.User) error {
					if err := a.users.Replace(a.allUsers(users)); err != nil {
						return err
					}
					a.logger.Info("reloaded the users file", zap.String("file", a.usersFile), zap.Int("users", len(users)))
					return nil
				},
				func(err error) {
					a.logger.Error("users file not reloaded; keeping the current users", zap.Error(err))
				})
		})
	}
	return nil
}

// Stop ends the periodic work and waits for it, so nothing of this
// configuration outlives a reload.
func (a *App) Stop() error {
	if a.prober != nil {
		a.prober.Stop()
	}
	if a.bg != nil {
		a.bg.stop()
	}
	return nil
}

// Cleanup releases the Consul watchers and the replica connections of
// this configuration. A watcher the next configuration uses keeps running.
func (a *App) Cleanup() error {
	for _, release := range a.cleanups {
		release()
	}
	a.cleanups = nil
	if a.client != nil {
		a.client.CloseIdleConnections()
	}
	for _, m := range a.models {
		m.Pool.Close()
		if m.Client != nil {
			m.Client.CloseIdleConnections()
		}
	}
	return nil
}

// Pipeline is the inference pipeline handlers run.
func (a *App) Pipeline() *gateway.Pipeline { return a.pipeline }

// TokenEndpoint serves POST /auth/token.
func (a *App) TokenEndpoint() http.Handler { return a.token }

// OpenAPI is the OpenAPI 3.1 description of the API this app serves.
func (a *App) OpenAPI() []byte { return a.openapi }

// JWKS is the JSON Web Key Set of the verifying keys, as they are now.
func (a *App) JWKS() []byte {
	b, _ := a.keys.JWKS()
	return b
}

// FromContext returns the llmedge app of the configuration ctx belongs to,
// provisioning it with defaults when the configuration has none.
func FromContext(ctx caddy.Context) (*App, error) {
	v, err := ctx.App("llmedge")
	if err != nil {
		return nil, err
	}
	return v.(*App), nil
}

// Interface guards.
var (
	_ caddy.App          = (*App)(nil)
	_ caddy.Provisioner  = (*App)(nil)
	_ caddy.Validator    = (*App)(nil)
	_ caddy.CleanerUpper = (*App)(nil)
)
