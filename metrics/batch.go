package metrics

import "github.com/prometheus/client_golang/prometheus"

// Outcomes of a batch's line, for BatchLine.
const (
	// BatchCompleted: the line has its answer, 2xx.
	BatchCompleted = "completed"
	// BatchFailed: the line has its answer, an error of its own (a 4xx
	// or 5xx the gateway gave it, an answer too large).
	BatchFailed = "failed"
	// BatchDeferred: the gateway had no capacity for it now (the model
	// saturated, no replica up); the line is tried again later.
	BatchDeferred = "deferred"
)

// batchMetrics hold the figures of batch lines run through the gateway.
type batchMetrics struct {
	lines   *prometheus.CounterVec
	running *prometheus.GaugeVec
}

func newBatchMetrics(reg prometheus.Registerer, err *error) batchMetrics {
	b := batchMetrics{
		lines: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "llmedge_batch_lines_total", Help: "Lines of batches run through the gateway, by model type and outcome (completed, failed: the line's own error; deferred: no spare capacity, tried again later).",
		}, []string{"model_type", "outcome"}),
		running: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "llmedge_batch_lines_running", Help: "Lines of batches on their model's replicas now, by model type.",
		}, []string{"model_type"}),
	}
	b.lines = register(reg, b.lines, err)
	b.running = register(reg, b.running, err)
	return b
}

// BatchLine counts a batch's line of model that ended with outcome. A nil
// *Metrics records nothing.
func (m *Metrics) BatchLine(model, outcome string) {
	if m == nil {
		return
	}
	m.batch.lines.WithLabelValues(model, outcome).Inc()
}

// BatchRunning moves the count of model's batch lines on its replicas by
// delta (1 as one starts, -1 as it ends).
func (m *Metrics) BatchRunning(model string, delta int) {
	if m == nil {
		return
	}
	m.batch.running.WithLabelValues(model).Add(float64(delta))
}
