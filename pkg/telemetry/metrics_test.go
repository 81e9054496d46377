package telemetry_test

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/sundialhq/sundial/pkg/telemetry"
	"github.com/sundialhq/sundial/pkg/telemetry/telemetrytest"
)

// testRegistry is a registry like a service's: a labelled counter, a
// gauge and a histogram.
func testRegistry() (*prometheus.Registry, *prometheus.CounterVec, prometheus.Gauge, prometheus.Histogram) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sundial_test_jobs_total", Help: "Jobs."}, []string{"queue"})
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "sundial_test_depth", Help: "Depth."})
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "sundial_test_latency_seconds", Help: "Latency.", Buckets: []float64{.1, 1, 10}})
	reg.MustRegister(c, g, h)
	return reg, c, g, h
}

// waitMetric waits until the receiver's newest export of name satisfies
// ok.
func waitMetric(t *testing.T, r *telemetrytest.Receiver, name string, ok func(telemetrytest.Metric) bool) telemetrytest.Metric {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if m, found := r.LastMetric(name); found && ok(m) {
			return m
		}
		if time.Now().After(deadline) {
			last, _ := r.LastMetric(name)
			t.Fatalf("no export of %s as expected within 10 s; last: %+v", name, last)
		}
		time.Sleep(10 * time.Millisecond) // polling the receiver, under the deadline above
	}
}

// TestSetupMetricsExports: the registry's series arrive over OTLP with
// their names, labels and kinds (a counter as a monotonic cumulative sum, a
// histogram with its buckets), under the service's resource, and follow
// the registry at each export: one implementation, two ways out.
func TestSetupMetricsExports(t *testing.T) {
	r := telemetrytest.NewReceiver(t)
	telemetrytest.Env(t, r)
	reg, c, g, h := testRegistry()
	c.WithLabelValues("mail").Add(3)
	g.Set(42)
	h.Observe(0.5)
	h.Observe(5)
	log, logs := newLog()
	_, enabled := telemetrytest.SetupMetrics(t, "sundial-test", reg, log)
	if !enabled {
		t.Fatal("metrics export off with OTEL_EXPORTER_OTLP_ENDPOINT set")
	}
	m := waitMetric(t, r, "sundial_test_jobs_total", func(m telemetrytest.Metric) bool { return len(m.Points) == 1 && m.Points[0].Value == 3 })
	if m.Kind != "sum" || !m.Monotonic || !m.Cumulative || m.Service != "sundial-test" || m.Points[0].Attrs["queue"] != "mail" {
		t.Errorf("counter arrived as %+v: want a monotonic cumulative sum of service sundial-test with queue=mail", m)
	}
	if m, ok := r.LastMetric("sundial_test_depth"); !ok || m.Kind != "gauge" || m.Points[0].Value != 42 {
		t.Errorf("gauge arrived as %+v, want 42", m)
	}
	hm, ok := r.LastMetric("sundial_test_latency_seconds")
	if !ok || hm.Kind != "histogram" || len(hm.Points) != 1 {
		t.Fatalf("histogram arrived as %+v", hm)
	}
	if p := hm.Points[0]; p.Count != 2 || p.Sum != 5.5 || fmt.Sprint(p.Bounds) != "[0.1 1 10]" || fmt.Sprint(p.Counts) != "[0 1 1 0]" {
		t.Errorf("histogram point %+v, want count 2, sum 5.5, bounds [0.1 1 10], per-bucket counts [0 1 1 0]", p)
	}
	// Later exports read the registry again.
	c.WithLabelValues("mail").Add(2)
	waitMetric(t, r, "sundial_test_jobs_total", func(m telemetrytest.Metric) bool { return len(m.Points) == 1 && m.Points[0].Value == 5 })
	if out := logs.String(); !strings.Contains(out, "metrics export on") {
		t.Errorf("log lacks the start line: %s", out)
	}
}

