package fleet

import (
	"testing"

	"github.com/llmedge/llmedge/backends/pool"
	"github.com/llmedge/llmedge/routing"
)

// TestOverloadStatusBatch: the status page gets the batch lines running
// and their share of the usable replicas' slots; no share without caps.
func TestOverloadStatusBatch(t *testing.T) {
	for _, tt := range []struct {
		name      string
		caps      []int
		running   int
		wantShare float64 // -1: none
	}{
		{name: "capped", caps: []int{4, 4}, running: 2, wantShare: 0.25},
		{name: "idle", caps: []int{4}, running: 0, wantShare: 0},
		{name: "uncapped", caps: []int{0}, running: 3, wantShare: -1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := pool.NewWithOptions(t.Name(), &routing.RoundRobin{}, pool.Options{})
			defer p.Close()
			var rs []*pool.Replica
			for i, c := range tt.caps {
				r, err := pool.NewReplica("http://r" + string(rune('a'+i)) + ":1")
				if err != nil {
					t.Fatal(err)
				}
				r.MaxConcurrency = c
				rs = append(rs, r)
			}
			p.Set(rs)
			o := overloadStatus(p, tt.running)
			if o.BatchRunning != tt.running {
				t.Errorf("BatchRunning = %d, want %d", o.BatchRunning, tt.running)
			}
			switch {
			case tt.wantShare < 0 && o.BatchShare != nil:
				t.Errorf("BatchShare = %v, want none", *o.BatchShare)
			case tt.wantShare >= 0 && (o.BatchShare == nil || *o.BatchShare != tt.wantShare):
				t.Errorf("BatchShare = %v, want %v", o.BatchShare, tt.wantShare)
			}
		})
	}
}
