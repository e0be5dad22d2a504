package auth

import (
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

// DefaultMaxTokenBodyBytes is TokenEndpoint's body limit when MaxBodyBytes
// is zero.
const DefaultMaxTokenBodyBytes = 64 << 10

// Details of the token endpoint's answers.
const (
	DetailBadCredentials = "Incorrect username or password"
	DetailTooManyFails   = "Too many failed login attempts, retry later"
	DetailBadClient      = "Invalid client credentials"
	detailParseError     = "There was an error parsing the body"
	grantTypePattern     = "^password$"
)

// formFields are the OAuth2PasswordRequestForm fields, in FastAPI's order
// (the order of its validation errors).
var formFields = []string{"grant_type", "username", "password", "scope", "client_id", "client_secret"}

// TokenResponse is the 200 answer of the token endpoint (RFC 6749 §5.1).
type TokenResponse struct {
	AccessToken string `json:"access_token"`
	TokenType   string `json:"token_type"`
	ExpiresIn   int64  `json:"expires_in"`
	Scope       string `json:"scope"`
}

// TokenEndpoint serves POST /auth/token, the OAuth 2.0 password grant in
// the shape of FastAPI's OAuth2PasswordRequestForm.
//
// Answers, all with Cache-Control: no-store and Pragma: no-cache:
//   - 200 TokenResponse; scope is the granted "model:<type>" scopes;
//   - 405 {"detail":"Method Not Allowed"} + Allow: POST for other methods;
//   - 413 for a body over MaxBodyBytes;
//   - 400 invalid_request for an unparsable body or a repeated parameter;
//   - 422 FastAPI validation list for missing username/password (an empty
//     value counts as missing, as in FastAPI; so does a body that is not
//     form-encoded or multipart) and for a grant_type other than
//     "password";
//   - 429 + Retry-After while a limiter blocks the username or address;
//   - 401 invalid_grant + WWW-Authenticate: Bearer for bad credentials;
//   - 400 invalid_scope for a requested scope the user lacks.
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
	// invalid_scope), for metrics.
	OnIssued  func()
	OnFailure func(reason string)
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
	f, apiErr := validateForm(form)
	if apiErr != nil {
		return nil, apiErr
	}

	addr := e.clientAddr(r)
	if wait := max(e.UserLimiter.Blocked(f.username), e.AddrLimiter.Blocked(addr)); wait > 0 {
		secs := int64(math.Ceil(wait.Seconds()))
		return nil, api.NewError(http.StatusTooManyRequests, DetailTooManyFails).
			WithHeader("Retry-After", strconv.FormatInt(secs, 10))
	}
	if e.Clients.Required() {
		id, secret, ok := r.BasicAuth()
		if !ok || id == "" {
			id, secret = f.clientID, f.clientSecret
		}
		if !e.Clients.Check(id, secret) {
			e.AddrLimiter.Fail(addr)
			return nil, oauthError(http.StatusUnauthorized, "invalid_client", DetailBadClient).
				WithHeader("WWW-Authenticate", basicChallenge(e.Realm))
		}
	}
	user, err := e.Users.Authenticate(f.username, f.password)
	if err != nil {
		e.UserLimiter.Fail(f.username)
		e.AddrLimiter.Fail(addr)
		return nil, oauthError(http.StatusUnauthorized, "invalid_grant", DetailBadCredentials).
			WithHeader("WWW-Authenticate", challenge(e.Realm))
	}
	e.UserLimiter.Reset(f.username)

	granted, apiErr := grantScopes(user, f.scope)
	if apiErr != nil {
		return nil, apiErr
	}
	token, _, err := e.Issuer.Issue(user.Name, granted)
	if err != nil {
		return nil, api.NewError(http.StatusInternalServerError, "Internal Server Error")
	}
	ttl := e.Issuer.TTL
	if ttl <= 0 {
		ttl = DefaultTTL
	}
	return &TokenResponse{
		AccessToken: token,
		TokenType:   "bearer",
		ExpiresIn:   int64(ttl / time.Second),
		Scope:       strings.Join(granted, " "),
	}, nil
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
	username, password, scope string
	clientID, clientSecret    string
}

// validateForm applies OAuth2PasswordRequestForm's rules to the fields.
func validateForm(form url.Values) (*tokenForm, *api.Error) {
	for _, k := range formFields {
		if len(form[k]) > 1 {
			return nil, oauthError(http.StatusBadRequest, "invalid_request",
				"Parameter "+k+" was given more than once")
		}
	}
	var errs []api.FieldError
	// FastAPI treats an empty form value as a missing one.
	if gt := form.Get("grant_type"); gt != "" && gt != "password" {
		errs = append(errs, api.FieldError{
			Type:  "string_pattern_mismatch",
			Loc:   []any{"body", "grant_type"},
			Msg:   "String should match pattern '" + grantTypePattern + "'",
			Input: gt,
			Ctx:   map[string]any{"pattern": grantTypePattern},
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
	return &tokenForm{username: form.Get("username"), password: form.Get("password"), scope: form.Get("scope"),
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
		desc := "Requested scope is not allowed: " + strings.Join(bad, " ")
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
func (e *TokenEndpoint) readForm(w http.ResponseWriter, r *http.Request) (url.Values, *api.Error) {
	limit := e.MaxBodyBytes
	if limit <= 0 {
		limit = DefaultMaxTokenBodyBytes
	}
	if r.ContentLength > limit {
		return nil, tooLarge()
	}
	body := http.MaxBytesReader(w, r.Body, limit)
	ct, params, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	switch ct {
	case "application/x-www-form-urlencoded":
		b, err := io.ReadAll(body)
		if err != nil {
			return nil, bodyError(err)
		}
		form, err := url.ParseQuery(string(b))
		if err != nil {
			return nil, bodyError(err)
		}
		return form, nil
	case "multipart/form-data":
		if params["boundary"] == "" {
			return nil, bodyError(http.ErrMissingBoundary)
		}
		return readMultipart(multipart.NewReader(body, params["boundary"]))
	}
	return url.Values{}, nil
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
			return nil, bodyError(err)
		}
		name := p.FormName()
		b, err := io.ReadAll(p)
		if err != nil {
			return nil, bodyError(err)
		}
		if name != "" && p.FileName() == "" {
			form.Add(name, string(b))
		}
	}
}

// bodyError is 413 for a body over the limit and 400 for any other read
// or parse failure.
func bodyError(err error) *api.Error {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return tooLarge()
	}
	return oauthError(http.StatusBadRequest, "invalid_request", detailParseError)
}

func tooLarge() *api.Error {
	return api.NewError(http.StatusRequestEntityTooLarge, "Request Entity Too Large")
}

// clientAddr is the address AddrLimiter counts failures for.
func (e *TokenEndpoint) clientAddr(r *http.Request) string {
	if e.ClientAddr != nil {
		return e.ClientAddr(r)
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}
