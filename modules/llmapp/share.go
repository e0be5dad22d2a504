package llmapp

import (
	"fmt"

	"github.com/llmedge/llmedge/gateway"
	"github.com/llmedge/llmedge/metrics"
	"github.com/llmedge/llmedge/routing/share"
	"github.com/llmedge/llmedge/status"
)

// shareRouting takes the hub that passes routing decisions between
// instances, when Redis is configured and share_routing is not off. It is
// kept across reloads with the same Redis settings, like the connection
// of the limits: the stream position and the counters carry on.
func (a *App) shareRouting() error {
	if a.ShareRouting != nil && !*a.ShareRouting {
		return nil
	}
	opts, prefix, key := a.tenants.SharedRedis()
	if opts == nil {
		return nil
	}
	k := "routing.share." + key
	v, _, err := kept.LoadOrNew(k, func() (any, error) {
		return share.New(share.Options{Redis: opts, Key: prefix + "routing", Logger: a.logger.Named("share")}), nil
	})
	if err != nil {
		return err
	}
	a.share, a.shareKey = v.(*share.Hub), k
	return nil
}

// Detail of the routing_share dependency while Redis is unreachable.
const shareDegraded = "unreachable: each instance routes on its own view until it answers"

// shareDependencies reports the sharing in /readyz: degraded (never down:
// each instance routes alone meanwhile) while Redis is unreachable.
func (a *App) shareDependencies() []gateway.Dependency {
	if a.share == nil {
		return nil
	}
	h := a.share
	return []gateway.Dependency{gateway.DependencyFunc{Dependency: "routing_share", Func: func() gateway.DependencyStatus {
		if h.Stats().Up {
			return gateway.DependencyStatus{Status: "up"}
		}
		return gateway.DependencyStatus{Status: "degraded", Detail: shareDegraded}
	}}}
}

// ShareStats implements metrics.ShareSource.
func (a *App) ShareStats() (bool, metrics.ShareStats) {
	if a.share == nil {
		return false, metrics.ShareStats{}
	}
	st := a.share.Stats()
	return true, metrics.ShareStats{Up: st.Up, Published: st.Published, Dropped: st.Dropped,
		Applied: st.Applied, Ignored: st.Ignored, Errors: st.Errors}
}

// routingShareStatus is the status page's line about the sharing; nil
// when it is off.
func (a *App) routingShareStatus() *status.RoutingShare {
	if a.share == nil {
		return nil
	}
	st := a.share.Stats()
	rs := &status.RoutingShare{Up: st.Up, Published: st.Published, Dropped: st.Dropped, Applied: st.Applied}
	if st.Up {
		rs.Line = fmt.Sprintf("shared with the other instances over Redis: %d decisions sent, %d of theirs applied, %d dropped", st.Published, st.Applied, st.Dropped)
	} else {
		rs.Line = "Redis " + shareDegraded + fmt.Sprintf(" (%d decisions dropped)", st.Dropped)
	}
	return rs
}