// TestSetupMetricsOff: with no OTEL_* variable, with the SDK disabled, and
// with OTEL_METRICS_EXPORTER=none or prometheus, nothing is exported even
// with an endpoint set; traces stay on with OTEL_METRICS_EXPORTER=none.
func TestSetupMetricsOff(t *testing.T) {
	for _, kv := range [][2]string{{"", ""}, {"OTEL_SDK_DISABLED", "true"}, {"OTEL_METRICS_EXPORTER", "none"}, {"OTEL_METRICS_EXPORTER", "prometheus"}} {
		t.Run(kv[0]+"="+kv[1], func(t *testing.T) {
			r := telemetrytest.NewReceiver(t)
			if kv[0] == "" {
				telemetrytest.ClearEnv(t)
			} else {
				telemetrytest.Env(t, r)
				t.Setenv(kv[0], kv[1])
			}
			reg, c, _, _ := testRegistry()
			c.WithLabelValues("mail").Inc()
			log, logs := newLog()
			stop, enabled := telemetrytest.SetupMetrics(t, "sundial-test", reg, log)
			if enabled {
				t.Fatal("metrics export on")
			}
			stop()
			if n := r.MetricRequests(); n != 0 {
				t.Fatalf("receiver got %d metric exports", n)
			}
			if logs.String() != "" {
				t.Errorf("logged while off: %s", logs)
			}
		})
	}
}

// TestSetupMetricsFlushesAtStop: with the default interval (a minute), stop
// still sends what the registry holds.
func TestSetupMetricsFlushesAtStop(t *testing.T) {
	r := telemetrytest.NewReceiver(t)
	telemetrytest.Env(t, r)
	t.Setenv("OTEL_METRIC_EXPORT_INTERVAL", "")
	reg, c, _, _ := testRegistry()
	c.WithLabelValues("mail").Add(7)
	log, _ := newLog()
	stop, _ := telemetrytest.SetupMetrics(t, "sundial-test", reg, log)
	if n := r.MetricRequests(); n != 0 {
		t.Fatalf("%d exports before the first interval", n)
	}
	stop()
	if m, ok := r.LastMetric("sundial_test_jobs_total"); !ok || m.Points[0].Value != 7 {
		t.Fatalf("after stop: %+v, want the counter at 7", m)
	}
}

// BenchmarkMetricsExport is the cost of one export (gather, convert, encode,
// POST to the in-process receiver) of a registry the size of an API's with
// 20 queues × 5 types, against the Prometheus text exposition of the same
// registry (one scrape of /metrics).
func BenchmarkMetricsExport(b *testing.B) {
	reg := apiSizedRegistry()
	b.Run("otlp", func(b *testing.B) {
		r := telemetrytest.NewReceiver(b)
		telemetrytest.Env(b, r)
		b.Setenv("OTEL_METRIC_EXPORT_INTERVAL", "3600000") // only the flushes below
		mp, err := telemetry.NewMeterProvider(context.Background(), "bench", reg)
		if err != nil || mp == nil {
			b.Fatalf("provider %v: %v", mp, err)
		}
		defer mp.Shutdown(context.Background())
		b.ReportAllocs()
		for b.Loop() {
			if err := mp.ForceFlush(context.Background()); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		if r.MetricRequests() == 0 {
			b.Fatal("no export reached the receiver")
		}
	})
	b.Run("prometheus_scrape", func(b *testing.B) {
		srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		defer srv.Close()
		b.ReportAllocs()
		for b.Loop() {
			res, err := http.Get(srv.URL)
			if err != nil {
				b.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
		}
	})
}

func apiSizedRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	labels := []string{"queue", "type"}
	var cs []*prometheus.CounterVec
	for _, n := range []string{"submitted", "succeeded", "failed", "dead", "lease_expired"} {
		c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sundial_bench_jobs_" + n + "_total", Help: n}, labels)
		reg.MustRegister(c)
		cs = append(cs, c)
	}
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "sundial_bench_job_duration_seconds", Help: "d",
		Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 1800}}, []string{"queue", "type", "outcome"})
	d := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "sundial_bench_queue_depth", Help: "d"}, []string{"queue", "state"})
	reg.MustRegister(h, d)
	for q := range 20 {
		for ty := range 5 {
			for _, c := range cs {
				c.WithLabelValues(fmt.Sprint("q", q), fmt.Sprint("t", ty)).Add(float64(q * ty))
			}
			h.WithLabelValues(fmt.Sprint("q", q), fmt.Sprint("t", ty), "succeeded").Observe(math.Mod(float64(q*ty), 7))
			h.WithLabelValues(fmt.Sprint("q", q), fmt.Sprint("t", ty), "failed").Observe(1)
		}
		for _, s := range []string{"queued", "scheduled", "active", "waiting", "dead", "throttled", "unhandled"} {
			d.WithLabelValues(fmt.Sprint("q", q), s).Set(float64(q))
		}
	}
	return reg
}
