package gateway

import (
	"net/http"

	"github.com/llmedge/llmedge/backends/protocols"
	"github.com/llmedge/llmedge/boundary/members"
	"github.com/llmedge/llmedge/boundary/partition"
)

// CacheSalt says which of a model's replicas get the request's partition
// salt for their prefix caches (vLLM's cache_salt).
type CacheSalt uint8

const (
	// CacheSaltAuto salts for replicas whose protocol says its engine
	// takes a salt (protocols.Engine.CacheSalt: vllm).
	CacheSaltAuto CacheSalt = iota
	// CacheSaltOn salts for every replica carried a body through.
	CacheSaltOn
	// CacheSaltOff salts for none (a client's salt is still removed).
	CacheSaltOff
)

// refused answers a request whose body carries an engine-control member
// m's policy refuses, and reports whether it did.
func refused(w http.ResponseWriter, ex *Exchange, m *Model) bool {
	name := refusedMember(m, ex)
	if name == "" {
		return false
	}
	ex.Status = http.StatusBadRequest
	ex.Door.WriteError(w, members.RefusedError(ex.Chat.Name(), name))
	return true
}

// refusedMember is the first member of the request's body that m's
// policy refuses, "" when none.
func refusedMember(m *Model, ex *Exchange) string {
	if ex.Chat.Wire == nil {
		return ""
	}
	return m.Members.Refused(ex.Chat.Wire.Members)
}

// partitionOf is the request's cache partition on model m.
func partitionOf(m *Model, ex *Exchange) partition.Partition {
	var provider, subject string
	if p := ex.Principal; p != nil {
		provider, subject = p.Provider, p.Subject
	}
	return partition.Of(m.CacheSharing, m.Name, provider, subject, ex.Team)
}

// engineMembers sets call's member edits for one attempt on a replica
// spoken to through backend: the engine-control members the gateway owns
// (the class's priority, the partition's salt) set, a client's removed.
func (g *Gateway) engineMembers(m *Model, backend protocols.Protocol, ex *Exchange, call *protocols.Request) {
	w := call.Wire
	if w == nil {
		return
	}
	own := members.Own{Priority: call.Priority}
	if g.CacheKeys != nil && members.TakesSalt(w.Format) && m.salts(backend) {
		own.CacheSalt = g.CacheKeys.Salt(partitionOf(m, ex))
	}
	call.Members = m.Members.Edits(nil, w.Members, own)
}

// salts reports whether a replica spoken to through backend gets the
// partition's salt.
func (m *Model) salts(backend protocols.Protocol) bool {
	switch m.CacheSalt {
	case CacheSaltOn:
		return true
	case CacheSaltOff:
		return false
	}
	d, ok := backend.(protocols.Describer)
	return ok && d.Engine().CacheSalt
}

// indexKey is the request's partition's key in model m's prefix index.
func (g *Gateway) indexKey(m *Model, ex *Exchange) uint64 {
	if g.CacheKeys == nil {
		return 0
	}
	return g.CacheKeys.Index(partitionOf(m, ex))
}
