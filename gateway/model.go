package gateway

import (
	"net/http"
	"time"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/backends/adapters"
	"github.com/llmedge/llmedge/backends/pool"
	"github.com/llmedge/llmedge/backends/protocols"
	"github.com/llmedge/llmedge/boundary/members"
	"github.com/llmedge/llmedge/boundary/partition"
	"github.com/llmedge/llmedge/boundary/reserve"
	"github.com/llmedge/llmedge/discovery"
)

// Model is one model type the gateway serves.
type Model struct {
	Name string
	Pool *pool.Pool
	// Policy names the pool's balancing policy, for the Llmedge-Route
	// header and the logs.
	Policy string
	// Protocols maps a protocol name to its adapter; Protocol is the
	// default, a replica may name another.
	Protocols map[string]protocols.Protocol
	Protocol  string
	// UpstreamModel is the model name sent to replicas, unless a replica
	// sets its own.
	UpstreamModel string
	// SystemMessage is prepended when the request has neither a
	// system_message nor a leading system message.
	SystemMessage string
	// MaxTokens caps replies; 0 leaves it to the replica (or the client).
	MaxTokens int
	// StreamUpstream asks replicas for a stream even when the client wants
	// one JSON answer, so that the first-token and idle timeouts watch
	// every call (see attempt).
	StreamUpstream bool
	// APIKey is sent to replicas as a Bearer token.
	APIKey   string
	Timeouts Timeouts
	// MaxAttempts bounds tries on distinct replicas; 0 takes the Gateway's.
	MaxAttempts int
	// TryDuration bounds the time in which retries may start, counted
	// from the request's arrival; 0 leaves only MaxAttempts and the total
	// timeout.
	TryDuration time.Duration
	// Continuations bounds the continuations in a row of one stream that
	// bring no text, on other replicas after its replica failed mid-stream
	// (see continue.go); 0 means DefaultContinuations, negative turns
	// continuation off. MaxContinuations caps them all.
	Continuations int
	// Client, when set, replaces the Gateway's client for this model's
	// replicas (e.g. for its own dial timeout).
	Client *http.Client
	// Required makes the instance ready only while the model is routable
	// (its replicas, or a fallback, can take a request); a model not
	// required never makes the instance unready.
	Required bool
	// Discovery reports the state of the replica source for /readyz; nil
	// is a static list, always synced.
	Discovery func() discovery.Status
	// MaxBodyBytes and MaxMessages, when positive, are the model's own
	// limits, below the doors' (which take the largest of every model's):
	// a body is checked against them once its model is known (see
	// withinModelLimits). 0 leaves the doors' limits.
	MaxBodyBytes int64
	MaxMessages  int
	// Aliases are the model's other names, as the configuration gives
	// them (the Gateway's Aliases map them to Name).
	Aliases []string
	// Fallbacks are the models that serve a request in this one's place
	// when none of its replicas can take it, in the order they are tried:
	// the configuration's list with each fallback's own fallbacks after
	// it, without repeats (see FallbackChains).
	Fallbacks []string
	// Rollout, when set, makes this model a weighted split of others: each
	// conversation is served by one of the Share models, by weight, and
	// the model has no replicas of its own (see rolloutTarget).
	Rollout []Share
	// EnginePriority, when set, is the "priority" sent to replicas that
	// speak OpenAI's protocol for each class of work, in the order of
	// api.Priorities (critical first): for an engine that schedules by
	// priority itself (vLLM with --scheduling-policy priority, where a
	// lower value runs earlier and may preempt). nil sends none: vLLM
	// refuses the member when it schedules first come, first served.
	EnginePriority []int
	// EngineFair, when set (engine_priority fair), spreads each class's
	// EnginePriority over FairLevels by the tenant's recent share of the
	// model's tokens within the class: a light tenant's request gets a
	// lower (sooner) priority than a heavy one's, and overtakes its
	// queued work inside the engine, preemption included. nil sends the
	// class's priority alone.
	EngineFair *EngineShares
	// Adapters, when set, are the LoRA adapters requests may ask the
	// model's replicas for (backends/adapters).
	Adapters *adapters.Set
	// Members is the policy of the engine-control members clients may
	// send (boundary/members); nil is the default, all the gateway's.
	Members *members.Policy
	// CacheSharing says who shares a cache partition (boundary/partition):
	// by default each principal has its own.
	CacheSharing partition.Sharing
	// CacheSalt says which replicas get the partition's salt.
	CacheSalt CacheSalt
	// Caps bound what one request may ask of the model's engines: its
	// generations (n, best_of) and its prompt's estimated tokens.
	Caps reserve.Caps

	batch batchLoad // the batch lines on its replicas
}

