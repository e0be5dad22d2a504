package auth

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"go.uber.org/zap"
)

// ServiceConfig configures a Service; every value is resolved (no
// placeholders, secrets read).
type ServiceConfig struct {
	// Issuer and Audience of the tokens issued; TokenTTL their lifetime.
	Issuer, Audience string
	TokenTTL         time.Duration
	// Users are the inline accounts; UsersFile, when set, holds more,
	// checked for changes every UsersFileRefresh.
	Users            []User
	UsersFile        string
	UsersFileRefresh time.Duration
	// Models are every model served: a user without a list may use all.
	Models []string
	// Clients, client_id → bcrypt hash of the secret, are required at the
	// token endpoint when any are configured.
	Clients map[string]string
	// SigningAlg is EdDSA or ES256 (keys kept in Storage, rotated every
	// KeyRotation when set, reloaded every KeyRefresh to see other
	// instances' rotations) or HS256 with HMACSecret.
	SigningAlg              string
	HMACSecret              []byte
	KeyRotation, KeyRefresh time.Duration
	// APIKeyTTL is the lifetime of API keys created without one;
	// APIKeysRefresh how often keys made elsewhere are read.
	APIKeyTTL, APIKeysRefresh time.Duration
	// RefreshTokenTTL is how long after a login its refresh tokens work;
	// negative turns refresh tokens off.
	RefreshTokenTTL time.Duration
	// Storage keeps signing keys, API keys and refresh tokens, shared by
	// every instance that shares it.
	Storage RefreshStorage
	// Realm names the protected space in WWW-Authenticate challenges.
	Realm string
	// ClientAddr is a request's client address, for the per-address login
	// limit.
	ClientAddr func(*http.Request) string
	// Revocations knows and shares the revoked tokens; nil revokes none.
	Revocations Revocations
	// LoginFailures, when set, shares the failed logins' counts and
	// lockouts between instances (Redis); each instance counts alone
	// while it cannot answer.
	LoginFailures SharedFailures
	// FormMaxBytes and FormTimeout bound the bodies of the token and
	// revocation endpoints (their size, and the time to read them); 0
	// means DefaultMaxTokenBodyBytes and DefaultTokenBodyTimeout.
	FormMaxBytes int64
	FormTimeout  time.Duration
	// OnIssued and OnFailure hear tokens issued and refused, for metrics.
	OnIssued  func()
	OnFailure func(reason string)
	Logger    *zap.Logger
}

// Revocations is where revoked tokens are known and shared with the other
// instances (package tenancy keeps them).
type Revocations interface {
	// Revoked reports whether the token of user with id jti, issued at
	// iat, is refused.
	Revoked(user, jti string, iat time.Time) bool
	// RevokeToken refuses a token until expires (zero: its longest life).
	RevokeToken(ctx context.Context, jti string, expires time.Time) (time.Time, error)
	// RevokeUser refuses every token of user issued before now; why names
	// the cause for the metrics ("user", "disabled_user").
	RevokeUser(ctx context.Context, user, why string) (time.Time, error)
}

// Defaults of the Service.
const (
	DefaultKeyRefresh       = time.Minute
	DefaultAPIKeysRefresh   = 10 * time.Second
	DefaultUsersFileRefresh = 2 * time.Second
	// VerifyLeeway is the clock skew allowed on a token's times.
	VerifyLeeway = 30 * time.Second
)

// Where the Service keeps things in Storage.
const (
	keyStorageKey        = "llmedge/signing_keys.json"
	apiKeysStorageKey    = "llmedge/api_keys.json"
	refreshStoragePrefix = "llmedge/refresh_tokens"
)

// Limits of the Service's own work.
const (
	// tokenCacheSize bounds the verified tokens remembered (a few MB at most).
	tokenCacheSize = 10_000
	// Brute-force protection of the token endpoint: after this many
	// failed logins within loginWindow, a username or a client address
	// gets 429.
	loginFailuresPerUser = 10
	loginFailuresPerAddr = 100
	loginWindow          = 15 * time.Minute
	// unknownKIDReloadEvery bounds the storage reads an unknown kid can cause.
	unknownKIDReloadEvery = time.Second
	// usageFlushEvery spaces the writes of API keys' last-use times: one
	// storage write per instance per period at most, whatever the load.
	usageFlushEvery = time.Minute
	// refreshSweepEvery spaces the removal of expired refresh families.
	refreshSweepEvery = time.Hour
	// stopFlushTimeout bounds the last flush when the service stops.
	stopFlushTimeout = 5 * time.Second
)

