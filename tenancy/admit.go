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
	// Cost prices tokens of a model, for cost budgets (the ledger's
	// prices); nil prices everything at 0.
	Cost func(model string, prompt, cached, completion int) float64
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
// a few map lookups and no allocation.
func (ad *limitsAdmitter) Admit(ctx context.Context, adm *Admission, h http.Header) (Ticket, *api.Error) {
	p := adm.Principal
	var buf [limits.MaxBuckets]limits.Bucket
	bs := buf[:0]
	if adm.Fallback {
		// Admitted already under the user's, key's and team's limits
		// and budgets: only the fallback model's own apply.
		ml, ok := ad.l.Models[adm.Model]
		if !ok {
			return nil, nil
		}
		bs = append(bs, limits.Bucket{Key: limits.ModelKey(adm.Model, p.Subject), Scope: limits.ScopeModel, Limit: ml})
		return ad.admit(ctx, adm, h, bs, nil)
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
	var cbuf [limits.MaxBudgetCharges]limits.BudgetCharge
	cs := cbuf[:0]
	cs = charges(cs, limits.ScopeUser, p.Subject, ul.Budgets)
	if ul.Enforced() {
		bs = append(bs, limits.Bucket{Key: limits.UserKey(p.Subject), Scope: limits.ScopeUser, Limit: ul})
	}
	if ml, ok := ad.l.Models[adm.Model]; ok {
		bs = append(bs, limits.Bucket{Key: limits.ModelKey(adm.Model, p.Subject), Scope: limits.ScopeModel, Limit: ml})
	}
	if p.KeyID != "" {
		if ad.l.APIKey.Enforced() {
			bs = append(bs, limits.Bucket{Key: limits.KeyKey(p.KeyID), Scope: limits.ScopeKey, Limit: ad.l.APIKey})
		}
		cs = charges(cs, limits.ScopeKey, p.KeyID, ad.l.APIKey.Budgets)
	}
	if adm.Team != "" {
		if t, ok := ad.svc.cfg.Teams[adm.Team]; ok {
			if t.Limit.Enforced() {
				bs = append(bs, limits.Bucket{Key: limits.TeamKey(adm.Team), Scope: limits.ScopeTeam, Limit: t.Limit})
			}
			cs = charges(cs, limits.ScopeTeam, adm.Team, t.Limit.Budgets)
		}
	}
	if len(bs) == 0 && len(cs) == 0 {
		return nil, nil
	}
	return ad.admit(ctx, adm, h, bs, cs)
}

// charges appends a tenant's budgets to cs, as many as fit.
func charges(cs []limits.BudgetCharge, scope limits.Scope, name string, budgets []limits.Budget) []limits.BudgetCharge {
	for _, b := range budgets {
		if b.Amount > 0 && len(cs) < cap(cs) {
			cs = append(cs, limits.BudgetCharge{Scope: scope, Name: name, Budget: b})
		}
	}
	return cs
}

// admit asks the limiter for the budgets cs, then the buckets bs: a
// request refused by a limit gets its budgets' reservation back, one
// refused by a budget costs the limits nothing.
func (ad *limitsAdmitter) admit(ctx context.Context, adm *Admission, h http.Header, bs []limits.Bucket, cs []limits.BudgetCharge) (Ticket, *api.Error) {
	p := adm.Principal
	reply := adm.MaxTokens
	switch {
	case reply == NoReply:
		reply = 0
	case reply <= 0:
		reply = ad.l.ReplyReservation
	}
	adm.Reply = reply
	prompt := limits.EstimateTokens(adm.PromptBytes, adm.Messages) + adm.ExtraTokens
	// Every generation of every prompt may take a whole reply.
	replies := satMul(satMul(max(adm.Prompts, 1), max(adm.Generations, 1)), reply)
	tokens := satAdd(prompt, replies)
	tk := &ticket{prompt: prompt, model: adm.Model, cost: ad.l.Cost, factor: adm.CostFactor}
	if len(cs) > 0 {
		breq := limits.BudgetRequest{Charges: cs, Tokens: tokens}
		if ad.l.Cost != nil {
			breq.Cost = tk.priced(ad.l.Cost(adm.Model, prompt, 0, replies))
		}
		bt, d := ad.lim.AdmitBudgets(ctx, &breq)
		if !d.Allowed {
			if d.Unavailable {
				ad.svc.metrics.Refused("budget", "unavailable")
				return nil, refusal(p, adm, limits.Bucket{}, limits.Decision{Refused: limits.KindUnavailable, RetryAfter: time.Second}, 0)
			}
			c := cs[d.Refused]
			ad.svc.metrics.Refused(c.Scope.String(), "budget")
			return nil, budgetRefusal(c, d, time.Now())
		}
		tk.bt = bt
	}
	if len(bs) > 0 {
		req := limits.Request{Buckets: bs, Tokens: tokens}
		t, d := ad.lim.Admit(ctx, &req)
		setRateHeaders(h, d)
		if !d.Allowed {
			tk.bt.Settle(0, 0)
			b := limits.Bucket{}
			if d.Bucket >= 0 && d.Bucket < len(bs) {
				b = bs[d.Bucket]
			}
			ad.svc.metrics.Refused(b.Scope.String(), d.Refused.String())
			return nil, refusal(p, adm, b, d, req.Tokens)
		}
		tk.t = t
	}
	return tk, nil
}

// maxReservation bounds a reservation: far above any limit, far below
// what the limiter's arithmetic can hold.
const maxReservation = 1 << 52

// satMul and satAdd compute a reservation without wrapping: n × 128
// generations × a reply cap of 2³¹ must stay a huge positive number.
func satMul(a, b int) int {
	if a <= 0 || b <= 0 {
		return 0
	}
	if a > maxReservation/b {
		return maxReservation
	}
	return a * b
}

func satAdd(a, b int) int { return min(a+b, maxReservation) }

// ticket settles a limits.Ticket and a limits.BudgetTicket (either may
// be nil) with the request's real usage.
type ticket struct {
	t      *limits.Ticket
	bt     *limits.BudgetTicket
	prompt int
	model  string
	cost   func(model string, prompt, cached, completion int) float64
	factor float64 // Admission.CostFactor
}

// priced is cost at the part of the price the request pays.
func (t *ticket) priced(cost float64) float64 {
	if t.factor > 0 {
		return cost * t.factor
	}
	return cost
}

// Settle implements Ticket: nothing used when no replica was
// called; the replica's counts when it reported them; otherwise (the
// client left mid-stream, the replica failed or reports no usage) the
// prompt's estimate plus the text relayed at about 4 bytes a token.
func (t *ticket) Settle(s Settlement) {
	var prompt, cached, completion int
	switch {
	case !s.Served:
	case s.UsageKnown:
		prompt, cached, completion = s.Usage.PromptTokens, s.Usage.CachedTokens, s.Usage.CompletionTokens
	default:
		prompt, completion = t.prompt, (s.Relayed+3)/4
	}
	used := prompt + completion
	t.t.Settle(used)
	if t.bt != nil {
		cost := 0.0
		if t.cost != nil && used > 0 {
			model := t.model
			if s.Model != "" {
				model = s.Model // the ledger prices the answering model alike
			}
			cost = t.priced(t.cost(model, prompt, cached, completion))
		}
		t.bt.Settle(used, cost)
	}
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
			WithHeader("Retry-After", strconv.FormatInt(secs, 10)).Later()
	}
	var who string
	switch b.Scope {
	case limits.ScopeModel:
		who = "user '" + p.Subject + "' on model '" + adm.Model + "'"
	case limits.ScopeKey:
		who = "API key '" + p.KeyID + "'"
	case limits.ScopeTeam:
		who = "team '" + adm.Team + "'"
	default:
		who = "user '" + p.Subject + "'"
	}
	var what string
	switch d.Refused {
	case limits.KindRequests:
		what = strconv.Itoa(b.Limit.RPM) + " requests per minute"
	case limits.KindTokens:
		what = strconv.Itoa(b.Limit.TPM) + " tokens per minute; this request reserves " +
			strconv.Itoa(min(reserved, b.Limit.TPM)) + " (its prompt's estimate and its reply cap for each generation)"
	case limits.KindConcurrency:
		what = strconv.Itoa(b.Limit.Concurrency) + " requests at once"
	}
	return api.NewError(http.StatusTooManyRequests,
		"Rate limit reached for "+who+": "+what+"; retry in "+strconv.FormatInt(secs, 10)+"s").
		WithHeader("Retry-After", strconv.FormatInt(secs, 10)).
		WithHeader("Retry-After-Ms", strconv.FormatInt(retry.Milliseconds(), 10)).Later()
}

var _ Admitter = (*limitsAdmitter)(nil)
