package llmapp

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/llmedge/llmedge/limits"
)

func TestTenancyCaddyfileErrors(t *testing.T) {
	tests := []struct {
		name, input, want string
	}{
		{"redis without URL", "llmedge {\nredis\n}", "want a URL"},
		{"redis http URL", "llmedge {\nredis http://x:6379\n}", "redis:// or rediss://"},
		{"redis unknown option", "llmedge {\nredis redis://x:6379 {\ndb 3\n}\n}", `unrecognized redis option "db"`},
		{"failure mode", "llmedge {\non_redis_failure maybe\n}", "want open or closed"},
		{"share_routing value", "llmedge {\nshare_routing yes\n}", "share_routing: want on or off"},
		{"share_routing without value", "llmedge {\nshare_routing\n}", "wrong argument count"},
		{"zero rpm", "llmedge {\nlimits {\nrpm 0\n}\n}", "want a whole number ≥ 1 or off"},
		{"negative tpm", "llmedge {\nlimits {\ntpm -5\n}\n}", "want a whole number ≥ 1 or off"},
		{"unknown limit", "llmedge {\nlimits {\nrph 5\n}\n}", `unrecognized option "rph"`},
		{"limits with args", "llmedge {\nlimits 5\n}", "want a block"},
		{"limits twice", "llmedge {\nlimits {\nrpm 1\n}\nlimits {\nrpm 2\n}\n}", "given twice"},
		{"user block option", "llmedge {\nuser a $2a$10$x qwen {\nquota 5\n}\n}", `unrecognized option "quota" for user "a"`},
		{"model limits", "llmedge {\nmodel qwen {\nlimits {\nconcurrency none\n}\n}\n}", "concurrency: want a whole number"},
		{"queue order", "llmedge {\nmodel qwen {\nqueue {\norder lifo\n}\n}\n}", "want fair or fifo"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := new(App).UnmarshalCaddyfile(caddyfile.NewTestDispenser(tt.input))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want one containing %q", err, tt.want)
			}
		})
	}
}

func TestTenancyCaddyfile(t *testing.T) {
	a := new(App)
	err := a.UnmarshalCaddyfile(caddyfile.NewTestDispenser(`llmedge {
		limits {
			rpm 60
			concurrency off
			api_key {
				tpm 5000
			}
		}
		user bob $2a$10$x {
			limits {
				rpm 5
			}
		}
		user carol $2a$10$x qwen
	}`))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a.RateLimits.Limit, limits.Limit{RPM: 60, Concurrency: limits.Off}) || !reflect.DeepEqual(*a.RateLimits.APIKey, limits.Limit{TPM: 5000}) {
		t.Errorf("limits %+v api_key %+v", a.RateLimits.Limit, a.RateLimits.APIKey)
	}
	if len(a.Users) != 2 || a.Users[0].Limits == nil || a.Users[0].Limits.RPM != 5 || a.Users[1].Limits != nil ||
		!slices.Equal(a.Users[1].Models, []string{"qwen"}) {
		t.Errorf("users %+v", a.Users)
	}
}
