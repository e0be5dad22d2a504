package llmapp

import (
	"slices"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/llmedge/llmedge/boundary/partition"
	"github.com/llmedge/llmedge/gateway"
)

func TestBoundaryCaddyfile(t *testing.T) {
	tests := []struct {
		name    string
		model   string
		sharing partition.Sharing
		salt    gateway.CacheSalt
		allow   []string
		wantErr string
	}{
		{name: "defaults"},
		{name: "team", model: "cache_sharing team", sharing: partition.Team},
		{name: "model-wide, salted everywhere", model: "cache_sharing model\ncache_salt on", sharing: partition.Model, salt: gateway.CacheSaltOn},
		{name: "salt off", model: "cache_salt off", salt: gateway.CacheSaltOff},
		{name: "allow two, on two lines", model: "allow_members kv_transfer_params\nallow_members priority", allow: []string{"kv_transfer_params", "priority"}},
		{name: "sharing unknown", model: "cache_sharing tenant", wantErr: "want principal, team or model"},
		{name: "sharing without value", model: "cache_sharing", wantErr: "cache_sharing"},
		{name: "salt maybe", model: "cache_salt maybe", wantErr: "want auto, on or off"},
		{name: "allow nothing", model: "allow_members", wantErr: "want at least one member"},
		{name: "allow a plain member", model: "allow_members temperature", wantErr: `"temperature" is not an engine-control member`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := new(App)
			err := a.UnmarshalCaddyfile(caddyfile.NewTestDispenser("llmedge {\nmodel qwen {\nstatic http://127.0.0.1:1\n" + tt.model + "\n}\n}"))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var m gateway.Model
			if err := a.Models[0].applyBoundary(&m); err != nil {
				t.Fatal(err)
			}
			if m.CacheSharing != tt.sharing || m.CacheSalt != tt.salt || !slices.Equal(m.Members.Allowed(), tt.allow) {
				t.Errorf("sharing %v salt %v allowed %v, want %v %v %v", m.CacheSharing, m.CacheSalt, m.Members.Allowed(), tt.sharing, tt.salt, tt.allow)
			}
		})
	}
}

func TestCacheSecretCaddyfile(t *testing.T) {
	a := new(App)
	if err := a.UnmarshalCaddyfile(caddyfile.NewTestDispenser("llmedge {\ncache_secret s3cret\ncache_secret_file /run/secret\n}")); err != nil {
		t.Fatal(err)
	}
	if a.CacheSecret != "s3cret" || a.CacheSecretFile != "/run/secret" {
		t.Errorf("%q %q", a.CacheSecret, a.CacheSecretFile)
	}
}
