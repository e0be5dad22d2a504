// Package members is a model's policy of the members a client's body may
// carry to the engine. A body is carried through as the client wrote it,
// but the engine-control members (Controls) are the gateway's: the ones
// it owns (priority, cache_salt) it sets or removes, the others it
// refuses, unless the operator allows them for the model. The policy
// yields member edits (Edit) that the protocol applies to the body it
// sends (Apply), whatever the door's format, translations included.
package members

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/internal/jsonx"
	"github.com/llmedge/llmedge/wire"
)

// Policy is a model's policy. The zero value, and nil, is the default:
// every control member the gateway's.
type Policy struct {
	allow map[string]bool
}

// NewPolicy returns the policy that lets clients send the named control
// members to the engine as they wrote them. A name that is no control
// member is an error: such a member is carried through already.
func NewPolicy(allow []string) (*Policy, error) {
	if len(allow) == 0 {
		return nil, nil
	}
	p := &Policy{allow: make(map[string]bool, len(allow))}
	for _, name := range allow {
		if controls[name] == nil {
			return nil, fmt.Errorf("allow_members: %q is not an engine-control member (those are %s); other members reach the engine as the client wrote them", name, Names())
		}
		p.allow[name] = true
	}
	return p, nil
}

// Names lists the control members, sorted, comma-separated.
func Names() string {
	names := make([]string, 0, len(Controls))
	for _, c := range Controls {
		names = append(names, c.Name)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// Allows reports whether clients may send the control member name.
func (p *Policy) Allows(name string) bool { return p != nil && p.allow[name] }

// Allowed lists the members the policy allows, sorted.
func (p *Policy) Allowed() []string {
	if p == nil {
		return nil
	}
	out := make([]string, 0, len(p.allow))
	for n := range p.allow {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Refused returns the first member of ms the policy refuses, "" when
// none. Nothing is allocated.
func (p *Policy) Refused(ms []wire.Member) string {
	for i := range ms {
		if c := controls[ms[i].Name]; c != nil && c.Rule == Refused && !p.Allows(c.Name) {
			return c.Name
		}
	}
	return ""
}

// RefusedError is the client's 400 about member name, in the door's
// shape once the door writes it.
func RefusedError(model, name string) *api.Error {
	e := api.NewError(400, "'"+name+"' controls the engine itself, which model '"+model+
		"' does not let clients do; leave it out (an operator may allow it: allow_members)")
	e.Code, e.Param = "unsupported_parameter", name
	return e
}

// Own are the gateway's values of the members it owns, for one request
// to one replica; a zero field removes the client's member.
type Own struct {
	// Priority is the engine priority of the request's class of work,
	// nil when the model sends none.
	Priority *int
	// CacheSalt is the request's partition's salt, "" when the replica
	// gets none.
	CacheSalt string
}

// Edit is a change of one top-level member of a body: set to Value (JSON
// text), added when the body has no such member, or removed when Value
// is nil.
type Edit struct {
	Name  string
	Value []byte
}

// Edits appends to dst the edits of the members the gateway owns in a
// body of members ms: its own values set, a client's removed when the
// gateway has none to give (unless the operator allows the client's). It
// allocates only when there is something to change.
func (p *Policy) Edits(dst []Edit, ms []wire.Member, own Own) []Edit {
	switch {
	case own.Priority != nil:
		dst = append(dst, Edit{Name: "priority", Value: strconv.AppendInt(nil, int64(*own.Priority), 10)})
	case has(ms, "priority") && !p.Allows("priority"):
		dst = append(dst, Edit{Name: "priority"})
	}
	switch {
	case own.CacheSalt != "":
		dst = append(dst, Edit{Name: "cache_salt", Value: jsonx.String(nil, own.CacheSalt)})
	case has(ms, "cache_salt") && !p.Allows("cache_salt"):
		dst = append(dst, Edit{Name: "cache_salt"})
	}
	return dst
}

func has(ms []wire.Member, name string) bool {
	for i := range ms {
		if ms[i].Name == name {
			return true
		}
	}
	return false
}

// TakesSalt reports whether vLLM takes cache_salt on requests of format
// f: chat, completions and the Responses API (not embeddings, nor its
// Anthropic-compatible Messages endpoint).
func TakesSalt(f api.Format) bool {
	switch f {
	case api.FormatOpenAIChat, api.FormatOpenAICompletions, api.FormatOpenAIResponses:
		return true
	}
	return false
}
