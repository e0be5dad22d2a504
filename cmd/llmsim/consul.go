package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/llmedge/llmedge/discovery"
)

// consulFlags are the -consul-* flags: with -consul-service set, llmsim
// registers itself with the Consul agent (HTTP check on /health) once it
// listens, and deregisters when a signal stops it.
type consulFlags struct {
	addr, token, service, id, address string
	tags, meta                        string
	interval, deregisterAfter         time.Duration
}

// consulOpts holds the -consul-* flags of the last parseFlags call.
var consulOpts consulFlags

func (c *consulFlags) register(fs *flag.FlagSet) {
	*c = consulFlags{}
	fs.StringVar(&c.addr, "consul-addr", "", "Consul agent address (default $CONSUL_HTTP_ADDR, else 127.0.0.1:8500)")
	fs.StringVar(&c.token, "consul-token", "", "Consul ACL token (default $CONSUL_HTTP_TOKEN)")
	fs.StringVar(&c.service, "consul-service", "", "register in Consul as this service (off when empty)")
	fs.StringVar(&c.id, "consul-id", "", "Consul service ID (default <service>-<host>-<port>)")
	fs.StringVar(&c.address, "consul-advertise", "", "address registered in Consul (default the listen host; the node's address when it is 0.0.0.0)")
	fs.StringVar(&c.tags, "consul-tags", "", "comma-separated Consul tags")
	fs.StringVar(&c.meta, "consul-meta", "", "comma-separated Consul Meta k=v pairs (protocol, model, weight, max_concurrency, scheme)")
	fs.DurationVar(&c.interval, "consul-check-interval", 10*time.Second, "interval of the HTTP check on /health")
	fs.DurationVar(&c.deregisterAfter, "consul-deregister-after", discovery.MinDeregisterAfter, "Consul removes the instance after its check stayed critical this long (min 1m)")
}

// registration builds the Registration for a server listening on addr.
func (c *consulFlags) registration(addr net.Addr) (discovery.Registration, error) {
	host, port, err := discovery.HostPort(addr)
	if err != nil {
		return discovery.Registration{}, err
	}
	if c.address != "" {
		host = c.address
	}
	checkHost := host
	if checkHost == "" {
		checkHost = "127.0.0.1" // the agent runs on this machine
	}
	r := discovery.Registration{
		Service:         c.service,
		ID:              c.id,
		Address:         host,
		Port:            port,
		CheckURL:        "http://" + net.JoinHostPort(checkHost, fmt.Sprint(port)) + "/health",
		CheckInterval:   c.interval,
		DeregisterAfter: c.deregisterAfter,
	}
	for _, t := range strings.Split(c.tags, ",") {
		if t = strings.TrimSpace(t); t != "" {
			r.Tags = append(r.Tags, t)
		}
	}
	if c.meta != "" {
		r.Meta = map[string]string{}
		for _, kv := range strings.Split(c.meta, ",") {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || strings.TrimSpace(k) == "" {
				return r, fmt.Errorf("-consul-meta: want k=v pairs, got %q", kv)
			}
			r.Meta[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	return r, nil
}

// start registers the simulator when -consul-service is set, and returns
// the function to call at shutdown (a no-op otherwise).
func (c *consulFlags) start(addr net.Addr, logger *log.Logger) (deregister func(), err error) {
	if c.service == "" {
		return func() {}, nil
	}
	r, err := c.registration(addr)
	if err != nil {
		return nil, err
	}
	cfg := discovery.ConsulConfig{Address: c.addr, Token: c.token}
	if u, err := url.Parse(c.addr); err == nil && u.Scheme == "https" {
		cfg.Scheme = "https"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	dereg, err := discovery.Register(ctx, cfg, r)
	if err != nil {
		return nil, err
	}
	logger.Printf("registered in consul as service %q id %q", r.Service, r.ServiceID())
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := dereg(ctx); err != nil {
			logger.Print(err)
			return
		}
		logger.Printf("deregistered %q from consul", r.ServiceID())
	}, nil
}
