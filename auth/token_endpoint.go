package auth

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math"
	"mime"
	"mime/multipart"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/llmedge/llmedge/api"
)

// DefaultMaxTokenBodyBytes is the token and revocation endpoints' body
// limit when MaxBodyBytes is zero: room for the largest form, a token
// exchange whose subject token is MaxTokenBytes long, and little more.
const DefaultMaxTokenBodyBytes = 16 << 10

// DefaultTokenBodyTimeout is the token and revocation endpoints' body
// deadline when BodyTimeout is zero: a form of a few hundred bytes has no
// reason to take longer, and a login form sent a byte at a time must not
// hold a connection for minutes.
const DefaultTokenBodyTimeout = 10 * time.Second

// Details of the token endpoint's answers.
const (
	DetailBadCredentials = "Incorrect username or password"
	DetailTooManyFails   = "Too many failed login attempts, retry later"
	DetailBadClient      = "Invalid client credentials"
	detailParseError     = "There was an error parsing the body"
	grantTypePattern     = "^password$"
	// grantTypesPattern is the pattern when refresh tokens are on.
	grantTypesPattern = "^(password|refresh_token)$"
	// DetailStorageDown answers a refresh the token storage could not serve.
	DetailStorageDown = "Token storage is unavailable, retry later"
)

// Details of the refresh grant's invalid_grant answers. They say what is
// wrong with the token, never anything of it.
const (
	DetailRefreshInvalid = "Invalid refresh token"
	DetailRefreshExpired = "Refresh token expired, log in again"
	DetailRefreshRevoked = "Refresh token revoked, log in again"
	DetailRefreshReused  = "Refresh token already used: every token of this login is revoked, log in again"
	DetailRefreshClient  = "Refresh token was issued to another client"
	DetailRefreshUser    = "Refresh token is no longer valid for this user"
	detailRefreshOff     = "Refresh tokens are turned off on this server"
	detailRefreshMissing = "Missing parameter: refresh_token"
)

// formFields are the OAuth2PasswordRequestForm fields, in FastAPI's order
// (the order of its validation errors).
var formFields = []string{"grant_type", "username", "password", "scope", "client_id", "client_secret", "refresh_token"}

// TokenResponse is the 200 answer of the token endpoint (RFC 6749 §5.1).
type TokenResponse struct {
	AccessToken string `json:"access_token"`
	TokenType   string `json:"token_type"`
	ExpiresIn   int64  `json:"expires_in"`
	Scope       string `json:"scope"`
	// RefreshToken is set when refresh tokens are on (RFC 6749 §5.1).
	RefreshToken string `json:"refresh_token,omitempty"`
	// IssuedTokenType answers a token exchange (RFC 8693 §2.2.1).
	IssuedTokenType string `json:"issued_token_type,omitempty"`
}

