package llmhandlers

import (
	"net/http/httptest"
	"testing"
)

func TestLocal(t *testing.T) {
	for _, tc := range []struct {
		remote, host string
		want         bool
	}{
		{"127.0.0.1:5000", "127.0.0.1:2020", true},
		{"127.0.0.1:5000", "localhost:2020", true},
		{"127.0.0.1:5000", "status.localhost", true},
		{"[::1]:5000", "[::1]:2020", true},
		{"127.0.0.1:5000", "LOCALHOST.", true},
		{"10.1.2.3:5000", "127.0.0.1:2020", false},     // another machine
		{"127.0.0.1:5000", "evil.example:2020", false}, // DNS rebinding
		{"127.0.0.1:5000", "10.0.0.1:2020", false},
		{"127.0.0.1:5000", "localhost.evil.example", false},
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr, r.Host = tc.remote, tc.host
		if got := local(r); got != tc.want {
			t.Errorf("from %s to %s: local = %v, want %v", tc.remote, tc.host, got, tc.want)
		}
	}
}
