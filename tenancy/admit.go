package tenancy

import (
	"context"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/auth"
	"github.com/llmedge/llmedge/limits"
)

// Limits says which limits apply to whom.
type Limits struct {
	// Default is every user's, unless the user has its own.
	Default limits.Limit
	// APIKey limits each API key, on top of its user's limits.
	APIKey limits.Limit
	// Models limit each user's requests to one model, on top of the
	// user's own limits.
	Models map[string]limits.Limit
	// ReplyReservation is the reply size reserved against tpm for a
	// request that sets no max_tokens; 0 means DefaultReplyReservation.
	ReplyReservation int
	// Users gives a user's own limits (nil when it has none).
	Users UserLimits
	// Tiers are the limits of the tiers outside identities are mapped to
	// (auth.Principal.Tier): a principal with a tier has its tier's
	// limits instead of a local user's own; unset fields come from
	// Default.
	Tiers map[string]limits.Limit
}

// UserLimits looks up the limits configured for a user.
type UserLimits interface {
	Limits(user string) *limits.Limit
}

// limitsAdmitter resolves which limits apply to a request and asks the
// limiter.
type limitsAdmitter struct {
	svc *Service
	lim *limits.Limiter
	l   Limits
}

func newAdmitter(s *Service, l Limits) *limitsAdmitter {
	if l.ReplyReservation <= 0 {
		l.ReplyReservation = DefaultReplyReservation
	}
	return &limitsAdmitter{svc: s, lim: s.state.limiter, l: l}
}

// Admit implements Admitter. A request no limit applies to costs
// two map lookups and no allocation.
func (ad *limitsAdmitter) Admit(ctx context.Context, adm *Admission, h http.Header) (Ticket, *api.Error) {
	p := adm.Principal
	var buf [limits.MaxBuckets]limits.Bucket
	bs := buf[:0]
	if adm.Fallback {
		// Admitted already under the user's and key's limits: only the
		// fallback model's own apply.
		ml, ok := ad.l.Models[adm.Model]
		if !ok {
			return nil, nil
		}
		bs = append(bs, limits.Bucket{Key: limits.ModelKey(adm.Model, p.Subject), Scope: limits.ScopeModel, Limit: ml})
		return ad.admit(ctx, adm, h, bs)
	}
	ul := ad.l.Default
	switch {
	case p.Tier != "":
		if tl, ok := ad.l.Tiers[p.Tier]; ok {
			ul = tl.Over(ad.l.Default)
		}
	case p.Provider != "":
		// An outside identity without a tier: the default limits, never
		// a local user's of the same name.
	case ad.l.Users != nil:
		if own := ad.l.Users.Limits(p.Subject); own != nil {
			ul = own.Over(ad.l.Default)
		}
	}
	if ul.Enforced() {
		bs = append(bs, limits.Bucket{Key: limits.UserKey(p.Subject), Scope: limits.ScopeUser, Limit: ul})
	}
	if ml, ok := ad.l.Models[adm.Model]; ok {
		bs = append(bs, limits.Bucket{Key: limits.ModelKey(adm.Model, p.Subject), Scope: limits.ScopeModel, Limit: ml})
	}
	if p.KeyID != "" && ad.l.APIKey.Enforced() {
		bs = append(bs, limits.Bucket{Key: limits.KeyKey(p.KeyID), Scope: limits.ScopeKey, Limit: ad.l.APIKey})
	}
	if len(bs) == 0 {
		return nil, nil
	}
	return ad.admit(ctx, adm, h, bs)
}

// admit asks the limiter for the buckets bs.
func (ad *limitsAdmitter) admit(ctx context.Context, adm *Admission, h http.Header, bs []limits.Bucket) (Ticket, *api.Error) {
	p := adm.Principal
	reply := adm.MaxTokens
	switch {
	case reply == NoReply:
		reply = 0
	case reply <= 0:
		reply = ad.l.ReplyReservation
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
		ad.svc.metrics.Refused(b.Scope.String(), d.Refused.String())
		return nil, refusal(p, adm, b, d, req.Tokens)
	}
	return &ticket{t: t, prompt: prompt}, nil
}

// ticket settles a limits.Ticket with the request's real usage.
type ticket struct {
	t      *limits.Ticket
	prompt int
}

// Settle implements Ticket: nothing used when no replica was
// called; the replica's counts when it reported them; otherwise (the
// client left mid-stream, the replica failed or reports no usage) the
// prompt's estimate plus the text relayed at about 4 bytes a token.
func (t *ticket) Settle(s Settlement) {
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
func refusal(p *auth.Principal, adm *Admission, b limits.Bucket, d limits.Decision, reserved int) *api.Error {
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

var _ Admitter = (*limitsAdmitter)(nil)
