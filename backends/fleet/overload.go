package fleet

import (
	"github.com/llmedge/llmedge/backends/pool"
	"github.com/llmedge/llmedge/status"
)

// overloadStatus is the pool's state under overload, for the status page.
func overloadStatus(p *pool.Pool) *status.Overload {
	if p == nil {
		return nil
	}
	q := p.WaitingByClass()
	return &status.Overload{
		Queued:    status.QueuedByClass{Critical: q[0], Standard: q[1], Sheddable: q[2]},
		Saturated: p.Saturated(), Sheds: p.Sheds(), Reserve: p.Reserve(),
		QueueLimitSeconds: p.QueueTimeout().Seconds(),
	}
}
