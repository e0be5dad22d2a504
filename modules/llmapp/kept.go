package llmapp

import "github.com/llmedge/llmedge/keep"

// kept is what outlives a configuration in this process: the replicas'
// breakers, the prefix indexes and the hub sharing them between
// instances, the Consul watches, the limit counters and their Redis
// connection, the revoked tokens and the status page's windows. It is the one such place; every part that keeps something is
// handed it (tests make their own).
var kept = keep.New()

// Kept is the process's store of what outlives a configuration, for the
// guest modules that keep something of their own.
func Kept() *keep.Store { return kept }
