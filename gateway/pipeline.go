package gateway

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/auth"
	"github.com/llmedge/llmedge/boundary/reserve"
	"github.com/llmedge/llmedge/tenancy"
)

// Stage is a step of the pipeline. Stages run in this order, each at most
// once per request.
type Stage uint8

const (
	// StageNone: the request has passed no stage.
	StageNone Stage = iota
	// StageAuthenticated: its credential is valid (ex.Principal).
	StageAuthenticated
	// StageDecoded: its body is a valid chat request (ex.Chat).
	StageDecoded
	// StageAuthorized: the credential covers the model asked for.
	StageAuthorized
	// StageAdmitted: the tenant's limits let the request through
	// (ex.Ticket holds what it reserved); a no-op without an Admitter.
	StageAdmitted
	// StageRouted: a replica answered, or the request failed; the client
	// has its answer.
	StageRouted
)

// Pipeline is the one request path of the inference endpoints. Handlers
// run it up to a stage with Through; a stage always runs every earlier
// stage the request has not passed yet, so no order or subset of handlers
// can route a request that was not authenticated and authorized for its
// model.
type Pipeline struct {
	// Auth checks the credential (a chain of them, or one).
	Auth auth.Authenticator
	// Realm names the protected space in WWW-Authenticate challenges.
	Realm   string
	Gateway *Gateway
	// MaxHeaderBytes bounds a request's header fields (431 beyond); 0
	// means api.DefaultMaxHeaderBytes.
	MaxHeaderBytes int
	// Admitter, when set, applies the tenants' limits (StageAdmitted).
	Admitter tenancy.Admitter
	// TierCaps tighten a model's Caps for the principals of a tier.
	TierCaps map[string]reserve.Caps
	// Teams, when set, finds a principal's team, whose models cap the
	// principal's scopes (StageAuthorized); tenancy.Service implements it.
	Teams Teams
	// BodyTimeout bounds the reading of a chat request's body, from the
	// request's arrival: a body not read by then gets 408 in the door's
	// shape. 0 means api.DefaultBodyTimeout; negative, no deadline of the
	// pipeline's own (the server's, if any, still applies).
	BodyTimeout time.Duration
	// Batches, when set, serves OpenAI's Files and Batches API on the
	// OpenAI door (the `batches` option).
	Batches BatchAPI
	// Owners, when set, refuses the lines of a batch whose owner's
	// credential was revoked, expired or lost its user since the batch
	// was created; auth.Service implements it.
	Owners BatchOwners
}

// Through runs the stages after the request's current one, up to and
// including last, and reports whether they all passed. A stage that
// refuses the request has answered it; StageRouted always answers, so
// Through(..., StageRouted) returns false.
//
// The request's Exchange is kept in its context when last is before
// StageRouted, for the handlers that run the later stages; door is used
// when this call begins the exchange.
func (p *Pipeline) Through(w http.ResponseWriter, r *http.Request, door Door, last Stage) (*http.Request, *Exchange, bool) {
	ex := FromContext(r.Context())
	if ex == nil {
		ex = newExchange(w, r, door)
		p.beginBatch(r, ex)
		if last < StageRouted {
			r = r.WithContext(context.WithValue(r.Context(), exchangeKey{}, ex))
		} else {
			// The whole exchange runs in this call: once it returns, no
			// handler reads the body, and a pooled one can go back (the
			// replica requests hold it for themselves). A body handed to
			// later handlers is left to the garbage collector.
			defer ex.releaseBody()
		}
	}
	for ex.Stage < last {
		var ok bool
		switch ex.Stage + 1 {
		case StageAuthenticated:
			ok = p.checkHeaders(w, r, ex) && p.authenticate(w, r, ex)
		case StageDecoded:
			ok = p.coversAModel(w, r, ex) && p.decode(w, r, ex)
		case StageAuthorized:
			ok = p.authorize(w, ex)
		case StageAdmitted:
			ok = p.classify(w, r, ex) && p.admit(w, r, ex)
		case StageRouted:
			ex.Stage = StageRouted
			p.route(w, r, ex)
			return r, ex, false
		}
		if !ok {
			ex.Stage = StageRouted // answered
			return r, ex, false
		}
		ex.Stage++
	}
	return r, ex, true
}

// ServeHTTP runs every stage, through door.
func (p *Pipeline) Serve(w http.ResponseWriter, r *http.Request, door Door) *Exchange {
	_, ex, _ := p.Through(w, r, door, StageRouted)
	return ex
}

