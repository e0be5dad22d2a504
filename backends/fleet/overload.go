package fleet

import (
	"github.com/llmedge/llmedge/backends/pool"
	"github.com/llmedge/llmedge/status"
)

// overloadStatus is the pool's state under overload, for the status page,
// with the batch lines running on it.
func overloadStatus(p *pool.Pool, batchRunning int) *status.Overload {
	if p == nil {
		return nil
	}
	q := p.WaitingByClass()
	o := &status.Overload{
		Queued:    status.QueuedByClass{Critical: q[0], Standard: q[1], Sheddable: q[2]},
		Saturated: p.Saturated(), Sheds: p.Sheds(), Reserve: p.Reserve(),
		QueueLimitSeconds: p.QueueTimeout().Seconds(),
		BatchRunning:      batchRunning,
	}
	if s := p.Spare(); s.Slots > 0 {
		share := float64(batchRunning) / float64(s.Slots)
		o.BatchShare = &share
	}
	return o
}
