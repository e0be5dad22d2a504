package tenancy

import (
	"slices"
	"strings"
	"testing"
)

func TestRedisDeployments(t *testing.T) {
	tests := []struct {
		name       string
		rc         Redis
		addrs      []string
		master     string
		cluster    bool
		prefix     string
		wantErr    string
		sentinelPw string
	}{
		{name: "url", rc: Redis{URL: "redis://:pw@h:6379/2"}, addrs: []string{"h:6379"}, prefix: "llmedge:"},
		{name: "sentinel", rc: Redis{Sentinel: &Sentinel{Master: "m", Addrs: []string{"s1:26379", "s2:26379"}, Password: "sp"}},
			addrs: []string{"s1:26379", "s2:26379"}, master: "m", prefix: "llmedge:", sentinelPw: "sp"},
		{name: "cluster: the prefix is a hash tag", rc: Redis{Cluster: []string{"a:1", "b:2"}}, addrs: []string{"a:1", "b:2"}, cluster: true, prefix: "{llmedge}:"},
		{name: "cluster of one seed", rc: Redis{Cluster: []string{"a:1"}}, addrs: []string{"a:1"}, cluster: true, prefix: "{llmedge}:"},
		{name: "cluster: a prefix without colon", rc: Redis{Cluster: []string{"a:1"}, Prefix: "gw"}, addrs: []string{"a:1"}, cluster: true, prefix: "{gw}"},
		{name: "cluster: the operator's own tag", rc: Redis{Cluster: []string{"a:1"}, Prefix: "{x}gw:"}, addrs: []string{"a:1"}, cluster: true, prefix: "{x}gw:"},
		{name: "url and cluster", rc: Redis{URL: "redis://h:1", Cluster: []string{"a:1"}}, wantErr: "exactly one"},
		{name: "nothing", rc: Redis{}, wantErr: "exactly one"},
		{name: "sentinel without master", rc: Redis{Sentinel: &Sentinel{Addrs: []string{"s:1"}}}, wantErr: "primary's name"},
		{name: "ca_file without tls", rc: Redis{Cluster: []string{"a:1"}, CAFile: "/x"}, wantErr: "needs TLS"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, key, err := redisOptions(&tt.rc, false)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(o.Addrs, tt.addrs) || o.MasterName != tt.master || o.IsClusterMode != tt.cluster ||
				o.SentinelPassword != tt.sentinelPw || o.MaxRetries != -1 || !strings.HasPrefix(key, "tenancy.redis.") {
				t.Errorf("options %+v key %s", o, key)
			}
			if p := prefixOf(&tt.rc); p != tt.prefix {
				t.Errorf("prefix %q, want %q", p, tt.prefix)
			}
		})
	}
	// The key differs between deployments, so that a reload to another
	// one makes a new client.
	_, k1, _ := redisOptions(&Redis{Cluster: []string{"a:1"}}, false)
	_, k2, _ := redisOptions(&Redis{Sentinel: &Sentinel{Master: "m", Addrs: []string{"a:1"}}}, false)
	if k1 == k2 {
		t.Error("cluster and sentinel on the same address share a key")
	}
}
