// Package limits enforces per-tenant request limits — requests per minute,
// tokens per minute and concurrent requests — either in one process or, with
// Redis, across every gateway instance that shares it.
//
// A request is charged against one or more buckets (its user, its user on
// its model, its API key), each with its own Limit; it is admitted only when
// every bucket has room, and then all of them are charged at once, so a
// refusal by one bucket costs the others nothing.
//
// Requests per minute use GCRA (the generic cell rate algorithm): one
// "theoretical arrival time" per bucket, no refill loop, a burst of a whole
// minute's allowance. Tokens per minute use the same algorithm with a cost:
// a request reserves its prompt's estimated tokens plus its reply cap before
// it reaches a replica, and its Ticket settles the reservation to the real
// usage afterwards (a refund or an extra charge), so concurrent requests
// cannot overshoot the limit by passing before any usage is known.
// Concurrency is a semaphore whose slots expire unless refreshed, so a
// crashed instance cannot hold them for ever.
//
// With Redis every decision is one Lua script, atomic in the server, timed
// by the server's clock. When Redis cannot be reached, the Limiter either
// falls back to its own per-instance state (fail open) or refuses (fail
// closed), and goes back to Redis by itself when it answers again.
package limits

import (
	"fmt"
	"strconv"
	"time"
)

// Window is the period of the per-minute limits.
const Window = time.Minute

// Off, in a Limit field, means "no limit", overriding a default.
const Off = -1

// Limit is a bucket's allowance. A positive field is a limit; 0 is unset
// (a default applies, see Over); Off is explicitly unlimited.
type Limit struct {
	// RPM bounds requests per minute.
	RPM int `json:"rpm,omitempty"`
	// TPM bounds tokens (prompt + completion) per minute.
	TPM int `json:"tpm,omitempty"`
	// Concurrency bounds requests in flight at once.
	Concurrency int `json:"concurrency,omitempty"`
	// Budgets cap the use per day or month (budget.go); not a bucket of
	// the per-minute limits, and not counted by Enforced.
	Budgets []Budget `json:"budgets,omitempty"`
}

// Over returns l with its unset fields taken from base.
func (l Limit) Over(base Limit) Limit {
	if l.RPM == 0 {
		l.RPM = base.RPM
	}
	if l.TPM == 0 {
		l.TPM = base.TPM
	}
	if l.Concurrency == 0 {
		l.Concurrency = base.Concurrency
	}
	l.Budgets = MergeBudgets(l.Budgets, base.Budgets)
	return l
}

// Enforced reports whether l limits anything.
func (l Limit) Enforced() bool { return l.RPM > 0 || l.TPM > 0 || l.Concurrency > 0 }

// Validate reports a field that is neither positive, 0 nor Off.
func (l Limit) Validate() error {
	for _, f := range []struct {
		name string
		v    int
	}{{"rpm", l.RPM}, {"tpm", l.TPM}, {"concurrency", l.Concurrency}} {
		if f.v < Off {
			return fmt.Errorf("%s %d: want a positive number, or off", f.name, f.v)
		}
	}
	return ValidateBudgets(l.Budgets)
}

// Scope names what a bucket counts, in refusals and metrics.
type Scope uint8

const (
	// ScopeUser counts everything one user does.
	ScopeUser Scope = iota
	// ScopeModel counts one user's requests to one model.
	ScopeModel
	// ScopeKey counts one API key's requests.
	ScopeKey
	// ScopeTeam counts everything the members of one team do.
	ScopeTeam
)

func (s Scope) String() string {
	switch s {
	case ScopeModel:
		return "model"
	case ScopeKey:
		return "api_key"
	case ScopeTeam:
		return "team"
	}
	return "user"
}

// Bucket is one set of counters a request is charged against.
type Bucket struct {
	// Key identifies the counters; build it with UserKey, ModelKey or
	// KeyKey so that scopes cannot collide.
	Key   string
	Scope Scope
	Limit Limit
}

// UserKey, ModelKey, KeyKey and TeamKey build bucket keys. Names may hold any
// character, so the model's name is length-prefixed.
func UserKey(user string) string { return "u:" + user }

// ModelKey is the key of user's requests to model.
func ModelKey(model, user string) string {
	return "um:" + strconv.Itoa(len(model)) + ":" + model + ":" + user
}

// KeyKey is the key of an API key's requests, by the key's id.
func KeyKey(id string) string { return "k:" + id }

// TeamKey is the key of a team's requests, all its members' together.
func TeamKey(team string) string { return "g:" + team }

// MaxBuckets bounds the buckets of one request: its user, its user on its
// model, its API key and its team.
const MaxBuckets = 4

// Request is what one admission asks for.
type Request struct {
	Buckets []Bucket
	// Tokens is the reservation: the prompt's estimated tokens plus the
	// reply cap. A bucket's reservation is capped at its TPM, so that a
	// request larger than a minute's allowance can still pass when the
	// bucket is full (its real usage is charged when it settles).
	Tokens int
}

// Kind is the limit that refused a request.
type Kind uint8

const (
	// KindNone: not refused.
	KindNone Kind = iota
	// KindRequests: requests per minute.
	KindRequests
	// KindTokens: tokens per minute.
	KindTokens
	// KindConcurrency: requests in flight.
	KindConcurrency
	// KindUnavailable: the shared store is unreachable and the limiter
	// fails closed.
	KindUnavailable
)

func (k Kind) String() string {
	switch k {
	case KindRequests:
		return "rpm"
	case KindTokens:
		return "tpm"
	case KindConcurrency:
		return "concurrency"
	case KindUnavailable:
		return "unavailable"
	}
	return "none"
}

// Quota is the state of the tightest bucket for one kind of limit, for the
// x-ratelimit-* headers.
type Quota struct {
	// Limit is 0 when no bucket limits this kind.
	Limit     int
	Remaining int
	// Reset is the time until the bucket is full again.
	Reset time.Duration
}

// Decision is the outcome of an admission.
type Decision struct {
	Allowed bool
	// Refused is the limit that refused the request, Bucket its index in
	// the request.
	Refused Kind
	Bucket  int
	// RetryAfter is when the request would pass, as far as the refusing
	// limit can tell (a concurrency slot: unknown, a second).
	RetryAfter time.Duration
	// Requests and Tokens describe the tightest buckets, after the
	// charge when allowed.
	Requests, Tokens Quota
	// Fallback: decided by the per-instance state while the shared store
	// was unreachable.
	Fallback bool
}

// EstimateTokens is the cheap estimate of a prompt's tokens from its
// rendered size, reserved before the replica reports the real count:
// a token per 3 bytes of text (real tokenizers average about 4 bytes of
// English per token, so this errs high, and the difference is refunded),
// plus 4 per message for the chat template's markers, plus 3 for the
// reply's priming.
func EstimateTokens(textBytes, messages int) int {
	return (textBytes+2)/3 + 4*messages + 3
}