// TokenEndpoint serves POST /auth/token, the OAuth 2.0 password grant in
// the shape of FastAPI's OAuth2PasswordRequestForm, and, with Refresh
// set, the refresh_token grant (RFC 6749 §6) with rotation and reuse
// detection (RFC 9700 §4.14.2).
//
// Answers, all with Cache-Control: no-store and Pragma: no-cache:
//   - 200 TokenResponse; scope is the granted "model:<type>" scopes;
//   - 405 {"detail":"Method Not Allowed"} + Allow: POST for other methods;
//   - 413 for a body over MaxBodyBytes;
//   - 400 invalid_request for an unparsable body or a repeated parameter;
//   - 422 FastAPI validation list for missing username/password (an empty
//     value counts as missing, as in FastAPI; so does a body that is not
//     form-encoded or multipart) and for a grant_type other than
//     "password" (and "refresh_token" when refresh tokens are on);
//   - 429 + Retry-After while a limiter blocks the username or address;
//   - 401 invalid_grant + WWW-Authenticate: Bearer for bad credentials;
//   - 400 invalid_scope for a requested scope the user lacks.
//
// The refresh grant (grant_type=refresh_token, refresh_token, optional
// scope narrowing the login's) answers 200 with a new access token and a
// new refresh token, or, per RFC 6749 §5.2, 400 invalid_request (no
// refresh_token), 400 unsupported_grant_type (refresh tokens off), 400
// invalid_grant (unknown, expired, revoked or reused token, another
// client's, a disabled user's), 400 invalid_scope, 401 invalid_client;
// 503 when the token storage fails.
//
// client_id, client_secret and any Authorization header are ignored unless
// Clients is set.
// Passwords are never logged or echoed.
type TokenEndpoint struct {
	Users  *Users
	Issuer *Issuer
	// Realm goes in the WWW-Authenticate challenge of a 401.
	Realm string
	// MaxBodyBytes limits the request body (DefaultMaxTokenBodyBytes if 0).
	MaxBodyBytes int64
	// BodyTimeout bounds the reading of the body from the request's
	// arrival (DefaultTokenBodyTimeout if 0, none if negative): 408 after.
	BodyTimeout time.Duration
	// UserLimiter and AddrLimiter, when set, count failed logins per
	// username and per client address and answer 429 while blocked.
	UserLimiter, AddrLimiter *FailureLimiter
	// ClientAddr gives the client's address for AddrLimiter; the host of
	// r.RemoteAddr when nil. Behind trusted proxies, pass the real one.
	ClientAddr func(r *http.Request) string
	// Clients, when it has entries, must vouch for the client_id and
	// client_secret (HTTP Basic or form fields) of every request.
	Clients *Clients
	// OnIssued and OnFailure, when set, hear of every token issued and
	// every refusal (reason: locked_out, invalid_client, invalid_grant,
	// invalid_scope; refresh_reused as well as invalid_grant for a
	// refresh token used twice), for metrics.
	OnIssued  func()
	OnFailure func(reason string)
	// Refresh, when set, issues a refresh token with each access token and
	// serves grant_type=refresh_token.
	Refresh *RefreshTokens
	// OnError, when set, hears of storage failures (never a secret).
	OnError func(error)
	// OnReuse, when set, hears of a refresh token used twice, which
	// revoked the family (login) of that user: a security event.
	OnReuse func(user, family string)
	// UserRevoked, when set, reports whether user's tokens issued at
	// loginAt were revoked since (`llmedge revoke --user`): a refresh
	// token of that login is refused too.
	UserRevoked func(user string, loginAt time.Time) bool
	// Exchange, when set, serves the token exchange grant (RFC 8693):
	// each verifier is asked in turn whether it knows the subject token.
	Exchange []SubjectTokenVerifier
}

// ServeHTTP implements http.Handler.
func (e *TokenEndpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Cache-Control", "no-store")
	h.Set("Pragma", "no-cache")
	resp, apiErr := e.serve(w, r)
	if apiErr != nil {
		if reason := failureReason(apiErr); reason != "" && e.OnFailure != nil {
			e.OnFailure(reason)
		}
		apiErr.Write(w)
		return
	}
	if e.OnIssued != nil {
		e.OnIssued()
	}
	api.WriteJSON(w, http.StatusOK, resp)
}

// serve does the work of ServeHTTP: either a response or an error.
func (e *TokenEndpoint) serve(w http.ResponseWriter, r *http.Request) (*TokenResponse, *api.Error) {
	if r.Method != http.MethodPost {
		return nil, api.NewError(http.StatusMethodNotAllowed, "Method Not Allowed").WithHeader("Allow", http.MethodPost)
	}
	if e.Users == nil || e.Issuer == nil {
		return nil, api.NewError(http.StatusInternalServerError, "Internal Server Error")
	}
	form, apiErr := e.readForm(w, r)
	if apiErr != nil {
		return nil, apiErr
	}
	if form.Get("grant_type") == GrantTypeTokenExchange && len(form["grant_type"]) == 1 {
		return e.serveExchange(r, form)
	}
	f, apiErr := validateForm(form, e.Refresh != nil)
	if apiErr != nil {
		return nil, apiErr
	}

	addr := e.clientAddr(r)
	if apiErr := e.blocked(f.username, addr); apiErr != nil {
		return nil, apiErr
	}
	clientID, apiErr := e.client(r, f.clientID, f.clientSecret, addr)
	if apiErr != nil {
		return nil, apiErr
	}
	if f.grantType == "refresh_token" {
		return e.refresh(r.Context(), f, clientID, addr)
	}
	// The attempt counts before the password is checked, so that guesses
	// sent at once cannot all pass the check above; a right one forgets it.
	if wait := e.UserLimiter.Attempt(f.username); wait > 0 {
		return nil, tooManyFails(wait)
	}
	user, err := e.Users.Authenticate(f.username, f.password)
	if err != nil {
		e.AddrLimiter.Fail(addr)
		return nil, oauthError(http.StatusUnauthorized, "invalid_grant", DetailBadCredentials).
			WithHeader("WWW-Authenticate", challenge(e.Realm))
	}
	e.UserLimiter.Reset(f.username)

	granted, apiErr := grantScopes(user, f.scope)
	if apiErr != nil {
		return nil, apiErr
	}
	resp, apiErr := e.issue(user.Name, granted)
	if apiErr != nil {
		return nil, apiErr
	}
	if e.Refresh != nil {
		// A login still succeeds when the storage fails: the client gets
		// its access token, only without a refresh token.
		rt, _, err := e.Refresh.Issue(r.Context(), RefreshGrant{User: user.Name, Scopes: granted, ClientID: clientID})
		if err != nil {
			e.reportError(err)
		}
		resp.RefreshToken = rt
	}
	return resp, nil
}

