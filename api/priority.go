package api

import "fmt"

// Priority is a request's class of work under overload. When demand
// exceeds what the replicas can serve, a higher class is dispatched
// first, and the sheddable class is refused early rather than left to
// wait. The zero value is PriorityStandard.
type Priority int8

// The classes, lowest first.
const (
	// PrioritySheddable is work that may be refused under overload (a
	// batch job): it is never queued behind a saturated model.
	PrioritySheddable Priority = -1
	// PriorityStandard is every request's class unless told otherwise.
	PriorityStandard Priority = 0
	// PriorityCritical is served before the others (interactive users).
	PriorityCritical Priority = 1
)

// Priorities lists the classes, highest first.
var Priorities = [...]Priority{PriorityCritical, PriorityStandard, PrioritySheddable}

// PriorityHeader is the request header by which a client lowers its
// request's class below its credential's (it cannot raise it).
const PriorityHeader = "Llmedge-Priority"

// String is the class's name: critical, standard or sheddable.
func (p Priority) String() string {
	switch {
	case p >= PriorityCritical:
		return "critical"
	case p <= PrioritySheddable:
		return "sheddable"
	}
	return "standard"
}

// Index is the class's place in Priorities (0 for critical), for arrays
// of per-class figures.
func (p Priority) Index() int {
	switch {
	case p >= PriorityCritical:
		return 0
	case p <= PrioritySheddable:
		return 2
	}
	return 1
}

// ParsePriority reads a class name; "" is standard.
func ParsePriority(s string) (Priority, error) {
	switch s {
	case "", "standard":
		return PriorityStandard, nil
	case "critical":
		return PriorityCritical, nil
	case "sheddable":
		return PrioritySheddable, nil
	}
	return PriorityStandard, fmt.Errorf("priority %q: want critical, standard or sheddable", s)
}

// Lower is the class of a request whose credential has class p and that
// asks for class asked: the lower of the two, so that a client can lower
// its own request's class but never raise it.
func (p Priority) Lower(asked Priority) Priority { return min(p, asked) }
