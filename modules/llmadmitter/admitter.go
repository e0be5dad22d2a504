// Package llmadmitter holds the guest modules of namespace
// llmedge.admitters: the rules that admit or refuse a request after its
// credential and model scope were checked, before a replica is chosen.
// `limits` applies the tenants' limits (requests and tokens per minute,
// concurrency) of the llmedge block. The llmedge app loads the admitters
// its configuration names, in order (`admitter <name>` lines; limits
// alone by default), and asks each in turn: the first refusal stands. A
// third party adds one (a budget, business hours, a model's own quota)
// by registering a module in this namespace that implements Admitter.
package llmadmitter

import (
	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/llmedge/llmedge/tenancy"
)

// Namespace of the admitter modules.
const Namespace = "llmedge.admitters"

// Admitter is a guest module in llmedge.admitters.
type Admitter interface {
	caddy.Module
	// Admitter returns the admission rule, built from what the app holds;
	// nil when it has nothing to check (it then costs requests nothing).
	Admitter(env Env) (tenancy.Admitter, error)
}

// Env is what the app gives an admitter.
type Env struct {
	// Tenancy is the configuration's limits and revocations.
	Tenancy *tenancy.Service
	Logger  *zap.Logger
}

func init() { caddy.RegisterModule(Limits{}) }

// Limits applies the tenants' limits configured in the llmedge block
// (`limits`, a user's own, a model's, an API key's).
type Limits struct{}

// CaddyModule returns the Caddy module information.
func (Limits) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: Namespace + ".limits", New: func() caddy.Module { return new(Limits) }}
}

// Admitter implements Admitter.
func (Limits) Admitter(env Env) (tenancy.Admitter, error) {
	return env.Tenancy.Admitter(), nil
}

var _ Admitter = (*Limits)(nil)
