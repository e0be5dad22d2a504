package llmapp

import (
	"fmt"
	"strconv"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/auth"
	"github.com/llmedge/llmedge/backends/pool"
)

// priorityOf is the class of work of a principal's requests, from its API
// key or the users file (read at each request, so an edit applies at
// once); an outside identity's (an identity provider's user, a client
// certificate) from the limits tier it is mapped to.
func priorityOf(users *auth.Users, tiers map[string]api.Priority) func(*auth.Principal) api.Priority {
	return func(p *auth.Principal) api.Priority {
		if p != nil && p.Provider != "" && p.KeyID == "" {
			return tiers[p.Tier] // standard (the zero value) for a tier without one
		}
		return auth.PriorityOf(users, p)
	}
}

// tierPriorities are the tiers' classes of work, for those that set one.
func (a *App) tierPriorities() map[string]api.Priority {
	out := map[string]api.Priority{}
	for name, t := range a.Tiers {
		if p, err := api.ParsePriority(t.Priority); err == nil && p != api.PriorityStandard { // validated
			out[name] = p
		}
	}
	return out
}

// tierPriority reads a tier's priority.
func tierPriority(d *caddyfile.Dispenser, tier string, dst *string) error {
	var s string
	if err := oneString(d, &s); err != nil {
		return err
	}
	if _, err := api.ParsePriority(s); err != nil {
		return d.Errf("tier %s: %v", tier, err)
	}
	*dst = s
	return nil
}

// shedOptions sets the pool's options for sheddable work.
func (q *QueueConfig) shedOptions(o *pool.Options) {
	if q == nil {
		return
	}
	o.Reserve, o.NoShed, o.ShedKV = q.Reserve, q.Shed == "off", q.ShedKV
}

func (q *QueueConfig) validateShed() error {
	switch {
	case q == nil:
	case q.Reserve < 0:
		return fmt.Errorf("queue reserve must be 0 or more, got %d", q.Reserve)
	case q.Shed != "" && q.Shed != "on" && q.Shed != "off":
		return fmt.Errorf("queue shed: want on or off, got %q", q.Shed)
	case q.ShedKV < 0 || q.ShedKV > 1:
		return fmt.Errorf("queue shed_kv: want a share in (0, 1], got %v", q.ShedKV)
	}
	return nil
}

// shedOption reads the queue block's reserve, shed and shed_kv.
func (q *QueueConfig) shedOption(d *caddyfile.Dispenser, opt string) error {
	var s string
	if err := oneString(d, &s); err != nil {
		return err
	}
	switch opt {
	case "reserve":
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			return d.Errf("queue reserve: want a whole number of slots ≥ 0, got %q", s)
		}
		q.Reserve = n
	case "shed":
		if s != "on" && s != "off" {
			return d.Errf("queue shed: want on or off, got %q", s)
		}
		q.Shed = s
	case "shed_kv":
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || f <= 0 || f > 1 {
			return d.Errf("queue shed_kv: want a share in (0, 1], got %q", s)
		}
		q.ShedKV = f
	}
	return nil
}

// DefaultEnginePriority is what "engine_priority on" sends to the engine
// for critical, standard and sheddable work: vLLM runs a lower value
// first, and its requests without one have 0.
var DefaultEnginePriority = []int{-1, 0, 1}

// enginePriorityOption reads engine_priority: on or class (the defaults),
// off, three whole numbers (critical, standard, sheddable), or fair,
// optionally followed by the three numbers: the class's number spread
// over the tenants' shares (gateway.EngineShares).
func enginePriorityOption(d *caddyfile.Dispenser, dst *[]int, fair *bool) error {
	args := d.RemainingArgs()
	*fair = false
	switch {
	case len(args) == 1 && (args[0] == "on" || args[0] == "class"):
		*dst = append([]int(nil), DefaultEnginePriority...)
		return nil
	case len(args) == 1 && args[0] == "off":
		*dst = nil
		return nil
	case len(args) == 1 && args[0] == "fair":
		*dst, *fair = append([]int(nil), DefaultEnginePriority...), true
		return nil
	case len(args) == len(api.Priorities)+1 && args[0] == "fair":
		*fair, args = true, args[1:]
	case len(args) > 0 && args[0] == "fair":
		return d.Errf("engine_priority fair: want nothing more or three whole numbers (critical, standard, sheddable), got %d", len(args)-1)
	case len(args) != len(api.Priorities):
		return d.Errf("engine_priority: want on, class, fair, off, or three whole numbers (critical, standard, sheddable), got %d arguments", len(args))
	}
	out := make([]int, len(args))
	for i, a := range args {
		n, err := strconv.Atoi(a)
		if err != nil {
			return d.Errf("engine_priority: %q is not a whole number", a)
		}
		out[i] = n
	}
	*dst = out
	return nil
}

func (mc *ModelConfig) validateEnginePriority() error {
	if n := len(mc.EnginePriority); n != 0 && n != len(api.Priorities) {
		return fmt.Errorf("engine_priority: want 3 numbers (critical, standard, sheddable), got %d", n)
	}
	if mc.EngineFair && len(mc.EnginePriority) == 0 {
		return fmt.Errorf("engine_fair: needs engine_priority's numbers")
	}
	return nil
}

// userPriority reads an inline user's priority: critical, standard or
// sheddable.
func userPriority(d *caddyfile.Dispenser, u *auth.User) error {
	var s string
	if err := oneString(d, &s); err != nil {
		return err
	}
	if _, err := api.ParsePriority(s); err != nil {
		return d.Errf("user %q: %v", u.Name, err)
	}
	u.Priority = s
	return nil
}
