package metrics

import (
	"errors"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// Kept keeps the event metrics (counters, histograms, gauges set as
// things happen) across registries: Caddy makes a registry for each
// configuration it loads, so without it a reload would start every
// llmedge_* counter again at zero, and a rate over the reload would read
// as a reset. Collectors read at scrape time from a configuration's state
// (replicas, breakers, Redis) are not kept: each configuration registers
// its own, reading its own state.
type Kept struct {
	mu     sync.Mutex
	byDesc map[string]prometheus.Collector
}

// NewKept returns an empty keeper.
func NewKept() *Kept { return &Kept{byDesc: map[string]prometheus.Collector{}} }

// In returns a Registerer of reg that, asked to register an event metric
// already kept under the same descriptions, registers the kept one in reg
// instead and answers AlreadyRegisteredError naming it, which New and the
// others adopt.
func (k *Kept) In(reg prometheus.Registerer) prometheus.Registerer {
	return keptRegisterer{k: k, reg: reg}
}

type keptRegisterer struct {
	k   *Kept
	reg prometheus.Registerer
}

func (r keptRegisterer) Register(c prometheus.Collector) error {
	if !eventMetric(c) {
		return r.reg.Register(c)
	}
	key := descKey(c)
	r.k.mu.Lock()
	prev, ok := r.k.byDesc[key]
	if !ok {
		r.k.byDesc[key] = c
	}
	r.k.mu.Unlock()
	if !ok || prev == c {
		return r.reg.Register(c)
	}
	if err := r.reg.Register(prev); err != nil {
		var are prometheus.AlreadyRegisteredError
		if !errors.As(err, &are) {
			return err
		}
	}
	return prometheus.AlreadyRegisteredError{ExistingCollector: prev, NewCollector: c}
}

func (r keptRegisterer) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			var are prometheus.AlreadyRegisteredError
			if !errors.As(err, &are) {
				panic(err)
			}
		}
	}
}

func (r keptRegisterer) Unregister(c prometheus.Collector) bool { return r.reg.Unregister(c) }

// eventMetric reports whether c is one of Prometheus's own metrics, whose
// values are set as things happen (rather than read at scrape time).
func eventMetric(c prometheus.Collector) bool {
	switch c.(type) {
	case *prometheus.CounterVec, *prometheus.GaugeVec, *prometheus.HistogramVec, *prometheus.SummaryVec,
		prometheus.Counter, prometheus.Gauge, prometheus.Histogram, prometheus.Summary:
		return true
	}
	return false
}

// descKey is c's descriptions, which name the metric, its help and labels.
func descKey(c prometheus.Collector) string {
	ch := make(chan *prometheus.Desc, 4)
	go func() { c.Describe(ch); close(ch) }()
	var b strings.Builder
	for d := range ch {
		b.WriteString(d.String())
		b.WriteByte('\n')
	}
	return b.String()
}