// Service holds a configuration's credentials (users, OAuth clients,
// signing keys, API keys, refresh tokens), the endpoints that issue and
// revoke them, and the Bearer authenticator that checks them; Start runs
// what keeps them current (key refresh and rotation, API keys made on
// other instances, the users file).
type Service struct {
	cfg     ServiceConfig
	logger  *zap.Logger
	users   *Users
	clients *Clients
	keys    *KeyRing
	stored  bool // the keys live in Storage (not HS256)
	kidGate gate
	apiKeys *APIKeys
	refresh *RefreshTokens // nil when refresh tokens are off

	verifier *Verifier
	bearer   *BearerAuth
	token    *TokenEndpoint
	revoke   *RevokeEndpoint

	mu        sync.Mutex
	fileUsers []User // as last loaded, to see who a reload disables

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// NewService loads the users, the signing keys (creating them on first
// use) and the API keys, and sets up the endpoints.
func NewService(ctx context.Context, cfg ServiceConfig) (*Service, error) {
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	s := &Service{cfg: cfg, logger: cfg.Logger, kidGate: gate{every: unknownKIDReloadEvery}}
	if cfg.UsersFile != "" {
		var err error
		if s.fileUsers, err = LoadUsersFile(cfg.UsersFile); err != nil {
			return nil, err
		}
	}
	var err error
	if s.users, err = NewUsers(s.allUsers(s.fileUsers)); err != nil {
		return nil, fmt.Errorf("users: %w", err)
	}
	if s.clients, err = NewClients(cfg.Clients); err != nil {
		return nil, fmt.Errorf("clients: %w", err)
	}
	if err := s.loadKeys(ctx); err != nil {
		return nil, err
	}
	// API keys and refresh tokens live in storage whatever the signing
	// algorithm, so that every instance sharing it honours them. The keys
	// are read now: a gateway must not start and refuse keys it will know
	// ten seconds later.
	s.apiKeys = &APIKeys{Storage: cfg.Storage, StorageKey: apiKeysStorageKey, Users: s.users, DefaultTTL: cfg.APIKeyTTL}
	if err := s.apiKeys.Reload(ctx); err != nil {
		return nil, fmt.Errorf("api keys: %w", err)
	}
	if cfg.RefreshTokenTTL >= 0 {
		s.refresh = &RefreshTokens{Storage: cfg.Storage, Prefix: refreshStoragePrefix, TTL: cfg.RefreshTokenTTL}
	}
	s.endpoints()
	return s, nil
}

func (s *Service) endpoints() {
	cfg := s.cfg
	s.verifier = &Verifier{Keys: s.keys, Issuer: cfg.Issuer, Audience: cfg.Audience, Leeway: VerifyLeeway,
		Refresh: s.reloadOnUnknownKID, Cache: NewTokenCache(tokenCacheSize), Revoked: s.tokenRevoked}
	s.bearer = &BearerAuth{Verifier: s.verifier, Realm: cfg.Realm, APIKeys: s.apiKeys}
	s.token = &TokenEndpoint{
		Users: s.users, Issuer: &Issuer{Keys: s.keys, Issuer: cfg.Issuer, Audience: cfg.Audience, TTL: cfg.TokenTTL},
		Realm:        cfg.Realm,
		MaxBodyBytes: cfg.FormMaxBytes,
		BodyTimeout:  cfg.FormTimeout,
		UserLimiter:  NewFailureLimiter(loginFailuresPerUser, loginWindow, nil),
		AddrLimiter:  NewFailureLimiter(loginFailuresPerAddr, loginWindow, nil),
		ClientAddr:   cfg.ClientAddr,
		Clients:      s.clients,
		OnIssued:     cfg.OnIssued,
		OnFailure:    cfg.OnFailure,
		Refresh:      s.refresh,
		OnError:      func(err error) { s.logger.Error("token storage failed", zap.Error(err)) },
		OnReuse: func(user, family string) {
			// Either the client or an attacker holds a stolen copy; never
			// log the token itself.
			s.logger.Warn("refresh token reused; every token of its login is revoked",
				zap.String("user", user), zap.String("family", family))
		},
		UserRevoked: func(user string, loginAt time.Time) bool {
			return s.cfg.Revocations != nil && s.cfg.Revocations.Revoked(user, "", loginAt)
		},
	}
	if cfg.LoginFailures != nil {
		// A username and a client's network are counted apart.
		s.token.UserLimiter.Share(cfg.LoginFailures, "user:")
		s.token.AddrLimiter.Share(cfg.LoginFailures, "addr:")
	}
	s.revoke = &RevokeEndpoint{Verifier: s.verifier, Clients: s.clients, Realm: cfg.Realm, Refresh: s.refresh,
		MaxBodyBytes: cfg.FormMaxBytes, BodyTimeout: cfg.FormTimeout,
		Revoke: func(ctx context.Context, jti string, expires time.Time) error {
			if s.cfg.Revocations == nil {
				return nil
			}
			_, err := s.cfg.Revocations.RevokeToken(ctx, jti, expires)
			return err
		}}
}

// allUsers merges inline and file users; a user without a model list may
// use every model.
func (s *Service) allUsers(fileUsers []User) []User {
	users := append(append([]User(nil), s.cfg.Users...), fileUsers...)
	for i := range users {
		if len(users[i].Models) == 0 {
			users[i].Models = s.cfg.Models
		}
	}
	return users
}

// tokenRevoked is the verifier's Revoked hook: a revoked token, a token
// of a user revoked since, a disabled or removed user.
func (s *Service) tokenRevoked(p *Principal) bool {
	if s.Revoked(p) {
		return true
	}
	// An identity provider's user (an exchanged token) is not a local
	// one; its name must still lie in its provider's namespace.
	if p.Provider != "" {
		return s.users.Unplaced(p.Provider, p.Subject)
	}
	return !s.users.Usable(p.Subject)
}

// Revoked reports whether the revocations refuse p's token: the token
// itself, or every token of its subject issued before (`llmedge revoke`).
// It serves the outside identities' verifiers too.
func (s *Service) Revoked(p *Principal) bool {
	return s.cfg.Revocations != nil && s.cfg.Revocations.Revoked(p.Subject, p.TokenID, p.IssuedAt)
}

// TrustOutside wires the authenticators of outside identities in: the
// Bearer check passes on the tokens foreign claims (see
// BearerAuth.Foreign), and the token endpoint exchanges the tokens the
// verifiers know (RFC 8693). Call it before serving.
func (s *Service) TrustOutside(foreign func(token string) bool, exchange []SubjectTokenVerifier) {
	s.bearer.Foreign = foreign
	s.token.Exchange = exchange
}

// Authenticator checks Bearer credentials: llmedge's access tokens and
// API keys.
func (s *Service) Authenticator() *BearerAuth { return s.bearer }

// TokenEndpoint serves POST /auth/token.
func (s *Service) TokenEndpoint() *TokenEndpoint { return s.token }

// RevokeEndpoint serves POST /auth/revoke (RFC 7009).
func (s *Service) RevokeEndpoint() *RevokeEndpoint { return s.revoke }

// Verifier checks llmedge's access tokens.
func (s *Service) Verifier() *Verifier { return s.verifier }

// Users are the accounts of this configuration.
func (s *Service) Users() *Users { return s.users }

// APIKeys is the API key store.
func (s *Service) APIKeys() *APIKeys { return s.apiKeys }

// JWKS is the JSON Web Key Set of the verifying keys, as they are now.
func (s *Service) JWKS() []byte {
	b, _ := s.keys.JWKS()
	return b
}

// Start begins the periodic work: key refresh and rotation, reloading
// API keys and the users file.
func (s *Service) Start() {
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	if s.stored {
		s.run(ctx, s.keyLoop)
	}
	s.run(ctx, s.credentialsLoop)
	if s.cfg.UsersFile != "" {
		s.run(ctx, s.watchUsersFile)
	}
}

// Stop ends the periodic work and waits for it, then writes the API keys'
// last-use times not yet written, so they are not lost with the
// configuration.
func (s *Service) Stop() {
	if s.cancel != nil {
		s.cancel()
	}
	s.wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), stopFlushTimeout)
	defer cancel()
	if err := s.apiKeys.FlushUsage(ctx); err != nil {
		s.logger.Warn("writing API keys' last use failed", zap.Error(err))
	}
}

func (s *Service) run(ctx context.Context, fn func(context.Context)) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		fn(ctx)
	}()
}

// gate lets one caller through per period.
type gate struct {
	every time.Duration
	mu    sync.Mutex
	last  time.Time
}

func (g *gate) allow() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if time.Since(g.last) < g.every {
		return false
	}
	g.last = time.Now()
	return true
}