// serveExchange serves the token exchange grant (RFC 8693).
func (e *TokenEndpoint) serveExchange(r *http.Request, form url.Values) (*TokenResponse, *api.Error) {
	if len(e.Exchange) == 0 {
		return nil, oauthError(http.StatusBadRequest, "unsupported_grant_type", detailExchangeOff)
	}
	for _, k := range []string{"scope", "client_id", "client_secret"} {
		if len(form[k]) > 1 {
			return nil, oauthError(http.StatusBadRequest, "invalid_request", "Parameter "+k+" was given more than once")
		}
	}
	xf, apiErr := validateExchange(form)
	if apiErr != nil {
		return nil, apiErr
	}
	addr := e.clientAddr(r)
	if apiErr := e.blocked("", addr); apiErr != nil {
		return nil, apiErr
	}
	clientID, apiErr := e.client(r, form.Get("client_id"), form.Get("client_secret"), addr)
	if apiErr != nil {
		return nil, apiErr
	}
	return e.exchange(r.Context(), xf, clientID, addr)
}

// blocked is the 429 while a limiter blocks the username (when given) or
// the address.
func (e *TokenEndpoint) blocked(username, addr string) *api.Error {
	wait := e.AddrLimiter.Blocked(addr)
	if username != "" {
		wait = max(wait, e.UserLimiter.Blocked(username))
	}
	if wait > 0 {
		return tooManyFails(wait)
	}
	return nil
}

// tooManyFails is the 429 of a blocked username or address.
func tooManyFails(wait time.Duration) *api.Error {
	secs := int64(math.Ceil(wait.Seconds()))
	// RFC 6749 has no code for it; temporarily_unavailable is its
	// registered code for "try again later" (§4.1.2.1).
	return oauthError(http.StatusTooManyRequests, "temporarily_unavailable", DetailTooManyFails).
		WithHeader("Retry-After", strconv.FormatInt(secs, 10))
}

// client authenticates the client when clients are checked (HTTP Basic,
// or the form's fields) and returns its id; "" when they are not.
func (e *TokenEndpoint) client(r *http.Request, formID, formSecret, addr string) (string, *api.Error) {
	if !e.Clients.Required() {
		return "", nil
	}
	id, secret, ok := r.BasicAuth()
	if !ok || id == "" {
		id, secret = formID, formSecret
	}
	if !e.Clients.Check(id, secret) {
		e.AddrLimiter.Fail(addr)
		return "", oauthError(http.StatusUnauthorized, "invalid_client", DetailBadClient).
			WithHeader("WWW-Authenticate", basicChallenge(e.Realm))
	}
	return id, nil
}

// issue signs an access token for subject with scopes.
func (e *TokenEndpoint) issue(subject string, scopes []string) (*TokenResponse, *api.Error) {
	return e.issueFor(&Principal{Subject: subject, Scopes: scopes}, 0)
}

// issueFor signs an access token for p (its subject, scopes, tier and
// provider), living ttl when shorter than the issuer's TTL.
func (e *TokenEndpoint) issueFor(p *Principal, ttl time.Duration) (*TokenResponse, *api.Error) {
	token, exp, err := e.Issuer.IssueFor(p, ttl)
	if err != nil {
		return nil, api.NewError(http.StatusInternalServerError, "Internal Server Error")
	}
	now := nowFunc(e.Issuer.Now)().Truncate(time.Second)
	return &TokenResponse{
		AccessToken: token,
		TokenType:   "bearer",
		ExpiresIn:   int64(exp.Sub(now) / time.Second),
		Scope:       strings.Join(p.Scopes, " "),
	}, nil
}

