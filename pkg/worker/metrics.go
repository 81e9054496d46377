package worker

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sundialhq/sundial/pkg/job"
	"github.com/sundialhq/sundial/pkg/queue"
)

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
		w.metrics.startLatency(),
	}
}

// workerMetrics are the worker's metrics that are not read from its
// counters. The zero value is ready: the histogram is made on first use.
type workerMetrics struct {
	once    sync.Once
	latency *prometheus.HistogramVec
	byQueue sync.Map // queue name → prometheus.Observer, the label lookup done once
}

func (m *workerMetrics) startLatency() *prometheus.HistogramVec {
	m.once.Do(func() {
		m.latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "sundial_job_start_latency_seconds",
			Help: job.StartDelayHelp, Buckets: job.StartDelayBuckets}, []string{"queue"})
	})
	return m.latency
}

// observeStart records how long the job of l waited after it became due,
// when its attempt starts on this worker. The lease's StartedAt is the
// claim's time on the engine's clock, the clock run_at was set by.
func (w *Worker) observeStart(queueName string, l queue.Lease) {
	started := time.Now()
	if l.Job.StartedAt != nil {
		started = *l.Job.StartedAt
	}
	o, ok := w.metrics.byQueue.Load(queueName)
	if !ok {
		o, _ = w.metrics.byQueue.LoadOrStore(queueName, w.metrics.startLatency().WithLabelValues(queueName))
	}
	o.(prometheus.Observer).Observe(l.Job.StartDelay(started).Seconds())
}
