package guests

import (
	"fmt"
	"strconv"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/llmedge/llmedge/backends/pool"
	"github.com/llmedge/llmedge/modules/llmpolicy"
)

func init() {
	caddy.RegisterModule(LeastKV{})
}

// LeastKV (llmedge.policies.least_kv) picks the replica whose engine
// reports the most free KV cache (its own /metrics, read by llmedge off the
// request path), and, among replicas within Headroom of the best, the least
// loaded; a replica whose figure is unknown or stale counts as fully used,
// so known figures win and the gateway's in-flight count breaks the ties.
//
//	model qwen {
//		static http://10.0.0.5:8000 http://10.0.0.6:8000
//		protocol vllm
//		lb_policy least_kv {
//			headroom 0.1
//		}
//	}
type LeastKV struct {
	// Headroom is the KV usage (0..1) within which replicas count as
	// equally free; the least loaded of them wins. Default 0.05.
	Headroom float64 `json:"headroom,omitempty"`
}

// CaddyModule returns the Caddy module information.
func (LeastKV) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "llmedge.policies.least_kv",
		New: func() caddy.Module { return new(LeastKV) },
	}
}

// Validate checks Headroom.
func (p *LeastKV) Validate() error {
	if p.Headroom < 0 || p.Headroom > 1 {
		return fmt.Errorf("least_kv: headroom must be between 0 and 1, got %v", p.Headroom)
	}
	return nil
}

// Select implements pool.Policy.
func (p *LeastKV) Select(_ *pool.Request, c []*pool.Replica) pool.Choice {
	headroom := p.Headroom
	if headroom == 0 {
		headroom = 0.05
	}
	usage := func(r *pool.Replica) float64 {
		if l, ok := r.EngineLoad(); ok && l.KVUsage >= 0 {
			return l.KVUsage
		}
		return 1
	}
	best := c[0]
	for _, r := range c[1:] {
		if usage(r) < usage(best) {
			best = r
		}
	}
	floor := usage(best)
	for _, r := range c {
		if usage(r) <= floor+headroom && r.Load() < best.Load() {
			best = r
		}
	}
	return pool.Choice{Replica: best, Reason: "least_kv", Cached: -1}
}

// UnmarshalCaddyfile parses `lb_policy least_kv [{ headroom <0..1> }]`.
func (p *LeastKV) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // the policy's name
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		if d.Val() != "headroom" || !d.NextArg() {
			return d.Errf("least_kv: want headroom <0..1>")
		}
		v, err := strconv.ParseFloat(d.Val(), 64)
		if err != nil {
			return d.Errf("least_kv headroom %q: %v", d.Val(), err)
		}
		p.Headroom = v
	}
	return nil
}

// Interface guards.
var (
	_ llmpolicy.Policy      = (*LeastKV)(nil)
	_ caddy.Validator       = (*LeastKV)(nil)
	_ caddyfile.Unmarshaler = (*LeastKV)(nil)
)
