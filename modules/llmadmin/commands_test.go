package llmadmin

import (
	"errors"
	"testing"
)

func TestPlainAdminError(t *testing.T) {
	tests := []struct{ in, want string }{
		{`caddy responded with error: HTTP 400: {"error":"no user \"x\""}` + "\n", `caddy responded with error: HTTP 400: no user "x"`},
		{"performing request: connection refused", "performing request: connection refused"},
		{`HTTP 500: {not json`, `HTTP 500: {not json`},
	}
	for _, tt := range tests {
		if got := plainAdminError(errors.New(tt.in)).Error(); got != tt.want {
			t.Errorf("plainAdminError(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
