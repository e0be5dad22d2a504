package auth

import "github.com/llmedge/llmedge/api"

// keyPriority is an API key's class: its own when set, else its user's.
// Both were validated when they were stored or loaded; a value that is not
// a class (written by hand into the storage) counts as standard.
func keyPriority(key, user string) api.Priority {
	if key != "" {
		p, _ := api.ParsePriority(key)
		return p
	}
	p, _ := api.ParsePriority(user)
	return p
}

// Priority is the class of work of a local user's requests: the users
// file's priority, standard for an unknown user.
func (u *Users) Priority(name string) api.Priority {
	if u == nil {
		return api.PriorityStandard
	}
	user, ok := u.set.Load().byName[name]
	if !ok {
		return api.PriorityStandard
	}
	p, _ := api.ParsePriority(user.Priority) // validated
	return p
}

// PriorityOf is the class of work of p's requests: an API key's, known
// when it was verified; a local user's from the users file (an access
// token carries none, so a change applies at once); standard for an
// outside identity (an identity provider's user, a client certificate).
func PriorityOf(users *Users, p *Principal) api.Priority {
	switch {
	case p == nil:
		return api.PriorityStandard
	case p.KeyID != "":
		return p.Priority
	case p.Provider != "":
		return api.PriorityStandard
	}
	return users.Priority(p.Subject)
}