// Identify runs the authentication stage alone, for a request that is not
// a chat (OpenAI's model list): a refusal is answered through door and
// counted among the auth failures, but not as an inference request. The
// exchange's Principal is valid when it reports true.
func (p *Pipeline) Identify(w http.ResponseWriter, r *http.Request, door Door) (*Exchange, bool) {
	ex := FromContext(r.Context())
	if ex == nil {
		ex = newExchange(w, r, door)
		ex.observed = true // no request metrics: nothing is inferred
	}
	if ex.Stage >= StageAuthenticated {
		return ex, ex.Principal != nil
	}
	if !p.checkHeaders(w, r, ex) || !p.authenticate(w, r, ex) {
		ex.Stage = StageRouted // answered
		return ex, false
	}
	ex.Stage = StageAuthenticated
	return ex, true
}

// Require refuses, with 403, a request whose credential lacks any of
// scopes; it must have passed StageAuthenticated. It serves handlers that
// guard something other than the chat endpoints (a plain reverse proxy to
// one model's replicas), where the pipeline cannot know the model.
func (p *Pipeline) Require(w http.ResponseWriter, r *http.Request, ex *Exchange, scopes []string) bool {
	for _, s := range scopes {
		if !ex.Principal.HasScope(s) {
			if ex.Stage < StageDecoded {
				api.CloseUnread(w, r) // a request passed on with its body unread
			}
			ex.Stage = StageRouted // answered
			p.reject(w, ex, auth.Forbidden(p.Realm, s), "insufficient_scope")
			return false
		}
	}
	return true
}

// RestoreBody gives r back the body the decode stage read, for a handler
// that passes a decoded request on to another (a plain reverse proxy).
func RestoreBody(r *http.Request, ex *Exchange) {
	if ex.body != nil {
		r.Body = io.NopCloser(bytes.NewReader(ex.body))
		r.ContentLength = int64(len(ex.body))
	}
}

func (p *Pipeline) checkHeaders(w http.ResponseWriter, r *http.Request, ex *Exchange) bool {
	if e := api.HeadersTooLarge(r, headerLimit(p.MaxHeaderBytes)); e != nil {
		api.CloseUnread(w, r)
		p.reject(w, ex, e, "")
		return false
	}
	return true
}

func (p *Pipeline) authenticate(w http.ResponseWriter, r *http.Request, ex *Exchange) bool {
	if ex.batch != nil {
		// A batch's line, run by the gateway as the batch's owner: its
		// authorization, limits and budgets are the owner's, as long as
		// its credential stands.
		if !p.ownerStands(w, ex) {
			return false
		}
		ex.Principal = ex.batch.owner
		if p.Teams != nil {
			ex.Team = p.Teams.Team(ex.Principal)
		}
		return true
	}
	start := time.Now()
	principal, err := p.Auth.Authenticate(r)
	ex.Auth = time.Since(start)
	ex.traceStage(r.Context(), SpanAuth, start, err)
	if err != nil {
		// Refused from its headers: the body is never read.
		api.CloseUnread(w, r)
		p.reject(w, ex, err, authFailureReason(err))
		return false
	}
	ex.Principal = principal
	if p.Teams != nil {
		ex.Team = p.Teams.Team(principal)
	}
	return true
}

// decode reads and validates the body through the door, within the body
// deadline: a body that has not arrived BodyTimeout after the request did
// is refused (408), and a refusal that leaves the body unread (its size,
// its encoding, its pace) closes an HTTP/1 connection rather than reading
// the rest.
func (p *Pipeline) decode(w http.ResponseWriter, r *http.Request, ex *Exchange) bool {
	start := time.Now()
	timeout := p.BodyTimeout
	if timeout == 0 {
		timeout = api.DefaultBodyTimeout
	}
	timed := api.BodyDeadline(w, ex.Start, timeout)
	chat, body, err := ex.Door.Decode(r)
	ex.Validate = time.Since(start)
	ex.traceStage(r.Context(), SpanValidate, start, err)
	if err != nil {
		if api.BodyUnread(err) {
			api.CloseUnread(w, r)
		}
		p.reject(w, ex, err, "")
		return false
	}
	if timed {
		api.LiftBodyDeadline(w) // the answer may take minutes: only the body had a deadline
	}
	ex.Chat, ex.body = chat, body
	if ex.batch != nil && chat.Stream {
		// A batch's line is answered whole, into its output file.
		e := api.NewError(http.StatusBadRequest, "Streaming is not supported in a batch: remove \"stream\" or set it to false")
		e.Code, e.Param = "invalid_value", "stream"
		p.reject(w, ex, e, "")
		return false
	}
	if m, ok := p.Gateway.Aliases[chat.Model]; ok {
		// An alias is its model in every later stage (scope, limits,
		// routing); the answer gives the name the client used.
		ex.Chat.Asked, ex.Chat.Model = chat.Model, m
	} else if m, adapter, err := p.Gateway.resolveAdapter(chat.Model); err != nil {
		p.reject(w, ex, badAdapter(m, adapter, err), "")
		return false
	} else if m != "" {
		// An adapter is its model for the limits and the routing (to the
		// replicas that have it); its name is what the replica is asked
		// for, and what the answer gives.
		ex.Chat.Asked, ex.Chat.Model, ex.Adapter = chat.Model, m, adapter
	}
	if e := p.Gateway.withinModelLimits(&ex.Chat, len(body)); e != nil {
		p.reject(w, ex, e, "")
		return false
	}
	return true
}

