package metrics

import "github.com/prometheus/client_golang/prometheus"

// AdapterSource is a Source that also knows the LoRA adapters each
// replica holds.
type AdapterSource interface {
	ReplicaAdapters() []ReplicaAdapters
}

// ReplicaAdapters is what one replica holds of its model's adapters.
type ReplicaAdapters struct {
	Model, Replica string
	// Loaded and Running count the adapters it has and those its
	// requests use now.
	Loaded, Running int
}

var adaptersDesc = prometheus.NewDesc("llmedge_replica_adapters", "LoRA adapters a replica holds, by state: loaded (listed by its engine, or loaded by the gateway) and running (used by its requests now).", []string{"model_type", "replica", "state"}, nil)

// AdapterLoad counts a load of adapter the gateway asked a replica of
// model for; adapter is a label the caller bounded (the adapters
// configured or held, one word for the rest). A nil *Metrics records
// nothing.
func (m *Metrics) AdapterLoad(model, adapter string, ok bool) {
	if m == nil {
		return
	}
	outcome := "loaded"
	if !ok {
		outcome = "failed"
	}
	m.adapterLoads.WithLabelValues(model, adapter, outcome).Inc()
}

func collectAdapters(src Source, ch chan<- prometheus.Metric) {
	as, ok := src.(AdapterSource)
	if !ok {
		return
	}
	for _, r := range as.ReplicaAdapters() {
		ch <- prometheus.MustNewConstMetric(adaptersDesc, prometheus.GaugeValue, float64(r.Loaded), r.Model, r.Replica, "loaded")
		ch <- prometheus.MustNewConstMetric(adaptersDesc, prometheus.GaugeValue, float64(r.Running), r.Model, r.Replica, "running")
	}
}

// AdapterUnloaded drops adapter's series of model: it is no longer held
// by a replica and not configured, so that the names that come and go
// do not pile up series.
func (m *Metrics) AdapterUnloaded(model, adapter string) {
	if m == nil {
		return
	}
	l := prometheus.Labels{"model_type": model, "adapter": adapter}
	m.adapterReqs.DeletePartialMatch(l)
	m.adapterLoads.DeletePartialMatch(l)
}
