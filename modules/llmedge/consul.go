package llmedge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"go.uber.org/zap"

	"github.com/llmedge/llmedge/discovery"
	"github.com/llmedge/llmedge/pool"
)

// ConsulOptions is the `consul` option of the llmedge app: how to reach
// Consul (empty fields take the CONSUL_* environment variables, then
// Consul's defaults), shared by every model with a consul_service and by
// the `consul` dynamic upstream source.
type ConsulOptions struct {
	discovery.ConsulConfig
	// SyncTimeout bounds how long loading a config waits for a new
	// watcher's first answer, so that a reload that changes a service
	// switches to a filled pool. Default: 5s. The request path never
	// waits on Consul.
	SyncTimeout caddy.Duration `json:"sync_timeout,omitempty"`
}

// DefaultSyncTimeout is ConsulOptions.SyncTimeout's default.
const DefaultSyncTimeout = 5 * time.Second

// watchers holds the running Consul watchers, keyed by their complete
// settings, across config reloads: a reload with the same settings reuses
// the running watcher (no gap, no duplicate); one with other settings
// starts a new watcher, and the old one stops when the last config using
// it is cleaned up.
var watchers = caddy.NewUsagePool()

type sharedWatcher struct{ *discovery.Watcher }

func (s sharedWatcher) Destruct() error {
	s.Stop()
	return nil
}

// resolved applies placeholders ({env.*}, {file.*}) and the environment.
func (o *ConsulOptions) resolved() discovery.ConsulConfig {
	var c discovery.ConsulConfig
	if o != nil {
		c = o.ConsulConfig
	}
	repl := caddy.NewReplacer()
	for _, s := range []*string{&c.Address, &c.Scheme, &c.Token, &c.TokenFile, &c.Datacenter, &c.Namespace,
		&c.Partition, &c.HTTPAuth, &c.CAFile, &c.CAPath, &c.CertFile, &c.KeyFile, &c.TLSServerName} {
		*s = repl.ReplaceAll(*s, "")
	}
	return c.Resolve()
}

func (o *ConsulOptions) syncTimeout() time.Duration {
	if o == nil || o.SyncTimeout <= 0 {
		return DefaultSyncTimeout
	}
	return time.Duration(o.SyncTimeout)
}

// ConsulClient is how the config of ctx reaches Consul: the llmedge app's
// `consul` option when the app is configured, else the environment.
func ConsulClient(ctx caddy.Context) (discovery.ConsulConfig, time.Duration, error) {
	v, err := ctx.AppIfConfigured("llmedge")
	if errors.Is(err, caddy.ErrNotConfigured) {
		var none *ConsulOptions
		return none.resolved(), none.syncTimeout(), nil
	}
	if err != nil {
		return discovery.ConsulConfig{}, 0, err
	}
	app := v.(*App)
	return app.Consul.resolved(), app.Consul.syncTimeout(), nil
}

// AcquireConsulWatcher returns the running watcher for these settings,
// starting one if none runs, and the function that releases it (the last
// release stops it).
func AcquireConsulWatcher(client discovery.ConsulConfig, wc discovery.WatchConfig) (*discovery.Watcher, func(), error) {
	key, err := json.Marshal(struct {
		Client discovery.ConsulConfig
		Watch  discovery.WatchConfig
	}{client, wc})
	if err != nil {
		return nil, nil, err
	}
	v, _, err := watchers.LoadOrNew(string(key), func() (caddy.Destructor, error) {
		// Not the config's logger: the watcher outlives the config.
		w, err := discovery.NewConsulWatcher(client, wc, caddy.Log().Named("llmedge.consul"))
		if err != nil {
			return nil, err
		}
		w.Start()
		return sharedWatcher{w}, nil
	})
	if err != nil {
		return nil, nil, err
	}
	return v.(sharedWatcher).Watcher, func() { _, _ = watchers.Delete(string(key)) }, nil
}

// WaitSynced waits, up to timeout in all, for each watcher's first answer
// (a reused watcher has it already), so that a config about to serve
// starts with filled pools. Watchers that have not synced by then keep
// trying in the background; readiness reports them.
func WaitSynced(ctx context.Context, ws []*discovery.Watcher, timeout time.Duration, logger *zap.Logger) {
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for _, w := range ws {
		if !w.WaitSynced(wctx) {
			st := w.Status()
			logger.Warn("consul service not synced yet; serving without its replicas until it is",
				zap.String("consul_service", st.Service), zap.String("error", st.LastError))
		}
	}
}