// coversAModel refuses, before the body is read, a credential that covers
// none of the models served: whatever model the body names, the answer
// would be 403. (Which model is asked for is in the body: a credential
// that covers some model is checked against it once the body is read.)
func (p *Pipeline) coversAModel(w http.ResponseWriter, r *http.Request, ex *Exchange) bool {
	for _, s := range ex.Principal.Scopes {
		if m, ok := strings.CutPrefix(s, auth.ScopePrefix); ok && p.Gateway.Models[m] != nil {
			return true
		}
		if p.Gateway.adapterScopeModel(s) {
			return true // a scope of one adapter of a model
		}
	}
	scopes := make([]string, 0, len(p.Gateway.Models))
	for m := range p.Gateway.Models {
		scopes = append(scopes, auth.ModelScope(m))
	}
	slices.Sort(scopes)
	e := auth.Forbidden(p.Realm, strings.Join(scopes, " "))
	e.Detail = auth.DetailNotEnoughPermissions + ": the credential covers none of the models served here"
	e.Code, e.Param = "model_not_allowed", "model"
	api.CloseUnread(w, r)
	p.reject(w, ex, e, "insufficient_scope")
	return false
}

// authorize checks that the credential covers the model. It runs after
// authentication by construction: a principal is always there.
func (p *Pipeline) authorize(w http.ResponseWriter, ex *Exchange) bool {
	scope := auth.ModelScope(ex.Chat.Model)
	covered := ex.Principal.HasScope(scope)
	if ex.Adapter != "" {
		// The model's scope covers its adapters; an adapter's scope,
		// that adapter alone.
		covered = coversAdapter(ex.Principal, ex.Chat.Model, ex.Adapter)
		scope = AdapterScope(ex.Chat.Model, ex.Adapter)
	}
	if !covered {
		e := auth.Forbidden(p.Realm, scope)
		// For doors with machine-readable errors: the refusal is about
		// the request's model field.
		e.Code, e.Param = "model_not_allowed", "model"
		p.reject(w, ex, e, "insufficient_scope")
		return false
	}
	if ex.Team != "" && p.Teams != nil {
		allowed, known := p.Teams.TeamAllows(ex.Team, ex.Chat.Model)
		if !allowed {
			e := auth.Forbidden(p.Realm, scope)
			if known {
				e.Detail = auth.DetailNotEnoughPermissions + ": team '" + ex.Team + "' may not use model '" + ex.Chat.Model + "'"
			} else {
				e.Detail = auth.DetailNotEnoughPermissions + ": team '" + ex.Team + "' is not configured"
			}
			e.Code, e.Param = "model_not_allowed", "model"
			p.reject(w, ex, e, "insufficient_scope")
			return false
		}
	}
	return true
}

// Teams finds principals' teams and the models they allow.
type Teams interface {
	// Team names p's team; "" for none.
	Team(p *auth.Principal) string
	// TeamAllows reports whether team may use model; known is false for
	// a team that is not configured.
	TeamAllows(team, model string) (allowed, known bool)
}

// reject answers err, ending the request before it reaches a replica.
func (p *Pipeline) reject(w http.ResponseWriter, ex *Exchange, err *api.Error, authReason string) {
	ex.Status = err.Status
	ex.Door.WriteError(w, err)
	if authReason != "" && p.Gateway.Metrics != nil {
		p.Gateway.Metrics.AuthFailure(authReason)
	}
	p.Gateway.observe(ex)
}

// authFailureReason names a Bearer failure for the metrics.
func authFailureReason(err *api.Error) string {
	if d, _ := err.Detail.(string); d == auth.DetailNotAuthenticated {
		return "missing_token"
	}
	return "invalid_token"
}
