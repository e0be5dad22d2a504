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
	// rollouts are the shares of each model with a rollout.
	rollouts map[string][]gateway.Share
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
	if err := a.adapterNames(owner); err != nil {
		return nil, err
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
	if n.rollouts, err = a.rollouts(owner); err != nil {
		return nil, err
	}
	for _, m := range a.Models {
		n.accepted = append(n.accepted, m.Name)
		n.accepted = append(n.accepted, m.Aliases...)
	}
	return n, nil
}

// rollouts checks the models' rollouts: each share names a model (or an
// alias) other than the model itself, that has no rollout of its own,
// with a positive weight, and a model with a rollout has no replicas of
// its own.
func (a *App) rollouts(owner map[string]string) (map[string][]gateway.Share, error) {
	split := map[string]bool{}
	for _, m := range a.Models {
		if len(m.Rollout) > 0 {
			split[m.Name] = true
		}
	}
	out := map[string][]gateway.Share{}
	for _, m := range a.Models {
		if len(m.Rollout) == 0 {
			continue
		}
		if m.SourceRaw != nil {
			return nil, fmt.Errorf("model %q: a model with a rollout has no replicas of its own (its rollout's models have)", m.Name)
		}
		seen := map[string]bool{}
		for _, s := range m.Rollout {
			of, ok := owner[s.Model]
			switch {
			case !ok:
				return nil, fmt.Errorf("model %q: rollout model %q is not a configured model", m.Name, s.Model)
			case of == m.Name:
				return nil, fmt.Errorf("model %q: its rollout names the model itself", m.Name)
			case split[of]:
				return nil, fmt.Errorf("model %q: rollout model %q has a rollout of its own", m.Name, s.Model)
			case seen[of]:
				return nil, fmt.Errorf("model %q: rollout model %q is named twice", m.Name, s.Model)
			case s.Weight <= 0:
				return nil, fmt.Errorf("model %q: rollout model %q: weight must be positive, got %d", m.Name, s.Model, s.Weight)
			}
			seen[of] = true
			out[m.Name] = append(out[m.Name], gateway.Share{Model: of, Weight: s.Weight})
		}
	}
	return out, nil
}

// apply gives the fleet's models their aliases, fallback chains and
// rollouts.
func (n *naming) apply(models map[string]*gateway.Model) {
	for name, m := range models {
		m.Aliases, m.Fallbacks, m.Rollout = n.own[name], n.fallbacks[name], n.rollouts[name]
	}
}
