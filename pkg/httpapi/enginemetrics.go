package httpapi

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sundialhq/sundial/pkg/queue"
)

// engineMetricsTTL is how long one reading of the engine serves scrapes:
// however many Prometheus servers scrape however often, each API replica
// sends Redis at most one INFO and one set of list reads per TTL.
const engineMetricsTTL = 5 * time.Second

// engineReadTimeout bounds one reading, so that a scrape answers while
// Redis does not (without these series).
const engineReadTimeout = 2 * time.Second

var (
	oldestAgeDesc = prometheus.NewDesc("sundial_queue_oldest_age_seconds",
		"Age of the longest-waiting due job of a queue: now minus when the next job of its priority lists became due (run_at, or created_at when later); 0 with none queued. Read at most every 5 s.",
		[]string{"queue"}, nil)
	redisCPUDesc = prometheus.NewDesc("sundial_redis_cpu_seconds_total",
		"CPU time of the Redis server process, system plus user (INFO used_cpu_sys + used_cpu_user), by node. Read at most every 5 s.",
		[]string{"node"}, nil)
	redisMemoryDesc = prometheus.NewDesc("sundial_redis_memory_used_bytes",
		"Memory Redis' allocator holds (INFO used_memory), by node. Read at most every 5 s.",
		[]string{"node"}, nil)
	redisCommandsDesc = prometheus.NewDesc("sundial_redis_commands_processed_total",
		"Commands the Redis server processed since it started (INFO total_commands_processed), by node. Read at most every 5 s.",
		[]string{"node"}, nil)
)

// engineCollector serves what only the engine knows, read at a scrape and
// kept for engineMetricsTTL: the age of each queue's oldest due job and
// Redis' cost counters (every master of a Redis Cluster). Every API
// replica reads the same Redis: take max across replicas, never sum.
type engineCollector struct {
	q   *queue.Client
	ttl time.Duration

	mu      sync.Mutex
	readAt  time.Time
	metrics []prometheus.Metric
}

func newEngineCollector(q *queue.Client) *engineCollector {
	return &engineCollector{q: q, ttl: engineMetricsTTL}
}

func (e *engineCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- oldestAgeDesc
	ch <- redisCPUDesc
	ch <- redisMemoryDesc
	ch <- redisCommandsDesc
}

func (e *engineCollector) Collect(ch chan<- prometheus.Metric) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.readAt.IsZero() || time.Since(e.readAt) >= e.ttl {
		// A failed reading is kept for the TTL too: a Redis that does not
		// answer gets no more tries than one that does.
		e.metrics, e.readAt = e.read(), time.Now()
	}
	for _, m := range e.metrics {
		ch <- m
	}
}

// read reads the engine once; a part that fails is left out (its series
// vanish rather than repeat a stale value).
func (e *engineCollector) read() []prometheus.Metric {
	ctx, cancel := context.WithTimeout(context.Background(), engineReadTimeout)
	defer cancel()
	var out []prometheus.Metric
	if queues, err := e.q.Queues(ctx); err == nil {
		if oldest, err := e.q.OldestQueued(ctx, queues); err == nil {
			now := e.q.Now()
			for q, due := range oldest {
				age := 0.0
				if !due.IsZero() {
					age = max(now.Sub(due).Seconds(), 0)
				}
				out = append(out, prometheus.MustNewConstMetric(oldestAgeDesc, prometheus.GaugeValue, age, q))
			}
		}
	}
	if usage, err := e.q.RedisUsage(ctx); err == nil {
		for _, u := range usage {
			out = append(out,
				prometheus.MustNewConstMetric(redisCPUDesc, prometheus.CounterValue, u.CPUSeconds, u.Node),
				prometheus.MustNewConstMetric(redisMemoryDesc, prometheus.GaugeValue, u.MemoryBytes, u.Node),
				prometheus.MustNewConstMetric(redisCommandsDesc, prometheus.CounterValue, u.Commands, u.Node))
		}
	}
	return out
}