// Timeouts bound one request. Zero fields take the defaults.
type Timeouts struct {
	// FirstToken bounds the wait for the first token of one attempt.
	FirstToken time.Duration
	// Idle bounds the gap between two tokens.
	Idle time.Duration
	// Total bounds the whole request, all attempts included.
	Total time.Duration
	// Response bounds one non-streamed replica call; 0: only Total does.
	Response time.Duration
}

// Default timeouts: generous, because a long prompt on a busy GPU can take
// tens of seconds to its first token.
const (
	DefaultFirstToken = 60 * time.Second
	DefaultIdle       = 30 * time.Second
	DefaultTotal      = 10 * time.Minute
)

func (t Timeouts) withDefaults() Timeouts {
	if t.FirstToken <= 0 {
		t.FirstToken = DefaultFirstToken
	}
	if t.Idle <= 0 {
		t.Idle = DefaultIdle
	}
	if t.Total <= 0 {
		t.Total = DefaultTotal
	}
	return t
}

// call is what replicas are asked for chat, but for the replica's address,
// upstream model name and key, which each attempt sets.
func (m *Model) call(chat *api.Chat) protocols.Request {
	s := chat.Sampling
	if m.MaxTokens > 0 && (s.MaxTokens == 0 || s.MaxTokens > m.MaxTokens) {
		s.MaxTokens = m.MaxTokens
	}
	req := protocols.Request{
		Messages:    m.upstreamMessages(chat),
		Temperature: s.Temperature,
		TopP:        s.TopP,
		MaxTokens:   s.MaxTokens,
		Stop:        s.Stop,
		Seed:        s.Seed,
		Wire:        chat.Wire,
		Lease:       chat.Lease,
	}
	if chat.Wire != nil {
		// What the gateway changes in a body it carries through: the
		// model's default system message, its reply cap.
		if chat.SystemMessage == nil && m.SystemMessage != "" && (len(chat.Messages) == 0 || chat.Messages[0].Role != api.RoleSystem) {
			req.AddSystem = m.SystemMessage
		}
		if m.MaxTokens > 0 {
			// Under every name the engine honours: a client's smaller
			// cap stays as written, a larger one under another name
			// (max_tokens beside max_output_tokens) is lowered.
			req.CapTokens = s.MaxTokens
		}
	}
	return req
}

// upstreamMessages applies the system message rules: a request's
// system_message replaces a leading system message; otherwise the model's
// default is added when the request has no system message first.
func (m *Model) upstreamMessages(req *api.Chat) []api.Message {
	msgs := req.Messages
	sys := m.SystemMessage
	if req.SystemMessage != nil {
		sys = *req.SystemMessage
		if len(msgs) > 0 && msgs[0].Role == api.RoleSystem {
			msgs = msgs[1:]
		}
	} else if sys == "" || (len(msgs) > 0 && msgs[0].Role == api.RoleSystem) {
		return msgs
	}
	out := make([]api.Message, 0, len(msgs)+1)
	out = append(out, api.Message{Role: api.RoleSystem, Content: sys})
	return append(out, msgs...)
}

func (m *Model) backendFor(r *pool.Replica) protocols.Protocol {
	if r.Protocol != "" {
		if b, ok := m.Protocols[r.Protocol]; ok {
			return b
		}
	}
	return m.Protocols[m.Protocol]
}

// Engine describes r's engine (health path, metrics), as its protocol
// knows it.
func (m *Model) Engine(r *pool.Replica) protocols.Engine {
	if d, ok := m.backendFor(r).(protocols.Describer); ok {
		return d.Engine()
	}
	return protocols.Engine{}
}

func (m *Model) upstreamModel(r *pool.Replica) string {
	if r.Model != "" {
		return r.Model
	}
	return m.UpstreamModel
}

// apiKey is the key sent to r: its own (e.g. from discovery metadata) or
// the model's.
func (m *Model) apiKey(r *pool.Replica) string {
	if r.APIKey != "" {
		return r.APIKey
	}
	return m.APIKey
}
