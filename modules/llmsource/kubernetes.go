package llmsource

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/llmedge/llmedge/discovery"
	"github.com/llmedge/llmedge/keep"
)

func init() {
	caddy.RegisterModule(Kubernetes{})
}

// Kubernetes is the ready endpoints of a Kubernetes Service, or the ready
// Pods of an InferencePool (llmedge.sources.kubernetes), followed with a
// list-and-watch on the API. In the cluster it uses the Pod's service
// account; outside, a kubeconfig.
type Kubernetes struct {
	// Service names the Service whose EndpointSlices are followed.
	Service string `json:"service,omitempty"`
	// InferencePool names the InferencePool (inference.networking.k8s.io/v1)
	// whose selected Pods are followed; exclusive with Service.
	InferencePool string `json:"inference_pool,omitempty"`
	// Namespace of the Service or pool; default the service account's (or
	// the kubeconfig context's), else "default".
	Namespace string `json:"namespace,omitempty"`
	// Port is the Service port's name (or number), needed when it has
	// several; for a pool, one of its target port numbers (default all).
	Port string `json:"port,omitempty"`
	// Scheme of the replicas, http (default) or https.
	Scheme string `json:"scheme,omitempty"`
	// Kubeconfig is a kubeconfig file's path; empty: in-cluster
	// credentials. Placeholders such as {env.KUBECONFIG} work.
	Kubeconfig string `json:"kubeconfig,omitempty"`
	// Context names the kubeconfig's context; default its current one.
	Context string `json:"context,omitempty"`
}

// CaddyModule returns the Caddy module information.
func (Kubernetes) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: Namespace + ".kubernetes", New: func() caddy.Module { return new(Kubernetes) }}
}

// Validate checks that one Service or one pool is named, and the scheme.
func (k *Kubernetes) Validate() error {
	if (k.Service == "") == (k.InferencePool == "") {
		return fmt.Errorf("kubernetes source: name a service or an inference_pool (one of them)")
	}
	if k.Scheme != "" && k.Scheme != "http" && k.Scheme != "https" {
		return fmt.Errorf("kubernetes source: scheme %q: want http or https", k.Scheme)
	}
	if k.InferencePool != "" && k.Port != "" {
		if n, err := strconv.Atoi(k.Port); err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("kubernetes source: port %q: an inference pool's target port is a number", k.Port)
		}
	}
	return nil
}

// Open implements Source: it joins the running watcher of the same
// settings, or starts one.
func (k *Kubernetes) Open(env Env) (discovery.Source, func(), error) {
	if err := k.Validate(); err != nil {
		return nil, nil, err
	}
	repl := caddy.NewReplacer()
	creds := discovery.KubeCredentials{Kubeconfig: repl.ReplaceAll(k.Kubeconfig, ""), Context: k.Context}
	w, release, err := AcquireKubeWatcher(env.Kept, creds, discovery.KubeWatchConfig{
		Namespace: k.Namespace, Service: k.Service, InferencePool: k.InferencePool, Port: k.Port, Scheme: k.Scheme,
	})
	if err != nil {
		return nil, nil, err
	}
	return w, release, nil
}

// UnmarshalCaddyfile parses
//
//	source kubernetes [<service>] {
//		service        <name>
//		inference_pool <name>
//		namespace      <namespace>
//		port           <name|number>
//		scheme         http|https
//		kubeconfig     <path>
//		context        <name>
//	}
func (k *Kubernetes) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // the source's name
	if d.NextArg() {
		k.Service = d.Val()
	}
	if d.NextArg() {
		return d.ArgErr()
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		dst, ok := map[string]*string{
			"service": &k.Service, "inference_pool": &k.InferencePool, "namespace": &k.Namespace,
			"port": &k.Port, "scheme": &k.Scheme, "kubeconfig": &k.Kubeconfig, "context": &k.Context,
		}[d.Val()]
		if !ok {
			return d.Errf("unrecognized kubernetes source option %q", d.Val())
		}
		if !d.NextArg() {
			return d.ArgErr()
		}
		*dst = d.Val()
		if d.NextArg() {
			return d.ArgErr()
		}
	}
	if err := k.Validate(); err != nil {
		return d.Err(err.Error())
	}
	return nil
}

// sharedKubeWatcher is a running watcher kept across config reloads, keyed
// by its complete settings, as the Consul watchers are.
type sharedKubeWatcher struct{ *discovery.KubeWatcher }

func (s sharedKubeWatcher) Destruct() error {
	s.Stop()
	return nil
}

// AcquireKubeWatcher returns the running watcher for these settings in
// kept, starting one if none runs, and the function that releases it (the
// last release stops it). A nil kept shares the watcher with nobody.
func AcquireKubeWatcher(kept *keep.Store, creds discovery.KubeCredentials, wc discovery.KubeWatchConfig) (*discovery.KubeWatcher, func(), error) {
	if kept == nil {
		kept = keep.New()
	}
	key, err := json.Marshal(struct {
		Creds discovery.KubeCredentials
		Watch discovery.KubeWatchConfig
	}{creds, wc})
	if err != nil {
		return nil, nil, err
	}
	k := "llmsource.kubernetes " + string(key)
	v, _, err := kept.LoadOrNew(k, func() (any, error) {
		// Not the config's logger: the watcher outlives the config.
		w, err := discovery.NewKubeWatcher(creds, wc, caddy.Log().Named("llmedge.kubernetes"))
		if err != nil {
			return nil, err
		}
		w.Start()
		return sharedKubeWatcher{w}, nil
	})
	if err != nil {
		return nil, nil, err
	}
	return v.(sharedKubeWatcher).KubeWatcher, func() { _, _ = kept.Delete(k) }, nil
}

// Interface guards.
var (
	_ Source                = (*Kubernetes)(nil)
	_ caddy.Validator       = (*Kubernetes)(nil)
	_ caddyfile.Unmarshaler = (*Kubernetes)(nil)
)