// refresh serves grant_type=refresh_token: it rotates the refresh token
// and issues an access token for the login's scopes, or the narrower
// scope asked for. The user must still be enabled, and the client, when
// clients are checked, the one the token was issued to.
func (e *TokenEndpoint) refresh(ctx context.Context, f *tokenForm, clientID, addr string) (*TokenResponse, *api.Error) {
	var granted []string
	check := func(g *RefreshGrant) error {
		if g.ClientID != clientID {
			return oauthError(http.StatusBadRequest, "invalid_grant", DetailRefreshClient)
		}
		if g.Provider != "" {
			// An exchanged login: its user is the identity provider's,
			// not a local one (and still in its namespace); revocations
			// still apply.
			if e.UserRevoked != nil && e.UserRevoked(g.User, g.Created) || e.Users.Unplaced(g.Provider, g.User) {
				return oauthError(http.StatusBadRequest, "invalid_grant", DetailRefreshRevoked)
			}
			var apiErr *api.Error
			if granted, apiErr = narrowScopes(slices.Clone(g.Scopes), f.scope,
				"Requested scope exceeds the scope of the login: "); apiErr != nil {
				return apiErr
			}
			return nil
		}
		user, ok := e.Users.Active(g.User)
		if !ok {
			return oauthError(http.StatusBadRequest, "invalid_grant", DetailRefreshUser)
		}
		if e.UserRevoked != nil && e.UserRevoked(g.User, g.Created) {
			return oauthError(http.StatusBadRequest, "invalid_grant", DetailRefreshRevoked)
		}
		var apiErr *api.Error
		if granted, apiErr = refreshScopes(user, g.Scopes, f.scope); apiErr != nil {
			return apiErr
		}
		return nil
	}
	rt, g, err := e.Refresh.Rotate(ctx, f.refreshToken, check)
	if err != nil {
		var apiErr *api.Error
		switch {
		case errors.As(err, &apiErr):
		case errors.Is(err, ErrStorage):
			e.reportError(err)
			return nil, api.NewError(http.StatusServiceUnavailable, DetailStorageDown).WithHeader("Retry-After", "1")
		case errors.Is(err, ErrRefreshReused):
			if e.OnFailure != nil {
				e.OnFailure("refresh_reused")
			}
			if e.OnReuse != nil && g != nil {
				e.OnReuse(g.User, g.FamilyID)
			}
			apiErr = oauthError(http.StatusBadRequest, "invalid_grant", DetailRefreshReused)
		case errors.Is(err, ErrRefreshExpired):
			apiErr = oauthError(http.StatusBadRequest, "invalid_grant", DetailRefreshExpired)
		case errors.Is(err, ErrRefreshRevoked):
			apiErr = oauthError(http.StatusBadRequest, "invalid_grant", DetailRefreshRevoked)
		default:
			apiErr = oauthError(http.StatusBadRequest, "invalid_grant", DetailRefreshInvalid)
		}
		if apiErr.Extra["error"] == "invalid_grant" {
			// Refresh tokens cannot be guessed, but each try costs a
			// storage read: a client that keeps failing is slowed down.
			e.AddrLimiter.Fail(addr)
		}
		return nil, apiErr
	}
	resp, apiErr := e.issueFor(&Principal{Subject: g.User, Scopes: granted, Tier: g.Tier, Provider: g.Provider}, 0)
	if apiErr != nil {
		return nil, apiErr
	}
	resp.RefreshToken = rt
	return resp, nil
}

// refreshScopes is the scope of an access token from a refresh: the
// login's scopes that the user still holds, or the requested ones, each of
// which the login must have been granted (RFC 6749 §6) and the user must
// still hold.
func refreshScopes(user *User, login []string, requested string) ([]string, *api.Error) {
	current, apiErr := grantScopes(user, "")
	if apiErr != nil {
		return nil, apiErr
	}
	allowed := make([]string, 0, len(login))
	for _, s := range login {
		if _, found := slices.BinarySearch(current, s); found {
			allowed = append(allowed, s)
		}
	}
	return narrowScopes(allowed, requested, "Requested scope exceeds the scope of the login: ")
}

func (e *TokenEndpoint) reportError(err error) {
	if e.OnError != nil {
		e.OnError(err)
	}
}