// watchConsul feeds p from the model's Consul service; it returns the
// watcher and the cleanup.
func (mc *ModelConfig) watchConsul(client discovery.ConsulConfig, p *pool.Pool, logger *zap.Logger) (*discovery.Watcher, func(), error) {
	if mc.ConsulToken != "" {
		client.Token, client.TokenFile = caddy.NewReplacer().ReplaceAll(mc.ConsulToken, ""), ""
	}
	w, release, err := AcquireConsulWatcher(client, discovery.WatchConfig{
		Service:    mc.ConsulService,
		Tag:        mc.ConsulTag,
		Filter:     mc.ConsulFilter,
		Datacenter: mc.ConsulDatacenter,
	})
	if err != nil {
		return nil, nil, err
	}
	logger = logger.With(zap.String("model_type", mc.Name), zap.String("consul_service", mc.ConsulService))
	unsubscribe := w.Subscribe(func(list []discovery.Instance) {
		p.Set(mc.replicas(list, logger))
	})
	return w, func() { unsubscribe(); release() }, nil
}

// replicas converts instances to pool replicas: instance Meta overrides
// the model's protocol, upstream model, weight and max_concurrency.
func (mc *ModelConfig) replicas(list []discovery.Instance, logger *zap.Logger) []*pool.Replica {
	out := make([]*pool.Replica, 0, len(list))
	for _, in := range list {
		r, err := pool.NewReplica(in.URL)
		if err != nil {
			logger.Warn("replica skipped", zap.String("id", in.ID), zap.Error(err))
			continue
		}
		if in.Protocol != "" {
			if _, ok := protocols[in.Protocol]; !ok {
				logger.Warn("replica skipped: unknown protocol in its Meta", zap.String("id", in.ID), zap.String("protocol", in.Protocol))
				continue
			}
		}
		r.Model, r.Protocol, r.Weight = in.Model, in.Protocol, in.Weight
		r.MaxConcurrency = mc.MaxConcurrency
		if in.MaxConcurrency > 0 {
			r.MaxConcurrency = in.MaxConcurrency
		}
		out = append(out, r)
	}
	return out
}

// unmarshalCaddyfile parses
//
//	consul [<address>] {
//		address              <host:port|URL>
//		scheme               http|https
//		token                <acl-token>
//		token_file           <path>
//		datacenter           <dc>
//		namespace            <ns>
//		partition            <partition>
//		http_auth            <user:password>
//		ca_file              <path>
//		ca_path              <dir>
//		cert_file            <path>
//		key_file             <path>
//		tls_server_name      <name>
//		insecure_skip_verify
//		sync_timeout         <duration>
//	}
func (o *ConsulOptions) unmarshalCaddyfile(d *caddyfile.Dispenser) error {
	args := d.RemainingArgs()
	switch len(args) {
	case 0:
	case 1:
		o.Address = args[0]
	default:
		return d.Errf("consul: want at most one address")
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		var err error
		c := &o.ConsulConfig
		switch d.Val() {
		case "address":
			err = oneString(d, &c.Address)
		case "scheme":
			if err = oneString(d, &c.Scheme); err == nil && c.Scheme != "http" && c.Scheme != "https" {
				return d.Errf("consul scheme: want http or https, got %q", c.Scheme)
			}
		case "token":
			err = oneString(d, &c.Token)
		case "token_file":
			err = oneString(d, &c.TokenFile)
		case "datacenter":
			err = oneString(d, &c.Datacenter)
		case "namespace":
			err = oneString(d, &c.Namespace)
		case "partition":
			err = oneString(d, &c.Partition)
		case "http_auth":
			err = oneString(d, &c.HTTPAuth)
		case "ca_file":
			err = oneString(d, &c.CAFile)
		case "ca_path":
			err = oneString(d, &c.CAPath)
		case "cert_file":
			err = oneString(d, &c.CertFile)
		case "key_file":
			err = oneString(d, &c.KeyFile)
		case "tls_server_name":
			err = oneString(d, &c.TLSServerName)
		case "insecure_skip_verify":
			if d.NextArg() {
				return d.ArgErr()
			}
			c.InsecureSkipVerify = true
		case "sync_timeout":
			err = oneDuration(d, d.Val(), &o.SyncTimeout)
		default:
			return d.Errf("unrecognized consul option %q", d.Val())
		}
		if err != nil {
			return err
		}
	}
	if (o.CertFile == "") != (o.KeyFile == "") {
		return fmt.Errorf("consul: cert_file and key_file go together")
	}
	return nil
}
