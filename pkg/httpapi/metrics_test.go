package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/sundialhq/sundial/pkg/job"
	"github.com/sundialhq/sundial/pkg/queue"
	"github.com/sundialhq/sundial/pkg/queue/queuetest"
)

// dropped returns how many slow stream clients were dropped.
func (m *metrics) dropped() float64 {
	var d dto.Metric
	_ = m.wsDropped.Write(&d)
	return d.GetCounter().GetValue()
}

// gather returns the text of GET /metrics.
func gather(t *testing.T, a *testAPI) string {
	t.Helper()
	res := a.do("GET", "/metrics", nil)
	if res.status != http.StatusOK {
		t.Fatalf("/metrics: %d", res.status)
	}
	return string(res.body)
}

func TestMetrics(t *testing.T) {
	a := start(t)
	a.waitStream(t)
	ctx := context.Background()
	ok := a.submit(t, map[string]any{"type": "email"})
	doomed := a.submit(t, map[string]any{"type": "email", "max_attempts": 1})
	retried := a.submit(t, map[string]any{"type": "email", "max_attempts": 3, "backoff": map[string]any{"base_seconds": 60, "max_seconds": 60}})
	leases, err := a.q.Claim(ctx, "default", 3, "w1")
	if err != nil || len(leases) != 3 {
		t.Fatalf("claim: %v", err)
	}
	tokens := map[string]string{}
	for _, l := range leases {
		tokens[l.Job.ID] = l.Token
	}
	_, err = a.q.Complete(ctx, "default", []queue.Outcome{
		{ID: ok.ID, Token: tokens[ok.ID], Kind: queue.OutcomeSucceeded, Result: []byte(`1`)},
		{ID: doomed.ID, Token: tokens[doomed.ID], Kind: queue.OutcomeFailed, Error: "boom"},
		{ID: retried.ID, Token: tokens[retried.ID], Kind: queue.OutcomeFailed, Error: "later"},
	})
	if err != nil {
		t.Fatal(err)
	}
	c := a.mustDial(t, "")
	a.waitClients(t, 1)
	want := []string{
		`sundial_jobs_submitted_total{queue="default",type="email"} 3`,
		`sundial_jobs_succeeded_total{queue="default",type="email"} 1`,
		`sundial_jobs_failed_total{queue="default",type="email"} 1`,
		`sundial_jobs_dead_total{queue="default",type="email"} 1`,
		`sundial_job_duration_seconds_count{outcome="succeeded",queue="default",type="email"} 1`,
		`sundial_job_duration_seconds_count{outcome="failed",queue="default",type="email"} 2`,
		`sundial_queue_depth{queue="default",state="dead"} 1`,
		`sundial_queue_depth{queue="default",state="scheduled"} 1`,
		`sundial_http_request_duration_seconds_count{method="POST",route="/v1/jobs",status="201"} 3`,
		`sundial_stream_clients 1`,
		`go_goroutines`,
	}
	var text string
	queuetest.Eventually(t, 10*time.Second, "metrics from the event stream", func() bool {
		text = gather(t, a)
		for _, w := range want {
			if !strings.Contains(text, w) {
				return false
			}
		}
		return true
	})
	a.do("BREW", "/v1/coffee", nil).wantError(t, http.StatusNotFound, codeNotFound, "")
	if !strings.Contains(gather(t, a), `sundial_http_request_duration_seconds_count{method="other",route="unmatched",status="404"} 1`) {
		t.Error("an odd method is not folded into other")
	}
	c.CloseNow()
	queuetest.Eventually(t, 10*time.Second, "client gauge back to 0", func() bool {
		return strings.Contains(gather(t, a), "sundial_stream_clients 0")
	})
}

func TestMetricsBounded(t *testing.T) {
	t.Parallel()
	m := newMetrics()
	at := msTime(time.Now())
	for i := range maxJobSeries + 10 {
		m.observeEvent(&streamEvent{JobID: fmt.Sprint(i), Queue: "q", Type: fmt.Sprintf("t%d", i), Event: job.EventSubmitted, At: at})
	}
	if len(m.series) != maxJobSeries+1 {
		t.Fatalf("%d series", len(m.series))
	}
	var d dto.Metric
	_ = m.submitted.WithLabelValues("q", otherType).Write(&d)
	if d.GetCounter().GetValue() != 10 {
		t.Fatalf("_other counted %v", d.GetCounter().GetValue())
	}
	for i := range maxRunning + 5 {
		m.observeEvent(&streamEvent{JobID: fmt.Sprint(i), Queue: "q", Type: "t1", Event: job.EventStarted, At: at})
	}
	if len(m.running) != maxRunning {
		t.Fatalf("%d running", len(m.running))
	}
}
