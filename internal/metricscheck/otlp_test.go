package metricscheck

import (
	"context"
	"io"
	"net/http"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sundialhq/sundial/internal/proctest"
	"github.com/sundialhq/sundial/pkg/job"
	"github.com/sundialhq/sundial/pkg/queue"
	"github.com/sundialhq/sundial/pkg/queue/queuetest"
	"github.com/sundialhq/sundial/pkg/telemetry/telemetrytest"
)

// TestOTLPExportIsTheSameMetrics: a real worker with an OTLP endpoint set
// exports over OTLP every metric family its /metrics serves, under the
// same names (one implementation: the Prometheus registry, bridged), as
// service sundial-worker; and it still stops cleanly at SIGTERM (the
// export's last flush is bounded).
func TestOTLPExportIsTheSameMetrics(t *testing.T) {
	srv := queuetest.Start(t)
	r := telemetrytest.NewReceiver(t)
	addr := proctest.FreeAddr(t)
	w := proctest.Start(t, proctest.Binary(t, "worker"),
		"SUNDIAL_REDIS_URL="+srv.URL(), "SUNDIAL_LOG_LEVEL=warn", "SUNDIAL_METRICS_ADDR="+addr, "SUNDIAL_QUEUES=otlp",
		"OTEL_EXPORTER_OTLP_ENDPOINT="+r.URL(), "OTEL_METRIC_EXPORT_INTERVAL=100", "OTEL_TRACES_EXPORTER=none")
	hc := &http.Client{Timeout: 5 * time.Second}
	queuetest.Eventually(t, 30*time.Second, "the worker's /metrics", func() bool {
		res, err := hc.Get("http://" + addr + "/metrics")
		if err != nil {
			return false
		}
		res.Body.Close()
		return res.StatusCode == http.StatusOK
	})
	// A job, so that the start-latency histogram has its series.
	q := queue.New(srv.Client(), queue.Options{})
	j, err := (&job.Spec{Queue: "otlp", Type: "sundial.echo"}).Build(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	queuetest.Eventually(t, 10*time.Second, "the submit", func() bool {
		_, err := q.Submit(context.Background(), []*job.Job{j})
		return err == nil
	})
	// The families /metrics serves once the job ran.
	var families []string
	queuetest.Eventually(t, 30*time.Second, "the job's start observed on /metrics", func() bool {
		res, err := hc.Get("http://" + addr + "/metrics")
		if err != nil {
			return false
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		families = families[:0]
		for _, l := range strings.Split(string(b), "\n") {
			if rest, ok := strings.CutPrefix(l, "# TYPE "); ok {
				families = append(families, strings.Fields(rest)[0])
			}
		}
		return strings.Contains(string(b), `sundial_job_start_latency_seconds_count{queue="otlp"} 1`)
	})
	exported := func() []string {
		var names []string
		for _, m := range r.Metrics() {
			if m.Service == "sundial-worker" && !slices.Contains(names, m.Name) {
				names = append(names, m.Name)
			}
		}
		return names
	}
	var missing []string
	queuetest.Eventually(t, 30*time.Second, "every family of /metrics exported over OTLP", func() bool {
		got := exported()
		missing = missing[:0]
		for _, f := range families {
			if !slices.Contains(got, f) {
				missing = append(missing, f)
			}
		}
		return len(missing) == 0
	})
	if m, ok := r.LastMetric("sundial_job_start_latency_seconds"); !ok || m.Kind != "histogram" || len(m.Points) != 1 || m.Points[0].Count != 1 || m.Points[0].Attrs["queue"] != "otlp" {
		t.Errorf("start latency over OTLP: %+v, want one histogram point of queue otlp with count 1", m)
	}
	if m, ok := r.LastMetric("sundial_worker_jobs_processed_total"); !ok || m.Kind != "sum" || !m.Monotonic {
		t.Errorf("processed counter over OTLP: %+v, want a monotonic sum", m)
	}
	if !w.Signal(syscall.SIGTERM, 20*time.Second) {
		t.Fatal("the worker did not exit within 20 s of SIGTERM")
	}
	if w.ExitCode() != 0 {
		t.Fatalf("worker exited %d:\n%s", w.ExitCode(), w.Output())
	}
	t.Logf("%d metric families, all exported over OTLP", len(families))
}