// failureReason names a refusal for OnFailure; "" for malformed requests.
func failureReason(e *api.Error) string {
	if e.Status == http.StatusTooManyRequests {
		return "locked_out"
	}
	if code := e.Extra["error"]; code == "invalid_client" || code == "invalid_grant" || code == "invalid_scope" {
		return code
	}
	return ""
}

// tokenForm is a validated token request.
type tokenForm struct {
	grantType                 string // "password" or "refresh_token"
	username, password, scope string
	refreshToken              string
	clientID, clientSecret    string
}

// validateForm applies OAuth2PasswordRequestForm's rules to the fields of
// a password grant, and RFC 6749 §6's to those of a refresh grant (when
// refresh, refresh tokens are on).
func validateForm(form url.Values, refresh bool) (*tokenForm, *api.Error) {
	for _, k := range formFields {
		if len(form[k]) > 1 {
			return nil, oauthError(http.StatusBadRequest, "invalid_request",
				"Parameter "+k+" was given more than once")
		}
	}
	gt := form.Get("grant_type")
	if gt == "refresh_token" {
		switch {
		case !refresh:
			return nil, oauthError(http.StatusBadRequest, "unsupported_grant_type", detailRefreshOff)
		case form.Get("refresh_token") == "":
			return nil, oauthError(http.StatusBadRequest, "invalid_request", detailRefreshMissing)
		}
		return &tokenForm{grantType: gt, refreshToken: form.Get("refresh_token"), scope: form.Get("scope"),
			clientID: form.Get("client_id"), clientSecret: form.Get("client_secret")}, nil
	}
	pattern := grantTypePattern
	if refresh {
		pattern = grantTypesPattern
	}
	var errs []api.FieldError
	// FastAPI treats an empty form value as a missing one.
	if gt != "" && gt != "password" {
		errs = append(errs, api.FieldError{
			Type:  "string_pattern_mismatch",
			Loc:   []any{"body", "grant_type"},
			Msg:   "String should match pattern '" + pattern + "'",
			Input: gt,
			Ctx:   map[string]any{"pattern": pattern},
		})
	}
	for _, k := range []string{"username", "password"} {
		if form.Get(k) == "" {
			errs = append(errs, api.FieldError{
				Type: "missing", Loc: []any{"body", k}, Msg: "Field required", Input: nil,
			})
		}
	}
	if len(errs) > 0 {
		return nil, api.ValidationError(errs...)
	}
	return &tokenForm{grantType: "password", username: form.Get("username"), password: form.Get("password"), scope: form.Get("scope"),
		clientID: form.Get("client_id"), clientSecret: form.Get("client_secret")}, nil
}

// grantScopes returns the scopes to grant user for the space-separated
// request: all the user's model scopes when it is empty, otherwise the
// requested ones (sorted, without repeats), each of which the user must
// hold.
func grantScopes(user *User, requested string) ([]string, *api.Error) {
	allowed := make([]string, 0, len(user.Models))
	for _, m := range user.Models {
		allowed = append(allowed, ModelScope(m))
	}
	return narrowScopes(allowed, requested, "Requested scope is not allowed: ")
}

// narrowScopes returns allowed (sorted, without repeats) when requested
// is empty, otherwise the requested scopes (sorted, without repeats), each
// of which must be allowed: an invalid_scope error names the others after
// refused, or says the request is malformed.
func narrowScopes(allowed []string, requested, refused string) ([]string, *api.Error) {
	slices.Sort(allowed)
	allowed = slices.Compact(allowed)
	want := strings.Fields(requested)
	if len(want) == 0 {
		return allowed, nil
	}
	slices.Sort(want)
	want = slices.Compact(want)
	var bad []string
	for _, s := range want {
		if _, found := slices.BinarySearch(allowed, s); !found {
			bad = append(bad, s)
		}
	}
	if len(bad) > 0 {
		desc := refused + strings.Join(bad, " ")
		if !isScopeSyntax(bad) {
			desc = "Requested scope is malformed"
		}
		return nil, oauthError(http.StatusBadRequest, "invalid_scope", desc)
	}
	return want, nil
}

