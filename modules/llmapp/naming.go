package llmapp

import (
	"fmt"

	"github.com/llmedge/llmedge/gateway"
)

// naming is what the models' names, aliases and fallbacks come to once
// checked: the names requests may give, and the fallback chains.
type naming struct {
	// accepted are the names a request may give: each model, then its
	// aliases, in the configuration's order.
	accepted []string
	// aliases map each alias to its model; nil without aliases.
	aliases map[string]string
	// fallbacks are each model's fallback chain (gateway.FallbackChains).
	fallbacks map[string][]string
	// own are each model's aliases.
	own map[string][]string
}

// naming checks the models' aliases and fallbacks: an alias that is
// another model's name or alias (or its own model's), a fallback that
// names no model, and a fallback cycle are errors at load time. A
// fallback may be given by an alias; it stands for its model.
func (a *App) naming() (*naming, error) {
	n := &naming{fallbacks: map[string][]string{}, own: map[string][]string{}}
	owner := map[string]string{} // every name → the model it names
	for _, m := range a.Models {
		owner[m.Name] = m.Name
	}
	for _, m := range a.Models {
		for _, al := range m.Aliases {
			if al == "" {
				return nil, fmt.Errorf("model %q: an alias is empty", m.Name)
			}
			if of, taken := owner[al]; taken {
				if of == al {
					return nil, fmt.Errorf("model %q: alias %q is the name of a model", m.Name, al)
				}
				return nil, fmt.Errorf("model %q: alias %q is already an alias of model %q", m.Name, al, of)
			}
			owner[al] = m.Name
			if n.aliases == nil {
				n.aliases = map[string]string{}
			}
			n.aliases[al] = m.Name
			n.own[m.Name] = append(n.own[m.Name], al)
		}
	}
	direct := make(map[string][]string, len(a.Models))
	for _, m := range a.Models {
		list := make([]string, 0, len(m.Fallbacks))
		for _, f := range m.Fallbacks {
			of, ok := owner[f]
			if !ok {
				return nil, fmt.Errorf("model %q: fallback %q is not a configured model", m.Name, f)
			}
			list = append(list, of)
		}
		direct[m.Name] = list
	}
	chains, err := gateway.FallbackChains(direct)
	if err != nil {
		return nil, err
	}
	n.fallbacks = chains
	for _, m := range a.Models {
		n.accepted = append(n.accepted, m.Name)
		n.accepted = append(n.accepted, m.Aliases...)
	}
	return n, nil
}

// apply gives the fleet's models their aliases and fallback chains.
func (n *naming) apply(models map[string]*gateway.Model) {
	for name, m := range models {
		m.Aliases, m.Fallbacks = n.own[name], n.fallbacks[name]
	}
}
