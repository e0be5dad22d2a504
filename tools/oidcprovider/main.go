// Command oidcprovider is the OpenID provider the end-to-end tests trust:
// the certified OpenID Provider library of github.com/zitadel/oidc (its
// op package, with its example's in-memory storage for everything else)
// behind a storage of our own that issues JWT access tokens to
// client-credentials clients with the claims a test gives them (groups,
// roles, email, ...), and whose signing keys a test can rotate and retire
// while it runs. It listens on loopback only.
//
//	oidcprovider -clients clients.json [-addr 127.0.0.1:0] [-jwks-max-age 60]
//
// It prints "oidcprovider listening on <issuer>" once it serves. Test
// endpoints beside the provider's:
//
//	POST /test/rotate?alg=RS256|ES256|PS256  a new active key; the old stay published
//	POST /test/retire                        unpublish every key but the active one
//	GET  /test/stats                         requests served, by endpoint
package main

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/zitadel/oidc/v3/example/server/storage"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// clientConfig is one client-credentials client of the clients file.
type clientConfig struct {
	ID       string         `json:"id"`
	Secret   string         `json:"secret"`
	Subject  string         `json:"subject"` // default: the id
	Audience []string       `json:"audience"`
	Claims   map[string]any `json:"claims"`
	Lifetime string         `json:"lifetime"` // default 5m
}

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "listen address (loopback)")
	clientsFile := flag.String("clients", "", "JSON array of client-credentials clients")
	maxAge := flag.Int("jwks-max-age", -1, "Cache-Control max-age of the JWKS, seconds (none when negative)")
	flag.Parse()

	var clients []clientConfig
	if *clientsFile != "" {
		b, err := os.ReadFile(*clientsFile)
		if err != nil {
			log.Fatal(err)
		}
		if err := json.Unmarshal(b, &clients); err != nil {
			log.Fatalf("clients file: %v", err)
		}
	}
	host, _, err := net.SplitHostPort(*addr)
	if err != nil || !(host == "localhost" || net.ParseIP(host).IsLoopback()) {
		log.Fatalf("-addr %s: want a loopback address", *addr)
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	issuer := "http://" + ln.Addr().String()

	st, err := newStore(clients)
	if err != nil {
		log.Fatal(err)
	}
	var cryptoKey [32]byte
	_, _ = rand.Read(cryptoKey[:])
	provider, err := op.NewProvider(&op.Config{CryptoKey: cryptoKey, AuthMethodPost: true, GrantTypeRefreshToken: false},
		st, op.StaticIssuer(issuer), op.WithAllowInsecure())
	if err != nil {
		log.Fatal(err)
	}

	var stats sync.Map // path → *atomic.Int64
	count := func(name string) {
		v, _ := stats.LoadOrStore(name, new(atomic.Int64))
		v.(*atomic.Int64).Add(1)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /test/rotate", func(w http.ResponseWriter, r *http.Request) {
		kid, err := st.rotate(r.URL.Query().Get("alg"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		writeJSON(w, map[string]string{"kid": kid})
	})
	mux.HandleFunc("POST /test/retire", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, map[string]any{"retired": st.retire()})
	})
	mux.HandleFunc("GET /test/stats", func(w http.ResponseWriter, r *http.Request) {
		out := map[string]int64{}
		stats.Range(func(k, v any) bool { out[k.(string)] = v.(*atomic.Int64).Load(); return true })
		writeJSON(w, out)
	})
	mux.Handle("/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/.well-known/openid-configuration":
			count("discovery")
		case "/keys":
			count("jwks")
			if *maxAge >= 0 {
				w.Header().Set("Cache-Control", "max-age="+strconv.Itoa(*maxAge))
			}
		case "/oauth/token":
			count("token")
		}
		provider.ServeHTTP(w, r)
	}))
	fmt.Println("oidcprovider listening on " + issuer)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	log.Fatal(srv.Serve(ln))
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// signingKey is one of the provider's keys.
type signingKey struct {
	id  string
	alg jose.SignatureAlgorithm
	key crypto.Signer
}

func (k *signingKey) SignatureAlgorithm() jose.SignatureAlgorithm { return k.alg }
func (k *signingKey) Key() any                                    { return k.key }
func (k *signingKey) ID() string                                  { return k.id }

// publicKey is a key as the JWKS publishes it.
type publicKey struct{ k *signingKey }

func (p publicKey) ID() string                         { return p.k.id }
func (p publicKey) Algorithm() jose.SignatureAlgorithm { return p.k.alg }
func (p publicKey) Use() string                        { return "sig" }
func (p publicKey) Key() any                           { return p.k.key.Public() }
func newKey(alg string) (*signingKey, error) {
	var b [8]byte
	_, _ = rand.Read(b[:])
	k := &signingKey{id: fmt.Sprintf("%x", b), alg: jose.SignatureAlgorithm(alg)}
	var err error
	switch alg {
	case "RS256", "PS256":
		k.key, err = rsa.GenerateKey(rand.Reader, 2048)
	case "ES256":
		k.key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	default:
		return nil, fmt.Errorf("alg %q: want RS256, PS256 or ES256", alg)
	}
	return k, err
}

// store is the example's in-memory storage with our clients and keys.
type store struct {
	*storage.Storage
	mu      sync.Mutex
	keys    []*signingKey // published; the last is active
	clients map[string]*client
}

