package metrics

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// ShareSource reports, at scrape time, the sharing of routing decisions
// between instances (it outlives configurations, so it is read rather
// than recorded).
type ShareSource interface {
	// ShareStats reports whether sharing is on, and its figures.
	ShareStats() (configured bool, st ShareStats)
}

// ShareStats are the sharing's figures since it started.
type ShareStats struct {
	Up                                   bool
	Published, Dropped, Applied, Ignored uint64
	Errors                               uint64
}

var (
	shareUpDesc     = prometheus.NewDesc("llmedge_routing_share_up", "1 when routing decisions are shared with the other instances (Redis answers), 0 while each instance routes on its own view.", nil, nil)
	shareDesc       = prometheus.NewDesc("llmedge_routing_share_insertions_total", "Prefix-index insertions shared between instances, by outcome: published (sent), dropped (buffer full or Redis unreachable), applied (another instance's, applied here), ignored (another instance's, for a model, replica or block size this instance does not have).", []string{"outcome"}, nil)
	shareErrorsDesc = prometheus.NewDesc("llmedge_routing_share_errors_total", "Failed Redis calls and malformed entries of the routing share.", nil, nil)
)

type shareCollector struct{ src ShareSource }

// RegisterShare adds the sharing's gauges to reg, read from src when
// scraped (nothing is reported while sharing is off).
func RegisterShare(reg prometheus.Registerer, src ShareSource) error {
	if err := reg.Register(&shareCollector{src: src}); err != nil {
		var are prometheus.AlreadyRegisteredError
		if !errors.As(err, &are) {
			return err
		}
	}
	return nil
}

func (c *shareCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- shareUpDesc
	ch <- shareDesc
	ch <- shareErrorsDesc
}

func (c *shareCollector) Collect(ch chan<- prometheus.Metric) {
	on, st := c.src.ShareStats()
	if !on {
		return
	}
	up := 0.0
	if st.Up {
		up = 1
	}
	ch <- prometheus.MustNewConstMetric(shareUpDesc, prometheus.GaugeValue, up)
	for _, o := range []struct {
		outcome string
		n       uint64
	}{{"published", st.Published}, {"dropped", st.Dropped}, {"applied", st.Applied}, {"ignored", st.Ignored}} {
		ch <- prometheus.MustNewConstMetric(shareDesc, prometheus.CounterValue, float64(o.n), o.outcome)
	}
	ch <- prometheus.MustNewConstMetric(shareErrorsDesc, prometheus.CounterValue, float64(st.Errors))
}
