package auth

import (
	"fmt"
	"strings"
)

// Principals and their sources.
//
// A principal's name (Principal.Subject) keys everything the gateway keeps
// about it: its rate limits and budgets, its revocations, its lockout, its
// ledger rows, and what the status page shows. Names therefore never
// collide across sources, by construction rather than by luck:
//
//   - a local user (and an API key, whose owner is always a local user)
//     keeps its bare name, as it always had;
//   - every outside source (an identity provider, client certificates) has
//     a namespace, a prefix every one of its principals' names starts with:
//     its user_prefix, or by default its issuer URL and '#'
//     ("https://sso.example.com/realms/ai#alice"; "mtls#build-bot");
//   - the configuration is refused when two sources' namespaces overlap
//     (one prefix starts another), or a local user's name lies in a
//     source's namespace ("kc:eve" beside `user_prefix kc:`), naming both;
//     a users file that would add such a user is not loaded.
//
// So the one name is the source-qualified key: nothing that keys state by
// name needs to know where a principal came from.

// Namespace is the names an outside source's principals take: each starts
// with Prefix.
type Namespace struct {
	// Source names the source: an identity provider's issuer URL, or
	// "mtls" for client certificates.
	Source string
	// Prefix starts every principal name of the source; never empty.
	Prefix string
}

// CheckNamespaces refuses namespaces of different sources that overlap:
// one's prefix starts another's (the same prefix included), so that a name
// could be both's. A source may appear more than once (two configurations
// of one provider).
func CheckNamespaces(ns []Namespace) error {
	for i, a := range ns {
		if a.Prefix == "" {
			return fmt.Errorf("%s: its principals have no namespace (an empty user_prefix)", a.Source)
		}
		for _, b := range ns[i+1:] {
			if a.Source == b.Source {
				continue
			}
			if strings.HasPrefix(a.Prefix, b.Prefix) || strings.HasPrefix(b.Prefix, a.Prefix) {
				return fmt.Errorf("the user names of %s (user_prefix %q) and of %s (user_prefix %q) can be the same: "+
					"give them user prefixes of which neither starts the other", a.Source, a.Prefix, b.Source, b.Prefix)
			}
		}
	}
	return nil
}

// namespaceOf is the namespace name lies in, if any.
func namespaceOf(name string, ns []Namespace) (Namespace, bool) {
	for _, n := range ns {
		if strings.HasPrefix(name, n.Prefix) {
			return n, true
		}
	}
	return Namespace{}, false
}

// Reserve keeps ns for the outside sources: the current users, and the
// users of every later Replace, must have names outside them. It checks
// ns (CheckNamespaces) and the current users, naming the user and the
// source that collide.
func (u *Users) Reserve(ns []Namespace) error {
	if err := CheckNamespaces(ns); err != nil {
		return err
	}
	if err := checkReserved(u.set.Load(), ns); err != nil {
		return err
	}
	u.reserved.Store(&ns)
	return nil
}

// checkReserved refuses a local user whose name lies in a namespace.
func checkReserved(set *userSet, ns []Namespace) error {
	if set == nil || len(ns) == 0 {
		return nil
	}
	for name := range set.byName {
		if n, ok := namespaceOf(name, ns); ok {
			return fmt.Errorf("local user %q has a name in the namespace of %s (user_prefix %q): "+
				"the two would share limits, budgets, revocations and ledger rows; rename the user or change the prefix",
				name, n.Source, n.Prefix)
		}
	}
	return nil
}

// Unplaced reports whether name, a user of the outside source, lies in
// none of the namespaces that source has now: an llmedge token (or a
// refresh token) from a token exchange made before its provider's
// user_prefix changed or its trust was removed. Such a name could be a
// local user's or another source's, so it is refused. False before
// Reserve, when no namespaces are known.
func (u *Users) Unplaced(source, name string) bool {
	if u == nil {
		return false
	}
	ns := u.reserved.Load()
	if ns == nil {
		return false
	}
	for _, n := range *ns {
		if n.Source == source && strings.HasPrefix(name, n.Prefix) {
			return false
		}
	}
	return true
}
