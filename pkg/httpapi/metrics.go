package httpapi

import (
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/sundialhq/sundial/internal/buildinfo"
	"github.com/sundialhq/sundial/pkg/job"
	"github.com/sundialhq/sundial/pkg/queue"
)

// Bounds that keep the metrics' memory finite whatever clients submit.
const (
	// maxJobSeries bounds the distinct (queue, type) label pairs; later
	// pairs are counted under type="_other".
	maxJobSeries = 1000
	// maxRunning bounds the started-but-unfinished attempts tracked for
	// the duration histogram; beyond it an arbitrary one is forgotten.
	maxRunning = 100_000
	otherType  = "_other"
)

// metrics are the API process's Prometheus metrics, in their own registry.
// The job counters and the duration histogram come from the event stream
// the hub reads (one source): each API process counts every event from the
// moment it starts, so across replicas take max(), not sum().
type metrics struct {
	reg *prometheus.Registry

	submitted, succeeded, failed, dead *prometheus.CounterVec
	leaseExpired                       *prometheus.CounterVec
	duration                           *prometheus.HistogramVec
	depth                              *prometheus.GaugeVec
	parked                             *prometheus.GaugeVec
	httpDuration                       *prometheus.HistogramVec
	wsClients                          prometheus.Gauge
	wsDropped                          prometheus.Counter
	rateLimited                        prometheus.Counter
	streamErrors                       prometheus.Counter
	// startLatency is observed at the claims of the HTTP worker protocol
	// (one per claim, so summed across replicas, unlike the event series).
	startLatency *prometheus.HistogramVec

	// httpSeries caches the request-duration histogram of each (method,
	// route, status): the label lookup hashed three strings per request.
	// As bounded as the labels: route templates, known methods, statuses.
	httpSeries sync.Map // httpSeriesKey → prometheus.Observer

	mu      sync.Mutex // guards series and running (one reader per queue in Redis Cluster)
	series  map[seriesKey]*jobSeries
	running map[string]runningAttempt
}

type seriesKey struct{ queue, typ string }

type httpSeriesKey struct {
	method, route string
	status        int
}

// jobSeries caches the children of one (queue, type) pair.
type jobSeries struct {
	submitted, succeeded, failed, dead prometheus.Counter
	leaseExpired                       prometheus.Counter
	durOK, durFailed                   prometheus.Observer
}

type runningAttempt struct {
	started time.Time
	series  *jobSeries
}

func newMetrics() *metrics {
	jobLabels := []string{"queue", "type"}
	m := &metrics{
		reg: prometheus.NewRegistry(),
		submitted: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sundial_jobs_submitted_total",
			Help: "Jobs submitted, from the event stream."}, jobLabels),
		succeeded: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sundial_jobs_succeeded_total",
			Help: "Jobs completed successfully, from the event stream."}, jobLabels),
		failed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sundial_jobs_failed_total",
			Help: "Attempts that failed and were scheduled for a retry (failed and lease_expired events)."}, jobLabels),
		dead: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sundial_jobs_dead_total",
			Help: "Jobs that ended dead: attempts exhausted, not retryable, or no handler."}, jobLabels),
		leaseExpired: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sundial_jobs_lease_expired_total",
			Help: "Attempts whose lease expired and was reclaimed by a poller (their worker died, stalled or lost Redis), from the event stream; each is also counted as failed or dead."}, jobLabels),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "sundial_job_duration_seconds",
			Help:    "Time from an attempt's start to its outcome, by outcome (succeeded or failed).",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 1800}},
			[]string{"queue", "type", "outcome"}),
		depth: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "sundial_queue_depth",
			Help: "Jobs in a queue by state (queued, scheduled, active, waiting, dead; throttled: queued but held back by a limit; unhandled: queued but waiting for a worker that handles the type), refreshed every stats tick."},
			[]string{"queue", "state"}),
		parked: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "sundial_queue_parked",
			Help: "Durable jobs parked in a queue (counted in sundial_queue_depth's scheduled): state sleeping, or awaiting a signal (docs/durable.md)."},
			[]string{"queue", "state"}),
		httpDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "sundial_http_request_duration_seconds",
			Help:    "HTTP request duration by route template and status (the websocket stream excluded).",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5}},
			[]string{"method", "route", "status"}),
		wsClients: prometheus.NewGauge(prometheus.GaugeOpts{Name: "sundial_stream_clients",
			Help: "Websocket clients connected to /v1/stream."}),
		wsDropped: prometheus.NewCounter(prometheus.CounterOpts{Name: "sundial_stream_clients_dropped_total",
			Help: "Websocket clients disconnected because they fell behind."}),
		rateLimited: prometheus.NewCounter(prometheus.CounterOpts{Name: "sundial_http_rate_limited_total",
			Help: "Requests refused with 429."}),
		streamErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "sundial_stream_read_errors_total",
			Help: "Failed reads of the queues' event streams (Redis unavailable)."}),
		startLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "sundial_job_start_latency_seconds",
			Help: job.StartDelayHelp, Buckets: job.StartDelayBuckets}, []string{"queue"}),
		series:  map[seriesKey]*jobSeries{},
		running: map[string]runningAttempt{},
	}
	m.reg.MustRegister(m.submitted, m.succeeded, m.failed, m.dead, m.leaseExpired, m.duration, m.depth, m.parked, m.httpDuration,
		m.wsClients, m.wsDropped, m.rateLimited, m.streamErrors, m.startLatency,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), buildinfo.Collector())
	return m
}

