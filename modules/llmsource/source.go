// Package llmsource holds the guest modules of namespace llmedge.sources:
// where the replicas of a model type come from. `static` is a fixed list
// of URLs, `consul` the passing instances of a Consul service. A third
// party adds a source (DNS, Kubernetes endpoints, a cloud API) by
// registering a module in this namespace that implements Source; the
// llmedge app resolves it when the config loads.
package llmsource

import (
	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/llmedge/llmedge/discovery"
	"github.com/llmedge/llmedge/keep"
)

// Source is a guest module in llmedge.sources.
type Source interface {
	caddy.Module
	// Open starts (or joins) the watch of the model's replicas. It returns
	// the replica source, which the app subscribes to, and the function
	// that ends the watch when the config is cleaned up.
	Open(env Env) (discovery.Source, func(), error)
}

// Env is what the app tells a source about the model it serves.
type Env struct {
	// Model is the model type.
	Model string
	// Consul is the app's `consul` option with placeholders and the
	// CONSUL_* environment applied.
	Consul discovery.ConsulConfig
	Logger *zap.Logger
	// Kept holds what outlives a configuration (a watch the next
	// configuration joins); nil keeps it to this one.
	Kept *keep.Store
}

// ActiveChecked is implemented by sources whose replicas nobody else
// health-checks (a static list): the app probes them itself. Sources that
// report only healthy replicas (Consul's passing instances) do not.
type ActiveChecked interface {
	ActiveHealthChecks() bool
}

// Known lists the registered sources, for error messages.
func Known() []string { return moduleNames(Namespace) }

// Namespace of the source modules.
const Namespace = "llmedge.sources"

func moduleNames(ns string) []string {
	var names []string
	for _, m := range caddy.GetModules(ns) {
		names = append(names, m.ID.Name())
	}
	return names
}
