package poller

import "github.com/prometheus/client_golang/prometheus"

// metrics are what a Poller counts.
type metrics struct {
	errors *prometheus.CounterVec
	pruned *prometheus.CounterVec
	// unhandled counts jobs that ended dead with no handler for their type.
	unhandled *prometheus.CounterVec
	// batchRecounted counts batch members' ends found by a recount
	// (batchwatch.go), which the relay had not brought.
	batchRecounted prometheus.Counter
}

func newMetrics() *metrics {
	return &metrics{
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sundial_poller_queue_errors_total",
			Help: "Failed poller steps by queue and step (promote, reclaim, prune, trim, unhandled, settle, batch_relay, batch_callbacks, batch_recount); each queue fails alone.",
		}, []string{"queue", "step"}),
		pruned: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sundial_poller_pruned_jobs_total",
			Help: "Job hashes deleted from Redis after their retention, by queue and set (finished, dead).",
		}, []string{"queue", "set"}),
		unhandled: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sundial_poller_unhandled_dead_total",
			Help: "Jobs that ended dead because no live worker of their queue handled their type for SUNDIAL_UNHANDLED_TIMEOUT, by queue and type.",
		}, []string{"queue", "type"}),
		batchRecounted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sundial_poller_batch_ends_recounted_total",
			Help: "Ends of batch members counted by a recount from their jobs (a batch whose count had stopped moving): ends the relay never brought, e.g. lost with a Redis that came back with less.",
		}),
	}
}

// Collectors returns the poller's metrics, for a Prometheus registry.
func (p *Poller) Collectors() []prometheus.Collector {
	return []prometheus.Collector{p.metrics.errors, p.metrics.pruned, p.metrics.unhandled, p.metrics.batchRecounted}
}
