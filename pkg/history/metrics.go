package history

import (
	"github.com/prometheus/client_golang/prometheus"
)

var (
	backlogDesc = prometheus.NewDesc("sundial_history_backlog_events",
		"Entries of the queue's Redis event stream not yet recorded in MongoDB (pending plus undelivered); an entry holds one event, or one transition of several jobs made by one engine call.",
		[]string{"queue"}, nil)
	lagDesc = prometheus.NewDesc("sundial_history_lag_seconds",
		"Age of the queue's oldest event not yet recorded in MongoDB (0 when none waits).",
		[]string{"queue"}, nil)
)

// Collector returns the Monitor's metrics for a Prometheus registry:
// sundial_history_backlog_events and sundial_history_lag_seconds per
// queue, from the last measurement.
func (m *Monitor) Collector() prometheus.Collector { return monitorCollector{m} }

type monitorCollector struct{ m *Monitor }

func (c monitorCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- backlogDesc
	ch <- lagDesc
}

func (c monitorCollector) Collect(ch chan<- prometheus.Metric) {
	for _, q := range c.m.Backlog().Queues {
		ch <- prometheus.MustNewConstMetric(backlogDesc, prometheus.GaugeValue, float64(q.Events), q.Queue)
		ch <- prometheus.MustNewConstMetric(lagDesc, prometheus.GaugeValue, q.Lag.Seconds(), q.Queue)
	}
}

// writerMetrics are what a Writer counts.
type writerMetrics struct {
	events      prometheus.Counter
	duplicates  prometheus.Counter
	jobs        *prometheus.CounterVec
	errors      prometheus.Counter
	delay       prometheus.Histogram
	batch       prometheus.Histogram
	ownedQueues prometheus.Gauge
	dropped     *prometheus.CounterVec
}

func newWriterMetrics() *writerMetrics {
	return &writerMetrics{
		events: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sundial_history_events_written_total",
			Help: "Events inserted into MongoDB by this writer.",
		}),
		duplicates: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sundial_history_events_duplicate_total",
			Help: "Events found already recorded (replays after a crash or a lost acknowledgement).",
		}),
		jobs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sundial_history_jobs_written_total",
			Help: "Job documents written by this writer, by operation (insert, update).",
		}, []string{"op"}),
		errors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sundial_history_write_errors_total",
			Help: "Failed batch writes (each is retried with backoff).",
		}),
		delay: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "sundial_history_event_delay_seconds",
			Help:    "Time from an event to its recording in MongoDB.",
			Buckets: []float64{.05, .1, .25, .5, .75, 1, 1.5, 2, 3, 5, 10, 30, 60, 300, 1800},
		}),
		batch: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "sundial_history_batch_seconds",
			Help:    "Duration of one successful batch write to MongoDB.",
			Buckets: prometheus.ExponentialBuckets(.005, 2, 12),
		}),
		ownedQueues: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "sundial_history_owned_queues",
			Help: "Queues whose history this writer writes.",
		}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sundial_events_dropped_total",
			Help: "Events removed from a queue's stream before they were recorded, by the SUNDIAL_EVENTS_MAXLEN cap (0 unless a cap is set).",
		}, []string{"queue"}),
	}
}

func (m *writerMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.events, m.duplicates, m.jobs, m.errors, m.delay, m.batch, m.ownedQueues, m.dropped}
}

// Collector returns the Writer's metrics for a Prometheus registry: the
// backlog and lag of its Monitor plus its own counters and histograms
// (sundial_history_*).
func (w *Writer) Collector() prometheus.Collector { return writerCollector{w} }

type writerCollector struct{ w *Writer }

func (c writerCollector) Describe(ch chan<- *prometheus.Desc) {
	c.w.mon.Collector().Describe(ch)
	for _, m := range c.w.metrics.collectors() {
		m.Describe(ch)
	}
}

func (c writerCollector) Collect(ch chan<- prometheus.Metric) {
	c.w.mon.Collector().Collect(ch)
	for _, m := range c.w.metrics.collectors() {
		m.Collect(ch)
	}
}
