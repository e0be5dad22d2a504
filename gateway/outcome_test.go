package gateway

import (
	"errors"
	"testing"

	"github.com/llmedge/llmedge/backends/pool"
	"github.com/llmedge/llmedge/backends/protocols"
)

// What each attempt's end tells the replica's breaker: a replica that
// could not be reached is told apart, so that a probe passing after it
// readmits the replica (a restart).
func TestOutcome(t *testing.T) {
	kind := func(k protocols.Kind) error { return &protocols.Error{Kind: k} }
	for _, tt := range []struct {
		name       string
		err        error
		clientGone bool
		want       pool.Outcome
	}{
		{"answered", nil, false, pool.Success},
		{"client gone", kind(protocols.KindServer), true, pool.Excluded},
		{"the request refused", kind(protocols.KindBadRequest), false, pool.Success},
		{"overloaded", kind(protocols.KindOverloaded), false, pool.Excluded},
		{"unsupported", kind(protocols.KindUnsupported), false, pool.Excluded},
		{"connection refused", kind(protocols.KindConnect), false, pool.Unreachable},
		{"server error", kind(protocols.KindServer), false, pool.Failure},
		{"stream cut", kind(protocols.KindProtocol), false, pool.Failure},
		{"timeout", kind(protocols.KindTimeout), false, pool.Failure},
		{"other", errors.New("x"), false, pool.Failure},
	} {
		if got := outcome(tt.err, tt.clientGone); got != tt.want {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
}
