package worker_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/sundialhq/sundial/pkg/job"
	"github.com/sundialhq/sundial/pkg/worker"
)

// startLatency reads sundial_job_start_latency_seconds{queue} from reg.
func startLatency(t *testing.T, reg *prometheus.Registry, queue string) *dto.Histogram {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "sundial_job_start_latency_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "queue" && l.GetValue() == queue {
					return m.GetHistogram()
				}
			}
		}
	}
	return nil
}

func bucketCount(h *dto.Histogram, le float64) uint64 {
	for _, b := range h.GetBucket() {
		if b.GetUpperBound() == le {
			return b.GetCumulativeCount()
		}
	}
	return 0
}

// TestStartLatency: a job that became due 3 s before the worker claimed it
// is observed at 3 s or more; its retry, due when its first attempt failed,
// is observed from then (not from the job's creation).
func TestStartLatency(t *testing.T) {
	e := newEnv(t)
	const q = "latency"
	w := newWorker(e, worker.Config{Queues: []worker.Queue{{Name: q}}, Concurrency: 2})
	w.HandleFunc("once", func(_ context.Context, j *job.Job) (any, error) {
		if j.Attempt == 1 {
			return nil, errors.New("first attempt fails")
		}
		return "ok", nil
	})
	reg := prometheus.NewRegistry()
	reg.MustRegister(w.Collectors()...)

	// Created (and due) 3 s ago, as if it had waited that long for a worker.
	j, err := (&job.Spec{Queue: q, Type: "once", MaxAttempts: ptr(2), Backoff: &job.Backoff{}}).Build(time.Now().Add(-3 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.q.Submit(context.Background(), []*job.Job{j}); err != nil {
		t.Fatal(err)
	}
	if h := startLatency(t, reg, q); h.GetSampleCount() != 0 {
		t.Fatalf("observed %d starts before the worker ran", h.GetSampleCount())
	}
	start(t, w)
	e.waitState(t, j.ID, job.Succeeded)

	h := startLatency(t, reg, q)
	if h.GetSampleCount() != 2 {
		t.Fatalf("%d starts observed, want 2 (the attempt and its retry)", h.GetSampleCount())
	}
	if s := h.GetSampleSum(); s < 3 || s > 60 {
		t.Errorf("sum of the start latencies %.3f s, want the first attempt's 3 s or more (and far less than a minute)", s)
	}
	// The retry was due when the first attempt failed: well under 2.5 s.
	if n := bucketCount(h, 2.5); n != 1 {
		t.Errorf("%d starts within 2.5 s of being due, want 1 (the retry): %v", n, h.GetBucket())
	}
	if n := bucketCount(h, 1800); n != 2 {
		t.Errorf("%d starts within 30 minutes, want 2", n)
	}
}
