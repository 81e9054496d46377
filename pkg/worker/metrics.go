package worker

import "github.com/prometheus/client_golang/prometheus"

// Collectors returns the worker's metrics, for a Prometheus registry.
func (w *Worker) Collectors() []prometheus.Collector {
	count := func(name, help string, f func() float64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, f)
	}
	return []prometheus.Collector{
		count("sundial_worker_jobs_processed_total", "Attempts this worker finished and reported.", func() float64 { return float64(w.processed.Load()) }),
		count("sundial_worker_jobs_failed_total", "Reported attempts that did not succeed.", func() float64 { return float64(w.failed.Load()) }),
		count("sundial_worker_leases_lost_total", "Running jobs stopped because a renewal found their lease lost (expired and reclaimed, or cancelled).", func() float64 { return float64(w.leasesLost.Load()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "sundial_worker_jobs_running", Help: "Jobs running now."}, func() float64 { return float64(w.activeCount()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "sundial_worker_concurrency", Help: "The most jobs this worker runs at once."}, func() float64 { return float64(w.cfg.Concurrency) }),
	}
}
