package discovery

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/hashicorp/consul/api"
)

// Registration is a service instance to register with the local Consul
// agent, with an HTTP check on its health endpoint.
type Registration struct {
	// Service is the Consul service name (required).
	Service string
	// ID is the instance ID; default "<service>-<address>-<port>".
	ID string
	// Address is the address others reach the instance at; empty lets
	// Consul use the node's address.
	Address string
	// Port is the instance's port (required).
	Port int
	Tags []string
	// Meta carries overrides such as protocol, model, weight,
	// max_concurrency and scheme.
	Meta map[string]string
	// CheckURL is polled by the agent (required): 2xx is passing, 429
	// warning, anything else critical.
	CheckURL string
	// CheckInterval is how often the agent polls; default 10s.
	CheckInterval time.Duration
	// CheckTimeout bounds one poll; default min(interval, 5s).
	CheckTimeout time.Duration
	// DeregisterAfter removes an instance that stayed critical that long;
	// default and minimum 1m (Consul's minimum).
	DeregisterAfter time.Duration
	// InitialCritical makes the instance start critical until its first
	// check passes; by default it starts passing (register only once the
	// server answers).
	InitialCritical bool
}

// MinDeregisterAfter is Consul's minimum for DeregisterCriticalServiceAfter.
const MinDeregisterAfter = time.Minute

// ServiceID is the default instance ID.
func (r Registration) ServiceID() string {
	if r.ID != "" {
		return r.ID
	}
	host := r.Address
	if host == "" {
		host = "node"
	}
	return r.Service + "-" + host + "-" + strconv.Itoa(r.Port)
}

func (r Registration) agentRegistration() (*api.AgentServiceRegistration, error) {
	if r.Service == "" || r.Port <= 0 || r.CheckURL == "" {
		return nil, errors.New("consul registration: service, port and check URL are required")
	}
	interval := r.CheckInterval
	if interval <= 0 {
		interval = 10 * time.Second
	}
	timeout := r.CheckTimeout
	if timeout <= 0 {
		timeout = min(interval, 5*time.Second)
	}
	dereg := max(r.DeregisterAfter, MinDeregisterAfter)
	status := api.HealthPassing
	if r.InitialCritical {
		status = api.HealthCritical
	}
	return &api.AgentServiceRegistration{
		ID:      r.ServiceID(),
		Name:    r.Service,
		Tags:    r.Tags,
		Address: r.Address,
		Port:    r.Port,
		Meta:    r.Meta,
		Check: &api.AgentServiceCheck{
			Name:                           "HTTP " + r.CheckURL,
			HTTP:                           r.CheckURL,
			Method:                         "GET",
			Interval:                       interval.String(),
			Timeout:                        timeout.String(),
			DeregisterCriticalServiceAfter: dereg.String(),
			Status:                         status,
		},
	}, nil
}

// Register registers r with the agent c points at (the call is bounded by
// ctx) and returns the function that deregisters it.
func Register(ctx context.Context, c ConsulConfig, r Registration) (deregister func(context.Context) error, err error) {
	reg, err := r.agentRegistration()
	if err != nil {
		return nil, err
	}
	client, transport, err := NewClient(c)
	if err != nil {
		return nil, err
	}
	opts := api.ServiceRegisterOpts{ReplaceExistingChecks: true}.WithContext(ctx)
	if err := client.Agent().ServiceRegisterOpts(reg, opts); err != nil {
		transport.CloseIdleConnections()
		return nil, fmt.Errorf("registering %s in consul: %w", reg.ID, err)
	}
	return func(ctx context.Context) error {
		defer transport.CloseIdleConnections()
		if err := client.Agent().ServiceDeregisterOpts(reg.ID, (&api.QueryOptions{}).WithContext(ctx)); err != nil {
			return fmt.Errorf("deregistering %s from consul: %w", reg.ID, err)
		}
		return nil
	}, nil
}

// HostPort splits a listener address for a Registration: an unspecified
// host (0.0.0.0, ::) becomes "", letting Consul use the node's address.
func HostPort(addr net.Addr) (string, int, error) {
	host, portStr, err := net.SplitHostPort(addr.String())
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return "", 0, err
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = ""
	}
	return host, port, nil
}
