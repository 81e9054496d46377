package poller

import "github.com/prometheus/client_golang/prometheus"

// metrics are what a Poller counts.
type metrics struct {
	errors *prometheus.CounterVec
	pruned *prometheus.CounterVec
}

func newMetrics() *metrics {
	return &metrics{
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sundial_poller_queue_errors_total",
			Help: "Failed poller steps by queue and step (promote, reclaim, prune, trim); each queue fails alone.",
		}, []string{"queue", "step"}),
		pruned: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sundial_poller_pruned_jobs_total",
			Help: "Job hashes deleted from Redis after their retention, by queue and set (finished, dead).",
		}, []string{"queue", "set"}),
	}
}

// Collectors returns the poller's metrics, for a Prometheus registry.
func (p *Poller) Collectors() []prometheus.Collector {
	return []prometheus.Collector{p.metrics.errors, p.metrics.pruned}
}
