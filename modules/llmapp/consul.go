package llmapp

import (
	"errors"
	"fmt"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/llmedge/llmedge/discovery"
)

// ConsulOptions is the `consul` option of the llmedge app: how to reach
// Consul (empty fields take the CONSUL_* environment variables, then
// Consul's defaults), shared by every model with a consul_service and by
// the `consul` dynamic upstream source. The Consul watchers themselves are
// shared across config reloads by package llmsource.
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
