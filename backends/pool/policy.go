package pool

import (
	"net/http"
	"time"

	"github.com/llmedge/llmedge/api"
)

// Policy chooses the replica for a request. Implementations live in
// package routing and, as Caddy guest modules, wherever a third party
// writes one; they are safe for concurrent use.
type Policy interface {
	// Select picks one of candidates, which is never empty and holds only
	// usable replicas (healthy, breaker not open, below their cap, not yet
	// tried for this request). It must return one of them.
	Select(req *Request, candidates []*Replica) Choice
}

// ReplicaWatcher is implemented by policies that keep state per replica
// (a prefix index, a hash ring): the pool tells them the current set after
// every change, so that they can forget replicas that left.
type ReplicaWatcher interface {
	ReplicasChanged(current []*Replica)
}

// Request is what a policy sees of the request it places.
type Request struct {
	// Model is the model type.
	Model string
	// Messages are the messages as the replica will receive them, the
	// system message actually sent first.
	Messages []api.Message
	// User is the authenticated principal ("" when none).
	User string
	// Partition is the key of the request's cache partition
	// (boundary/partition): a prefix policy matches the prompt only
	// against prompts of the same partition. 0 is the model-wide one.
	Partition uint64
	// Share is the user's weight in the fair wait queue: while tenants
	// wait, one of share 2 is served about twice the tokens of one of
	// share 1. 0 means 1.
	Share float64
	// Header is the client's request header, read-only.
	Header http.Header
	// Priority is the request's class of work: the wait queue serves a
	// higher class first, and refuses a sheddable request at once while
	// the pool is saturated (ErrShed).
	Priority api.Priority
	// NoWait: the request never waits in the queue, whatever NoShed
	// says: refused at once (ErrShed) while the pool is saturated, and
	// ErrSaturated when no replica has a slot. A batch's line takes only
	// the capacity online requests leave idle.
	NoWait bool
	// EngineByClass: the replicas' engines order their queues by class
	// of work, sheddable last (the gateway sends each request its class's
	// priority). A NoWait request of the lowest class is then refused
	// only while the pool is saturated as SpareBelow judges it (a queue
	// of the gateway's own sheddable work in an engine is not saturation
	// for it), and a request of a higher class is routed by the load
	// without the sheddable requests it overtakes (Replica.LoadFor).
	EngineByClass bool
	// Waited is how long the request already waited for a slot, on its
	// earlier attempts: the queue timeout bounds the sum, not each wait.
	Waited time.Duration
}

// Choice is a policy's pick and the reason for it, for logs and metrics.
type Choice struct {
	Replica *Replica
	// Reason says why Replica was chosen, e.g. ReasonPrefix.
	Reason string
	// Cached is the predicted share (0..1) of the prompt that Replica
	// holds in its prefix cache; negative when the policy does not predict.
	Cached float64
	// Prefill is the prefill work the request adds to Replica until its
	// first token (e.g. its uncached prompt blocks), in the policy's own
	// units; the pool keeps the sum per replica (Replica.PendingPrefill).
	Prefill int64
	// SlowAvoided is how many replicas the pool held back from the policy
	// as slow (weighted down or ejected) for this choice; set by the pool.
	SlowAvoided int
}

// Reasons a policy gives for a choice.
const (
	// ReasonOnly: there was one candidate.
	ReasonOnly = "only"
	// ReasonLoad: the least loaded candidate (or the less loaded of a sample).
	ReasonLoad = "load"
	// ReasonPrefix: the candidate holding the longest prefix of the prompt.
	ReasonPrefix = "prefix"
	// ReasonAffinity: the candidate the request's session is bound to.
	ReasonAffinity = "affinity"
	// ReasonRoundRobin and ReasonRandom: the policy's fixed rule.
	ReasonRoundRobin = "round_robin"
	ReasonRandom     = "random"
)

// Pick is a Choice of r for reason with no cache prediction.
func Pick(r *Replica, reason string) Choice { return Choice{Replica: r, Reason: reason, Cached: -1} }
