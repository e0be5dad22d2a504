// Package llmedge is the `llmedge` Caddy app: the long-lived state that
// llmedge's HTTP handlers share (users, signing keys, model pools). It
// parses configuration and provisions the plain-Go packages that do the
// work.
package llmedge

import (
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/auth"
	"github.com/llmedge/llmedge/backends"
	"github.com/llmedge/llmedge/backends/openai"
	"github.com/llmedge/llmedge/discovery"
	"github.com/llmedge/llmedge/gateway"
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
	// Consul says how to reach Consul for models with a consul_service
	// and for the `consul` upstream source.
	Consul *ConsulOptions `json:"consul,omitempty"`

	// cleanups release this config's Consul watchers.
	cleanups []func()
	users    *auth.Users
	keys     *auth.KeyRing
	jwks     []byte
	issuer   *auth.Issuer
	pipeline *gateway.Pipeline
	token    *auth.TokenEndpoint
	client   *http.Client
	logger   *zap.Logger
}

// ModelConfig configures one model type.
type ModelConfig struct {
	Name string `json:"name"`
	// Static lists replica base URLs.
	Static []string `json:"static,omitempty"`
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
	// APIKey is sent to replicas as a Bearer token.
	APIKey string `json:"api_key,omitempty"`
	// MaxConcurrency caps outstanding requests per replica.
	MaxConcurrency int `json:"max_concurrency,omitempty"`
	// Timeouts; zero takes the gateway's defaults (60s, 30s, 10m).
	FirstTokenTimeout caddy.Duration `json:"first_token_timeout,omitempty"`
	IdleTimeout       caddy.Duration `json:"idle_timeout,omitempty"`
	TotalTimeout      caddy.Duration `json:"total_timeout,omitempty"`
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

// protocols maps protocol names to adapters.
var protocols = map[string]backends.Backend{
	"openai": &openai.Backend{},
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
	users := append([]auth.User(nil), a.Users...)
	if a.UsersFile != "" {
		more, err := auth.LoadUsersFile(repl.ReplaceAll(a.UsersFile, ""))
		if err != nil {
			return err
		}
		users = append(users, more...)
	}
	for i := range users {
		if len(users[i].Models) == 0 { // no list: every model
			users[i].Models = a.modelNames()
		}
	}
	var err error
	if a.users, err = auth.NewUsers(users); err != nil {
		return fmt.Errorf("users: %w", err)
	}

	if a.keys, err = auth.LoadOrCreateKeyRing(ctx, ctx.Storage(), keyStorageKey); err != nil {
		return fmt.Errorf("signing keys: %w", err)
	}
	if a.jwks, err = a.keys.JWKS(); err != nil {
		return fmt.Errorf("signing keys: %w", err)
	}
	a.issuer = &auth.Issuer{Keys: a.keys, Issuer: a.Issuer, Audience: a.Audience, TTL: time.Duration(a.TokenTTL)}
	a.token = &auth.TokenEndpoint{
		Users: a.users, Issuer: a.issuer, Realm: Realm,
		UserLimiter: auth.NewFailureLimiter(loginFailuresPerUser, loginWindow, nil),
		AddrLimiter: auth.NewFailureLimiter(loginFailuresPerAddr, loginWindow, nil),
		ClientAddr:  clientIP,
	}

	a.client = &http.Client{Transport: &http.Transport{
		Proxy:               nil, // replicas are reached directly, never through an env proxy
		DialContext:         (&net.Dialer{Timeout: time.Duration(a.DialTimeout), KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        1024,
		MaxIdleConnsPerHost: 256,
		IdleConnTimeout:     90 * time.Second,
		ForceAttemptHTTP2:   false,
	}}

	models := make(map[string]*gateway.Model, len(a.Models))
	var consul discovery.ConsulConfig
	var watching []*discovery.Watcher
	for _, mc := range a.Models {
		m, err := mc.build(repl)
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
	}
	WaitSynced(ctx, watching, a.Consul.syncTimeout(), a.logger)
	a.pipeline = &gateway.Pipeline{
		Verifier:  &auth.Verifier{Keys: a.keys, Issuer: a.Issuer, Audience: a.Audience, Leeway: 30 * time.Second},
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
func (mc *ModelConfig) build(repl *caddy.Replacer) (*gateway.Model, error) {
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
		return nil, fmt.Errorf("unknown protocol %q (want openai)", proto)
	}
	policy, err := pool.NewPolicy(mc.LBPolicy)
	if err != nil {
		return nil, err
	}
	p := pool.New(mc.Name, policy)
	var replicas []*pool.Replica
	for _, u := range mc.Static {
		r, err := pool.NewReplica(u)
		if err != nil {
			return nil, err
		}
		r.MaxConcurrency = mc.MaxConcurrency
		replicas = append(replicas, r)
	}
	p.Set(replicas)
	return &gateway.Model{
		Name:          mc.Name,
		Pool:          p,
		Backends:      protocols,
		Protocol:      proto,
		UpstreamModel: mc.UpstreamModel,
		SystemMessage: mc.SystemMessage,
		MaxTokens:     mc.MaxTokens,
		APIKey:        repl.ReplaceAll(mc.APIKey, ""),
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

// Start implements caddy.App.
func (a *App) Start() error { return nil }

// Stop implements caddy.App.
func (a *App) Stop() error { return nil }

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
	return nil
}

// Pipeline is the inference pipeline handlers run.
func (a *App) Pipeline() *gateway.Pipeline { return a.pipeline }

// TokenEndpoint serves POST /auth/token.
func (a *App) TokenEndpoint() http.Handler { return a.token }

// JWKS is the JSON Web Key Set of the verifying keys.
func (a *App) JWKS() []byte { return a.jwks }

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
