package tenancy

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// redisOptions parses the Redis settings into the options of a universal
// client: a single server (URL), a Sentinel deployment (a failover client
// that follows the primary the sentinels name) or a Cluster. nil options
// without Redis. key identifies the settings (secrets hashed) for the
// shared state.
func redisOptions(rc *Redis, failClosed bool) (*redis.UniversalOptions, string, error) {
	if rc == nil {
		return nil, "tenancy.local", nil
	}
	opts, err := redisTarget(rc)
	if err != nil {
		return nil, "", err
	}
	if rc.Username != "" {
		opts.Username = rc.Username
	}
	if rc.Password != "" {
		opts.Password = rc.Password
	}
	if rc.TLS && opts.TLSConfig == nil {
		opts.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	if rc.CAFile != "" {
		if opts.TLSConfig == nil {
			return nil, "", fmt.Errorf("redis: ca_file needs TLS (a rediss:// URL, or tls with sentinel or cluster)")
		}
		pem, err := os.ReadFile(rc.CAFile)
		if err != nil {
			return nil, "", fmt.Errorf("redis: ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, "", fmt.Errorf("redis: ca_file %s holds no PEM certificate", rc.CAFile)
		}
		opts.TLSConfig.RootCAs = pool
		opts.TLSConfig.MinVersion = tls.VersionTLS12
	}
	// Fail fast on the request path: one try, short deadlines; the limiter
	// falls back (or refuses) and finds Redis again by itself. A Cluster
	// client still follows MOVED and ASK (MaxRedirects, its default), as
	// it must when a replica has taken over a slot's primary.
	to := timeoutOf(rc)
	opts.MaxRetries = -1
	opts.DialTimeout = max(time.Second, 4*to)
	opts.ReadTimeout, opts.WriteTimeout, opts.PoolTimeout = to, to, to
	opts.ContextTimeoutEnabled = true
	opts.MinIdleConns = 2
	h := sha256.New()
	for _, v := range []string{strings.Join(opts.Addrs, ","), opts.MasterName, opts.SentinelUsername, opts.SentinelPassword,
		strconv.FormatBool(opts.IsClusterMode), opts.Username, opts.Password, strconv.Itoa(opts.DB), prefixOf(rc),
		to.String(), strconv.FormatBool(failClosed), strconv.FormatBool(opts.TLSConfig != nil), rc.CAFile} {
		h.Write([]byte(v))
		h.Write([]byte{0})
	}
	return opts, "tenancy.redis." + hex.EncodeToString(h.Sum(nil)[:8]), nil
}

// redisTarget is where the servers are: one of URL, Sentinel, Cluster.
func redisTarget(rc *Redis) (*redis.UniversalOptions, error) {
	set := 0
	for _, b := range []bool{rc.URL != "", rc.Sentinel != nil, len(rc.Cluster) > 0} {
		if b {
			set++
		}
	}
	if set != 1 {
		return nil, fmt.Errorf("redis: want exactly one of a URL, sentinel or cluster")
	}
	switch {
	case rc.Sentinel != nil:
		sn := rc.Sentinel
		if sn.Master == "" || len(sn.Addrs) == 0 {
			return nil, fmt.Errorf("redis: sentinel wants the primary's name and at least one sentinel address")
		}
		return &redis.UniversalOptions{MasterName: sn.Master, Addrs: sn.Addrs,
			SentinelUsername: sn.Username, SentinelPassword: sn.Password}, nil
	case len(rc.Cluster) > 0:
		return &redis.UniversalOptions{Addrs: rc.Cluster, IsClusterMode: true}, nil
	}
	o, err := redis.ParseURL(rc.URL)
	if err != nil {
		// The URL may hold a password: name the problem, not the URL.
		return nil, fmt.Errorf("redis: the URL does not parse (want redis://[user:password@]host:port[/db] or rediss://...)")
	}
	return &redis.UniversalOptions{Addrs: []string{o.Addr}, Username: o.Username, Password: o.Password,
		DB: o.DB, TLSConfig: o.TLSConfig, Protocol: o.Protocol, ClientName: o.ClientName}, nil
}

// prefixOf is the prefix of every key. On a Cluster it is a hash tag, so
// that every key llmedge writes lies in one slot: a limit decision's
// script touches the buckets of the user, the key, the team and the model
// at once, which Redis Cluster allows only within one slot. All of
// llmedge's state then lives on one primary (and its replicas) of the
// cluster: a few MB, a few thousand calls a second at most.
func prefixOf(rc *Redis) string {
	p := DefaultPrefix
	if rc != nil && rc.Prefix != "" {
		p = rc.Prefix
	}
	if rc == nil || len(rc.Cluster) == 0 || strings.Contains(p, "{") {
		return p
	}
	if base, ok := strings.CutSuffix(p, ":"); ok {
		return "{" + base + "}:"
	}
	return "{" + p + "}"
}
