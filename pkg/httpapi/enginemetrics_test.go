package httpapi

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/sundialhq/sundial/pkg/job"
	"github.com/sundialhq/sundial/pkg/queue"
	"github.com/sundialhq/sundial/pkg/queue/queuetest"
)

// family returns the metrics named name that reg serves, by the value of
// their one label.
func family(t *testing.T, reg prometheus.Gatherer, name string) map[string]*dto.Metric {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*dto.Metric{}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			v := ""
			if ls := m.GetLabel(); len(ls) > 0 {
				v = ls[0].GetValue()
			}
			out[v] = m
		}
	}
	return out
}

// submitAt submits specs as if submitted at at (created and due then).
func (a *testAPI) submitAt(t *testing.T, at time.Time, specs ...job.Spec) []*job.Job {
	t.Helper()
	var out []*job.Job
	for _, s := range specs {
		j, err := s.Build(at)
		if err != nil {
			t.Fatal(err)
		}
		// The API registers as a reader of the storage format once it
		// runs: until then the engine refuses writes.
		queuetest.Eventually(t, 10*time.Second, "a submit", func() bool {
			_, err := a.q.Submit(context.Background(), []*job.Job{j})
			return err == nil
		})
		out = append(out, j)
	}
	return out
}

// TestOldestQueuedAge: the age of each queue's longest-waiting due job,
// whatever its priority, from the claim end of the lists; a group's marker
// read through to its job; a cancelled job's id left in its list not
// counted; 0 for a queue with nothing queued.
func TestOldestQueuedAge(t *testing.T) {
	a := start(t)
	ctx := context.Background()
	now := time.Now()
	a.submitAt(t, now.Add(-30*time.Second), job.Spec{Queue: "aged", Type: "x"})                               // next in the normal list
	a.submitAt(t, now, job.Spec{Queue: "aged", Type: "x"})                                                    // behind it
	a.submitAt(t, now.Add(-5*time.Second), job.Spec{Queue: "aged", Type: "x", Priority: job.High})            // claimed first, younger
	a.submitAt(t, now.Add(-20*time.Second), job.Spec{Queue: "grouped", Type: "x", Group: "tenant-1"})         // behind a marker
	gone := a.submitAt(t, now.Add(-time.Hour), job.Spec{Queue: "cancelled", Type: "x", Priority: job.Low})[0] // cancelled: a tombstone
	a.submitAt(t, now.Add(-time.Hour), job.Spec{Queue: "idle", Type: "x"})                                    // claimed below
	if _, err := a.q.Cancel(ctx, gone.ID); err != nil {
		t.Fatal(err)
	}
	if ls, err := a.q.Claim(ctx, "idle", 1, "w"); err != nil || len(ls) != 1 {
		t.Fatalf("claim: %v %v", ls, err)
	}

	ages := family(t, a.s.metrics.reg, "sundial_queue_oldest_age_seconds")
	age := func(q string) float64 {
		m, ok := ages[q]
		if !ok {
			t.Fatalf("no sundial_queue_oldest_age_seconds{queue=%q} in %v", q, ages)
		}
		return m.GetGauge().GetValue()
	}
	if v := age("aged"); v < 30 || v > 40 {
		t.Errorf("aged: %.1f s, want the normal list's next job's 30 s (not the high one's 5 s, not the newest's 0)", v)
	}
	if v := age("grouped"); v < 20 || v > 30 {
		t.Errorf("grouped: %.1f s, want the group's next job's 20 s", v)
	}
	if v := age("cancelled"); v != 0 {
		t.Errorf("cancelled: %.1f s, want 0 (its only id is a cancelled job's)", v)
	}
	if v := age("idle"); v != 0 {
		t.Errorf("idle: %.1f s, want 0 (nothing queued)", v)
	}
}

