package redistest

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestStartCluster: both ways of joining the nodes (redis-cli, and the
// commands when it is missing) make a cluster a client writes through to
// every slot.
func TestStartCluster(t *testing.T) {
	for _, tt := range []struct {
		name string
		path string
	}{{"redis-cli", ""}, {"commands", t.TempDir()}} {
		t.Run(tt.name, func(t *testing.T) {
			if tt.path != "" {
				t.Setenv("PATH", tt.path) // no redis-cli
			}
			c := StartCluster(t)
			cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs()})
			defer cc.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			for _, k := range []string{"a", "b", "c", "d", "e", "f"} { // spread over the nodes
				if err := cc.Set(ctx, k, k, 0).Err(); err != nil {
					t.Fatalf("SET %s: %v", k, err)
				}
			}
			var n atomic.Int32 // ForEachMaster calls on a goroutine per node
			_ = cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
				if k, _ := m.DBSize(ctx).Result(); k > 0 {
					n.Add(1)
				}
				return nil
			})
			if n.Load() < 2 {
				t.Errorf("the keys lie on %d of 3 primaries", n.Load())
			}
		})
	}
}

// TestStartSentinel: the sentinels name the primary, and the replica once
// the primary is killed.
func TestStartSentinel(t *testing.T) {
	d := StartSentinel(t, time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if a, err := d.PrimaryAddr(ctx); err != nil || a != d.Primary.Addr {
		t.Fatalf("primary %q %v, want %s", a, err, d.Primary.Addr)
	}
	d.Primary.Kill()
	t.Logf("promoted after %v", d.WaitPromoted(t, 30*time.Second))
}