// isScopeSyntax reports whether every token is an RFC 6749 scope-token
// (%x21 / %x23-5B / %x5D-7E), safe to echo in error_description.
func isScopeSyntax(tokens []string) bool {
	for _, t := range tokens {
		for i := 0; i < len(t); i++ {
			if c := t[i]; c < 0x21 || c > 0x7e || c == '"' || c == '\\' {
				return false
			}
		}
	}
	return true
}

// oauthError is an error in both conventions: FastAPI's detail and RFC
// 6749's error and error_description.
func oauthError(status int, code, desc string) *api.Error {
	return &api.Error{
		Status: status,
		Detail: desc,
		Extra:  map[string]string{"error": code, "error_description": desc},
	}
}

// readForm reads the body fields (never the URL query). Bodies that are
// neither form-encoded nor multipart give an empty form, as in FastAPI.
// The body is read whole first, within MaxBodyBytes (after gzip
// decoding, which api.ReadBody does) and BodyTimeout; a refusal that
// leaves it unread closes the connection.
func (e *TokenEndpoint) readForm(w http.ResponseWriter, r *http.Request) (url.Values, *api.Error) {
	form, apiErr := e.parseForm(w, r)
	if apiErr != nil && api.BodyUnread(apiErr) {
		api.CloseUnread(w, r)
	}
	return form, apiErr
}

func (e *TokenEndpoint) parseForm(w http.ResponseWriter, r *http.Request) (url.Values, *api.Error) {
	limit := e.MaxBodyBytes
	if limit <= 0 {
		limit = DefaultMaxTokenBodyBytes
	}
	timeout := e.BodyTimeout
	if timeout == 0 {
		timeout = DefaultTokenBodyTimeout
	}
	ct, params, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if ct != "application/x-www-form-urlencoded" && ct != "multipart/form-data" {
		// Nothing is read: the fields are missing (422), as in FastAPI,
		// and the body is left unread.
		if r.ContentLength > limit {
			return nil, bodyError(api.ReadBodyTooLarge(limit))
		}
		api.CloseUnread(w, r)
		return url.Values{}, nil
	}
	timed := api.BodyDeadline(w, time.Now(), timeout)
	body, apiErr := api.ReadBody(r, limit)
	if apiErr != nil {
		return nil, bodyError(apiErr)
	}
	if timed {
		api.LiftBodyDeadline(w)
	}
	if ct == "multipart/form-data" {
		if params["boundary"] == "" {
			return nil, formError()
		}
		return readMultipart(multipart.NewReader(bytes.NewReader(body), params["boundary"]))
	}
	form, err := url.ParseQuery(string(body))
	if err != nil {
		return nil, formError()
	}
	return form, nil
}

// readMultipart collects the non-file fields of a multipart body; file
// parts are skipped.
func readMultipart(mr *multipart.Reader) (url.Values, *api.Error) {
	form := url.Values{}
	for {
		p, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			return form, nil
		}
		if err != nil {
			return nil, formError()
		}
		name := p.FormName()
		b, err := io.ReadAll(p)
		if err != nil {
			return nil, formError()
		}
		if name != "" && p.FileName() == "" {
			form.Add(name, string(b))
		}
	}
}

// bodyError is the endpoint's answer to a body api.ReadBody refused: its
// status (413, 408, 415, 400), in both conventions.
func bodyError(e *api.Error) *api.Error {
	var out *api.Error
	switch e.Status {
	case http.StatusRequestEntityTooLarge:
		out = tooLarge()
	case http.StatusRequestTimeout, http.StatusUnsupportedMediaType:
		desc, _ := e.Detail.(string)
		out = oauthError(e.Status, "invalid_request", desc)
	default:
		out = formError()
	}
	out.Headers = e.Headers
	if api.BodyUnread(e) {
		out = api.MarkUnread(out)
	}
	return out
}

// formError is the 400 for a body that is not the form it says it is.
func formError() *api.Error {
	return oauthError(http.StatusBadRequest, "invalid_request", detailParseError)
}

func tooLarge() *api.Error {
	return oauthError(http.StatusRequestEntityTooLarge, "invalid_request", "Request Entity Too Large")
}

// clientAddr is the network AddrLimiter counts failures for: the client's
// address, an IPv6 one as its /64 (AddrNetwork).
func (e *TokenEndpoint) clientAddr(r *http.Request) string {
	if e.ClientAddr != nil {
		return AddrNetwork(e.ClientAddr(r))
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return AddrNetwork(r.RemoteAddr)
	}
	return AddrNetwork(host)
}
