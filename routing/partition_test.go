package routing

import (
	"testing"

	"github.com/llmedge/llmedge/backends/pool"
)

// A prompt matches only prompts of its own cache partition: another
// tenant guessing it sees nothing cached and is routed on load alone,
// while the tenant that sent it finds it where it went (its next turn goes
// back there, predicted cached). The model-wide partition (0) matches as
// one index did before partitions.
func TestPrefixCachePartitions(t *testing.T) {
	const alice, bob = 0xa11ce, 0xb0b
	victim := conversation(1, 1, 3)
	tests := []struct {
		name      string
		first     uint64
		second    uint64
		wantMatch bool
	}{
		{"another tenant's guess", alice, bob, false},
		{"the model-wide partition against a tenant's", alice, 0, false},
		{"the same tenant", alice, alice, true},
		{"model-wide sharing", 0, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, _, _ := newPrefixPool(t, 4)
			l, err := p.Acquire(&pool.Request{Model: "m", Messages: victim, Partition: tt.first}, nil)
			if err != nil {
				t.Fatal(err)
			}
			home := l.Replica
			l.Release(pool.Success)
			l, err = p.Acquire(&pool.Request{Model: "m", Messages: victim, Partition: tt.second}, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Release(pool.Success)
			switch {
			case tt.wantMatch && (l.Choice.Cached < 0.99 || l.Replica != home || l.Choice.Reason != pool.ReasonPrefix):
				t.Errorf("cached %.2f on %s (home %s), reason %s", l.Choice.Cached, l.Replica.URL, home.URL, l.Choice.Reason)
			case !tt.wantMatch && (l.Choice.Cached != 0 || l.Choice.Reason != pool.ReasonLoad):
				t.Errorf("another partition's prompt: cached %.2f, reason %s", l.Choice.Cached, l.Choice.Reason)
			}
		})
	}
}
