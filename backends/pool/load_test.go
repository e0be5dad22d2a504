package pool

import (
	"testing"
	"time"
)

// Load counts the gateway's own requests as they are now, plus what the
// engine reported beyond the gateway's own requests when it was read.
func TestLoad(t *testing.T) {
	future, past := time.Now().Add(time.Hour), time.Now().Add(-time.Hour)
	for _, tc := range []struct {
		name        string
		outstanding int64
		weight      int
		engine      *EngineLoad
		want        float64
	}{
		{"no engine figure", 3, 0, nil, 3},
		{"others' requests add", 2, 0, &EngineLoad{Running: 4, Waiting: 6, Own: 2, Until: future}, 10},
		{"own requests since finished do not linger", 0, 0, &EngineLoad{Running: 1, Own: 1, Until: future}, 0},
		{"engine behind the gateway's count", 5, 0, &EngineLoad{Running: 2, Own: 5, Until: future}, 5},
		{"stale figure ignored", 1, 0, &EngineLoad{Running: 40, Until: past}, 1},
		{"per unit of weight", 4, 2, &EngineLoad{Waiting: 4, Until: future}, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, _ := NewReplica("http://a:1")
			r.Weight = tc.weight
			r.outstanding.Store(tc.outstanding)
			if tc.engine != nil {
				r.SetEngineLoad(*tc.engine)
			}
			if got := r.Load(); got != tc.want {
				t.Errorf("Load = %v, want %v", got, tc.want)
			}
		})
	}
}
