package llmapp

import (
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

func TestCredentialOptions(t *testing.T) {
	tests := []struct {
		name, body string
		check      func(*App) bool
		err        string
	}{
		{"defaults", "", func(a *App) bool { return a.APIKeyTTL == 0 && a.APIKeysRefresh == 0 && a.RefreshTokenTTL == 0 }, ""},
		{"all set", "api_key_ttl 30d\napi_keys_refresh 2s\nrefresh_token_ttl 168h", func(a *App) bool {
			return time.Duration(a.APIKeyTTL) == 30*24*time.Hour && time.Duration(a.APIKeysRefresh) == 2*time.Second &&
				time.Duration(a.RefreshTokenTTL) == 168*time.Hour
		}, ""},
		{"refresh off", "refresh_token_ttl off", func(a *App) bool { return a.RefreshTokenTTL < 0 }, ""},
		{"refresh zero", "refresh_token_ttl 0s", nil, "want a positive duration or off"},
		{"refresh garbage", "refresh_token_ttl soon", nil, "want a positive duration or off"},
		{"refresh no value", "refresh_token_ttl", nil, "wrong argument count"},
		{"api key ttl negative", "api_key_ttl -1h", nil, "want a positive duration"},
		{"api keys refresh two values", "api_keys_refresh 1s 2s", nil, "wrong argument count"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := new(App)
			err := a.UnmarshalCaddyfile(caddyfile.NewTestDispenser("llmedge {\n" + tt.body + "\n}"))
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil || !tt.check(a) {
				t.Fatalf("%+v %v", a, err)
			}
		})
	}
}