// TestRedisUsageCached: Redis' CPU, memory and commands from INFO, read
// once per TTL however often /metrics is scraped.
func TestRedisUsageCached(t *testing.T) {
	a := start(t)
	e := newEngineCollector(a.q)
	e.ttl = time.Hour
	reg := prometheus.NewRegistry()
	reg.MustRegister(e)
	one := func(name string) float64 {
		t.Helper()
		ms := family(t, reg, name)
		if len(ms) != 1 {
			t.Fatalf("%s: %d series, want one (one Redis)", name, len(ms))
		}
		for node, m := range ms {
			if node == "" {
				t.Errorf("%s: no node label", name)
			}
			if c := m.GetCounter(); c != nil {
				return c.GetValue()
			}
			return m.GetGauge().GetValue()
		}
		return 0
	}
	if v := one("sundial_redis_cpu_seconds_total"); v <= 0 {
		t.Errorf("CPU seconds %v, want > 0", v)
	}
	// An empty redis-server uses about a megabyte (0.94–1.1 MB seen,
	// by version and allocator): more than 256 KiB says INFO was read.
	if v := one("sundial_redis_memory_used_bytes"); v < 256<<10 {
		t.Errorf("used memory %v bytes, want what a running Redis uses (256 KiB or more)", v)
	}
	first := one("sundial_redis_commands_processed_total")
	if first <= 0 {
		t.Fatalf("commands processed %v, want > 0", first)
	}
	for range 3 {
		if v := one("sundial_redis_commands_processed_total"); v != first {
			t.Fatalf("commands processed %v then %v within the TTL: a scrape read Redis again", first, v)
		}
	}
	e.mu.Lock()
	e.ttl = 0
	e.mu.Unlock()
	if v := one("sundial_redis_commands_processed_total"); v <= first {
		t.Errorf("commands processed %v after the TTL, want more than %v (the reads in between)", v, first)
	}
}

// TestClaimStartLatency: a claim over the HTTP worker protocol observes how
// long its job waited after it became due.
func TestClaimStartLatency(t *testing.T) {
	a := start(t)
	a.submitAt(t, time.Now().Add(-3*time.Second), job.Spec{Queue: "proto", Type: "x"})
	if got := a.claimJobs(t, "/v1/queues/proto/claim", map[string]any{"worker_id": "py-1", "max": 10}); len(got) != 1 {
		t.Fatalf("claimed %d jobs, want 1", len(got))
	}
	m, ok := family(t, a.s.metrics.reg, "sundial_job_start_latency_seconds")["proto"]
	if !ok {
		t.Fatal("no sundial_job_start_latency_seconds{queue=\"proto\"}")
	}
	if h := m.GetHistogram(); h.GetSampleCount() != 1 || h.GetSampleSum() < 3 || h.GetSampleSum() > 60 {
		t.Errorf("count %d, sum %.3f s; want one claim that waited 3 s or more", h.GetSampleCount(), h.GetSampleSum())
	}
}

// TestLeaseExpiredCounted: an attempt whose lease expired and was
// reclaimed counts in sundial_jobs_lease_expired_total (as well as a failed
// attempt), whose series reads 0 from the first event of its queue and type.
func TestLeaseExpiredCounted(t *testing.T) {
	t.Parallel()
	srv := queuetest.Start(t)
	a := startOn(t, srv, func(c *Config) {
		c.Queue = queue.New(srv.Client(), queue.Options{LeaseTTL: 300 * time.Millisecond, LeaseGrace: 100 * time.Millisecond})
	})
	a.q = a.s.q
	a.waitStream(t)
	ctx := context.Background()
	attempts := 3
	a.submitAt(t, time.Now(), job.Spec{Type: "x", MaxAttempts: &attempts})
	expired := func(n int) string {
		return fmt.Sprintf(`sundial_jobs_lease_expired_total{queue="default",type="x"} %d`, n)
	}
	queuetest.Eventually(t, 10*time.Second, "the counter at 0 after the submit", func() bool {
		return strings.Contains(gather(t, a), expired(0))
	})
	if ls, err := a.q.Claim(ctx, "default", 1, "doomed-worker"); err != nil || len(ls) != 1 {
		t.Fatalf("claim: %v %v", ls, err)
	}
	// The worker never renews: a poller's reclaim finds the lease expired.
	queuetest.Eventually(t, 10*time.Second, "the lease reclaimed", func() bool {
		n, _, err := a.q.Reclaim(ctx, "default", 10)
		return err == nil && n == 1
	})
	queuetest.Eventually(t, 10*time.Second, "the expiry counted", func() bool {
		text := gather(t, a)
		return strings.Contains(text, expired(1)) && strings.Contains(text, `sundial_jobs_failed_total{queue="default",type="x"} 1`)
	})
}
