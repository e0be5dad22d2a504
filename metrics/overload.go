package metrics

import "github.com/prometheus/client_golang/prometheus"

// overload holds the figures of the classes of work under overload.
type overload struct {
	shed *prometheus.CounterVec
	wait *prometheus.HistogramVec
}

// queueBuckets span a wait for a slot: from none to a long queue limit.
var queueBuckets = []float64{.001, .01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}

func newOverload(reg prometheus.Registerer, err *error) overload {
	o := overload{
		shed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "llmedge_shed_total", Help: "Requests refused at once (429) as sheddable work while their model was saturated, by model type and class.",
		}, []string{"model_type", "class"}),
		wait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "llmedge_queue_wait_seconds", Help: "Time requests waited for a replica slot (all attempts), by model type and class of work; requests that reached a model's queue.",
			Buckets: queueBuckets,
		}, []string{"model_type", "class"}),
	}
	o.shed = register(reg, o.shed, err)
	o.wait = register(reg, o.wait, err)
	return o
}

func (m *Metrics) observeOverload(r Request) {
	if !r.Routed || r.Class == "" {
		return
	}
	if r.Shed {
		m.overload.shed.WithLabelValues(r.ModelType, r.Class).Inc()
		return
	}
	m.overload.wait.WithLabelValues(r.ModelType, r.Class).Observe(r.Queue.Seconds())
}