func newStore(cfgs []clientConfig) (*store, error) {
	k, err := newKey("RS256")
	if err != nil {
		return nil, err
	}
	s := &store{Storage: storage.NewStorage(storage.NewUserStore("http://localhost/")), keys: []*signingKey{k}, clients: map[string]*client{}}
	for _, c := range cfgs {
		lifetime := 5 * time.Minute
		if c.Lifetime != "" {
			if lifetime, err = time.ParseDuration(c.Lifetime); err != nil {
				return nil, fmt.Errorf("client %s: lifetime: %w", c.ID, err)
			}
		}
		if c.Subject == "" {
			c.Subject = c.ID
		}
		s.clients[c.ID] = &client{cfg: c, lifetime: lifetime}
	}
	return s, nil
}

func (s *store) rotate(alg string) (string, error) {
	if alg == "" {
		alg = "RS256"
	}
	k, err := newKey(alg)
	if err != nil {
		return "", err
	}
	s.mu.Lock()
	s.keys = append(s.keys, k)
	s.mu.Unlock()
	return k.id, nil
}

func (s *store) retire() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var gone []string
	for _, k := range s.keys[:len(s.keys)-1] {
		gone = append(gone, k.id)
	}
	s.keys = s.keys[len(s.keys)-1:]
	return gone
}

// SigningKey implements op.Storage: the newest key signs.
func (s *store) SigningKey(context.Context) (op.SigningKey, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.keys[len(s.keys)-1], nil
}

// SignatureAlgorithms implements op.Storage.
func (s *store) SignatureAlgorithms(context.Context) ([]jose.SignatureAlgorithm, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var algs []jose.SignatureAlgorithm
	for _, k := range s.keys {
		algs = append(algs, k.alg)
	}
	return algs, nil
}

// KeySet implements op.Storage: every published key.
func (s *store) KeySet(context.Context) ([]op.Key, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]op.Key, len(s.keys))
	for i, k := range s.keys {
		out[i] = publicKey{k}
	}
	return out, nil
}

// ClientCredentials implements op.ClientCredentialsStorage.
func (s *store) ClientCredentials(_ context.Context, id, secret string) (op.Client, error) {
	c, ok := s.clients[id]
	if !ok || c.cfg.Secret != secret {
		return nil, errors.New("wrong client id or secret")
	}
	return c, nil
}

// ClientCredentialsTokenRequest implements op.ClientCredentialsStorage.
func (s *store) ClientCredentialsTokenRequest(_ context.Context, id string, scopes []string) (op.TokenRequest, error) {
	c, ok := s.clients[id]
	if !ok {
		return nil, errors.New("unknown client")
	}
	return &oidc.JWTTokenRequest{Subject: c.cfg.Subject, Audience: c.cfg.Audience, Scopes: scopes}, nil
}

// GetClientByClientID implements op.Storage: ours, else the example's.
func (s *store) GetClientByClientID(ctx context.Context, id string) (op.Client, error) {
	if c, ok := s.clients[id]; ok {
		return c, nil
	}
	return s.Storage.GetClientByClientID(ctx, id)
}

// CreateAccessToken implements op.Storage: an id and the client's
// lifetime (JWT access tokens are not stored).
func (s *store) CreateAccessToken(ctx context.Context, req op.TokenRequest) (string, time.Time, error) {
	for _, c := range s.clients {
		if c.cfg.Subject == req.GetSubject() {
			var b [16]byte
			_, _ = rand.Read(b[:])
			return fmt.Sprintf("%x", b), time.Now().Add(c.lifetime), nil
		}
	}
	return s.Storage.CreateAccessToken(ctx, req)
}

// GetPrivateClaimsFromScopes implements op.Storage: our clients' claims.
func (s *store) GetPrivateClaimsFromScopes(ctx context.Context, userID, clientID string, scopes []string) (map[string]any, error) {
	if c, ok := s.clients[clientID]; ok {
		return c.cfg.Claims, nil
	}
	return s.Storage.GetPrivateClaimsFromScopes(ctx, userID, clientID, scopes)
}

// client is a client-credentials client issuing JWT access tokens.
type client struct {
	cfg      clientConfig
	lifetime time.Duration
}

func (c *client) GetID() string                       { return c.cfg.ID }
func (c *client) RedirectURIs() []string              { return nil }
func (c *client) PostLogoutRedirectURIs() []string    { return nil }
func (c *client) ApplicationType() op.ApplicationType { return op.ApplicationTypeWeb }
func (c *client) AuthMethod() oidc.AuthMethod         { return oidc.AuthMethodBasic }
func (c *client) ResponseTypes() []oidc.ResponseType  { return nil }
func (c *client) GrantTypes() []oidc.GrantType {
	return []oidc.GrantType{oidc.GrantTypeClientCredentials}
}
func (c *client) LoginURL(string) string               { return "" }
func (c *client) AccessTokenType() op.AccessTokenType  { return op.AccessTokenTypeJWT }
func (c *client) IDTokenLifetime() time.Duration       { return c.lifetime }
func (c *client) DevMode() bool                        { return true }
func (c *client) IsScopeAllowed(string) bool           { return true }
func (c *client) IDTokenUserinfoClaimsAssertion() bool { return false }
func (c *client) ClockSkew() time.Duration             { return 0 }
func (c *client) RestrictAdditionalIdTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}
func (c *client) RestrictAdditionalAccessTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}
