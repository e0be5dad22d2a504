package redistest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// MasterName is the name the sentinels of StartSentinel know the primary by.
const MasterName = "llmedge"

// Sentinel is a Redis Sentinel deployment: a primary, a replica of it and
// three sentinels watching them, each a redis-server process on a free
// loopback port, killed when the test ends.
type Sentinel struct {
	Primary, Replica *Server
	Sentinels        []*Server
}

// StartSentinel starts a primary, its replica and three sentinels (quorum
// 2) that declare the primary down after downAfter without an answer and
// then promote the replica.
func StartSentinel(t testing.TB, downAfter time.Duration) *Sentinel {
	t.Helper()
	bin := Binary(t)
	d := &Sentinel{Primary: Start(t)}
	_, pport, _ := strings.Cut(d.Primary.Addr, ":")
	d.Replica = startServer(t, &Server{bin: bin, args: func(port string) []string {
		return []string{"--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
			"--protected-mode", "no", "--daemonize", "no", "--loglevel", "warning", "--replicaof", "127.0.0.1", pport}
	}})
	waitReplicating(t, d.Replica)
	dir := t.TempDir()
	for i := range 3 {
		conf := filepath.Join(dir, fmt.Sprintf("sentinel-%d.conf", i))
		d.Sentinels = append(d.Sentinels, startServer(t, &Server{bin: bin, args: func(port string) []string {
			// A sentinel rewrites its file: a fresh one per start.
			body := fmt.Sprintf("port %s\nbind 127.0.0.1\nprotected-mode no\ndaemonize no\nloglevel warning\n"+
				"sentinel monitor %s 127.0.0.1 %s 2\nsentinel down-after-milliseconds %s %d\n"+
				"sentinel failover-timeout %s 10000\nsentinel parallel-syncs %s 1\n",
				port, MasterName, pport, MasterName, downAfter.Milliseconds(), MasterName, MasterName)
			_ = os.WriteFile(conf, []byte(body), 0o600)
			return []string{conf, "--sentinel"}
		}}))
	}
	return d
}

// Addrs are the sentinels' addresses.
func (d *Sentinel) Addrs() []string {
	var a []string
	for _, s := range d.Sentinels {
		a = append(a, s.Addr)
	}
	return a
}

// PrimaryAddr asks the first sentinel that answers which address is the
// primary now.
func (d *Sentinel) PrimaryAddr(ctx context.Context) (string, error) {
	var last error
	for _, s := range d.Sentinels {
		c := redis.NewSentinelClient(&redis.Options{Addr: s.Addr, MaxRetries: -1})
		a, err := c.GetMasterAddrByName(ctx, MasterName).Result()
		_ = c.Close()
		if err == nil && len(a) == 2 {
			return a[0] + ":" + a[1], nil
		}
		last = err
	}
	return "", fmt.Errorf("redistest: no sentinel names the primary: %v", last)
}

// WaitPromoted waits until the sentinels name the replica as the primary.
func (d *Sentinel) WaitPromoted(t testing.TB, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for time.Since(start) < within {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		a, _ := d.PrimaryAddr(ctx)
		cancel()
		if a == d.Replica.Addr {
			return time.Since(start)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("redistest: the sentinels did not promote the replica within %v", within)
	return 0
}

// waitReplicating waits until the replica has synchronised with its
// primary (master_link_status:up), so that what the primary holds next
// reaches it.
func waitReplicating(t testing.TB, r *Server) {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: r.Addr, MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		info, _ := c.Info(context.Background(), "replication").Result()
		if strings.Contains(info, "master_link_status:up") {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("redistest: the replica did not synchronise with its primary")
}

// Cluster is a Redis Cluster of three primaries (no replicas), each a
// redis-server process on a free loopback port.
type Cluster struct {
	Nodes []*Server
}

// StartCluster starts three cluster-enabled servers and joins them into
// one cluster (with redis-cli --cluster create, or CLUSTER MEET and
// ADDSLOTSRANGE when redis-cli is missing), waiting for cluster_state:ok.
func StartCluster(t testing.TB) *Cluster {
	t.Helper()
	bin := Binary(t)
	dir := t.TempDir()
	c := &Cluster{}
	for range 3 {
		c.Nodes = append(c.Nodes, startServer(t, &Server{bin: bin, args: func(port string) []string {
			return []string{"--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
				"--protected-mode", "no", "--daemonize", "no", "--loglevel", "warning", "--dir", dir,
				"--cluster-enabled", "yes", "--cluster-config-file", "nodes-" + port + ".conf", "--cluster-node-timeout", "2000"}
		}}))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if cli, err := exec.LookPath("redis-cli"); err == nil {
		args := []string{"--cluster", "create"}
		args = append(args, c.Addrs()...)
		args = append(args, "--cluster-replicas", "0", "--cluster-yes")
		if out, err := exec.CommandContext(ctx, cli, args...).CombinedOutput(); err != nil {
			t.Fatalf("redistest: redis-cli --cluster create: %v: %s", err, out)
		}
	} else {
		c.join(t, ctx)
	}
	for _, n := range c.Nodes {
		rc := redis.NewClient(&redis.Options{Addr: n.Addr, MaxRetries: -1})
		for {
			info, _ := rc.ClusterInfo(ctx).Result()
			if strings.Contains(info, "cluster_state:ok") {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("redistest: the cluster is not ok: %s", info)
			}
			time.Sleep(50 * time.Millisecond)
		}
		_ = rc.Close()
	}
	return c
}

// join makes the cluster without redis-cli: each node a third of the
// slots, the first meets the others.
func (c *Cluster) join(t testing.TB, ctx context.Context) {
	t.Helper()
	const slots = 16384
	for i, n := range c.Nodes {
		rc := redis.NewClient(&redis.Options{Addr: n.Addr, MaxRetries: -1})
		lo, hi := i*slots/len(c.Nodes), (i+1)*slots/len(c.Nodes)-1
		if err := rc.ClusterAddSlotsRange(ctx, lo, hi).Err(); err != nil {
			t.Fatalf("redistest: CLUSTER ADDSLOTSRANGE: %v", err)
		}
		if i > 0 {
			host, port, _ := strings.Cut(n.Addr, ":")
			first := redis.NewClient(&redis.Options{Addr: c.Nodes[0].Addr, MaxRetries: -1})
			err := first.ClusterMeet(ctx, host, port).Err()
			_ = first.Close()
			if err != nil {
				t.Fatalf("redistest: CLUSTER MEET: %v", err)
			}
		}
		_ = rc.Close()
	}
}

// Addrs are the nodes' addresses.
func (c *Cluster) Addrs() []string {
	var a []string
	for _, s := range c.Nodes {
		a = append(a, s.Addr)
	}
	return a
}