func (m *metrics) observeHTTP(method, route string, status int, d time.Duration) {
	switch method {
	case "GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "HEAD":
	default:
		method = "other" // clients choose methods; keep the label bounded
	}
	k := httpSeriesKey{method, route, status}
	o, ok := m.httpSeries.Load(k)
	if !ok {
		o, _ = m.httpSeries.LoadOrStore(k, m.httpDuration.WithLabelValues(method, route, strconv.Itoa(status)))
	}
	o.(prometheus.Observer).Observe(d.Seconds())
}

func (m *metrics) seriesFor(q, typ string) *jobSeries {
	k := seriesKey{q, typ}
	if s, ok := m.series[k]; ok {
		return s
	}
	if len(m.series) >= maxJobSeries {
		k.typ = otherType
		if s, ok := m.series[k]; ok {
			return s
		}
	}
	s := &jobSeries{
		submitted: m.submitted.WithLabelValues(k.queue, k.typ),
		succeeded: m.succeeded.WithLabelValues(k.queue, k.typ),
		failed:    m.failed.WithLabelValues(k.queue, k.typ),
		dead:      m.dead.WithLabelValues(k.queue, k.typ),
		// Made with the others, so that its series reads 0 before the
		// first expiry (an alert's increase() needs the series).
		leaseExpired: m.leaseExpired.WithLabelValues(k.queue, k.typ),
		durOK:        m.duration.WithLabelValues(k.queue, k.typ, "succeeded"),
		durFailed:    m.duration.WithLabelValues(k.queue, k.typ, "failed"),
	}
	m.series[k] = s
	return s
}

// observeEvent updates the job metrics from one stream event.
func (m *metrics) observeEvent(e *streamEvent) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.seriesFor(e.Queue, e.Type)
	switch e.Event {
	case job.EventSubmitted:
		s.submitted.Inc()
	case job.EventStarted:
		if len(m.running) >= maxRunning {
			for id := range m.running {
				delete(m.running, id)
				break
			}
		}
		m.running[e.JobID] = runningAttempt{started: time.Time(e.At), series: s}
	case job.EventSucceeded:
		s.succeeded.Inc()
		m.finishAttempt(e, true)
	case job.EventFailed:
		s.failed.Inc()
		m.finishAttempt(e, false)
	case job.EventLeaseExpired:
		s.leaseExpired.Inc()
		if e.State != job.Dead { // a dead event follows otherwise
			s.failed.Inc()
		}
		m.finishAttempt(e, false)
	case job.EventDead:
		s.dead.Inc()
		m.finishAttempt(e, false)
	case job.EventCancelled, job.EventSnoozed:
		delete(m.running, e.JobID)
	}
}

func (m *metrics) finishAttempt(e *streamEvent, ok bool) {
	r, found := m.running[e.JobID]
	if !found {
		return
	}
	delete(m.running, e.JobID)
	d := time.Time(e.At).Sub(r.started).Seconds()
	if d < 0 {
		d = 0
	}
	if ok {
		r.series.durOK.Observe(d)
	} else {
		r.series.durFailed.Observe(d)
	}
}

// observeStats sets the queue depth gauges.
func (m *metrics) observeStats(stats []queue.QueueStats) {
	for _, q := range stats {
		var queued int64
		for _, n := range q.Queued {
			queued += n
		}
		m.depth.WithLabelValues(q.Name, "queued").Set(float64(queued))
		m.depth.WithLabelValues(q.Name, "scheduled").Set(float64(q.Scheduled))
		m.depth.WithLabelValues(q.Name, "active").Set(float64(q.Active))
		m.depth.WithLabelValues(q.Name, "waiting").Set(float64(q.Waiting))
		m.depth.WithLabelValues(q.Name, "dead").Set(float64(q.Dead))
		m.depth.WithLabelValues(q.Name, "throttled").Set(float64(q.Throttled))
		m.depth.WithLabelValues(q.Name, "unhandled").Set(float64(q.Unhandled))
		m.parked.WithLabelValues(q.Name, "sleeping").Set(float64(q.Sleeping))
		m.parked.WithLabelValues(q.Name, "awaiting").Set(float64(q.Awaiting))
	}
}

// observeClaim records how long the job of a lease claimed over the HTTP
// worker protocol waited after it became due (see job.StartDelayHelp).
func (m *metrics) observeClaim(queueName string, l queue.Lease) {
	started := time.Now()
	if l.Job.StartedAt != nil {
		started = *l.Job.StartedAt
	}
	m.startLatency.WithLabelValues(queueName).Observe(l.Job.StartDelay(started).Seconds())
}

// Gatherer returns the API's metrics, the registry /metrics serves, for an
// export other than /metrics (telemetry.SetupMetrics).
func (s *Server) Gatherer() prometheus.Gatherer { return s.metrics.reg }
