package gateway

import (
	"testing"

	"github.com/llmedge/llmedge/backends/pool"
)

func TestRouteValue(t *testing.T) {
	tests := []struct {
		name string
		c    pool.Choice
		want string
	}{
		{"load", pool.Choice{Reason: pool.ReasonLoad, Cached: -1}, "policy=p; reason=load"},
		{"cached", pool.Choice{Reason: pool.ReasonPrefix, Cached: 0.5}, "policy=p; reason=prefix; cached=0.50"},
		{"slow replicas held back", pool.Choice{Reason: pool.ReasonLoad, Cached: -1, SlowAvoided: 2}, "policy=p; reason=load; slow_avoided=2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := routeValue("p", tt.c); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}
