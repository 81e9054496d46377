package service

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/sundialhq/sundial/internal/buildinfo"
	"github.com/sundialhq/sundial/internal/deadline"
)

// Check is one readiness check: nil when the part it checks is usable.
type Check func(ctx context.Context) error

// Ops is the operations endpoint of a worker or poller: /metrics
// (Prometheus), /healthz (the process is alive) and /readyz (every check
// passes), on its own address.
type Ops struct {
	reg     *prometheus.Registry
	checks  map[string]Check
	details map[string]Detail
}

// Detail is a value /readyz reports beside the checks (e.g. the outbox
// relay's lag), informative only: it never makes the endpoint unready.
type Detail func(ctx context.Context) (any, error)

// NewOps returns an Ops serving the Go and process metrics plus cs.
func NewOps(cs ...prometheus.Collector) *Ops {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), buildinfo.Collector())
	reg.MustRegister(cs...)
	return &Ops{reg: reg, checks: map[string]Check{}, details: map[string]Detail{}}
}

// Gatherer returns the endpoint's metrics, for an export other than
// /metrics (telemetry.SetupMetrics).
func (o *Ops) Gatherer() prometheus.Gatherer { return o.reg }

// Register adds collectors to the endpoint's metrics.
func (o *Ops) Register(cs ...prometheus.Collector) { o.reg.MustRegister(cs...) }

// Check adds a named readiness check.
func (o *Ops) Check(name string, c Check) { o.checks[name] = c }

// Detail adds a named value to /readyz's "details", run beside the checks
// under the same bound (omitted when it fails or does not answer in time).
func (o *Ops) Detail(name string, d Detail) { o.details[name] = d }

// Handler returns the endpoint's routes.
func (o *Ops) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(o.reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
		defer cancel()
		errs := make(map[string]error, len(o.checks))
		var mu sync.Mutex
		var wg sync.WaitGroup
		for name, c := range o.checks {
			wg.Go(func() {
				err := deadline.Within(ctx, c)
				mu.Lock()
				errs[name] = err
				mu.Unlock()
			})
		}
		details := make(map[string]any, len(o.details))
		for name, d := range o.details {
			wg.Go(func() {
				var v any
				err := deadline.Within(ctx, func(ctx context.Context) (err error) {
					v, err = d(ctx)
					return err
				})
				if err == nil {
					mu.Lock()
					details[name] = v
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		status, code := map[string]string{}, http.StatusOK
		for name, err := range errs {
			if err != nil {
				// The reason stays in the log: probes may be public.
				slog.Warn("readiness check failed", "check", name, "err", err)
				status[name], code = "unavailable", http.StatusServiceUnavailable
			} else {
				status[name] = "ok"
			}
		}
		body := map[string]any{"status": map[bool]string{true: "ok", false: "unavailable"}[code == http.StatusOK], "checks": status}
		if len(o.details) > 0 {
			mu.Lock()
			body["details"] = details
			mu.Unlock()
		}
		writeJSON(w, code, body)
	})
	return mux
}

// readyTimeout bounds /readyz: the checks run at once, and one that has
// not answered by then fails (the chart's probes allow 3 s).
const readyTimeout = 2 * time.Second

// Serve serves the endpoint on ln (from ListenOps) until ctx ends, and
// logs the address it serves on.
func (o *Ops) Serve(ctx context.Context, ln net.Listener, log *slog.Logger) error {
	log.Info("operations endpoint listening", "url", "http://"+ln.Addr().String(), "paths", "/metrics /healthz /readyz")
	return serve(ctx, ln, o.Handler())
}

// AutoPorts is how many ports from its base an operations endpoint tries
// under SUNDIAL_METRICS_ADDR=auto before it takes any free port: the
// first workers on a host get the ports one expects (9092, 9093, …), and
// no worker ever stops for want of one.
const AutoPorts = 8

// ListenOps binds the operations endpoint of SUNDIAL_METRICS_ADDR (addr):
// nil for off; for auto (or empty) the first free port of 127.0.0.1:base,
// base+1, … (AutoPorts of them), else any free port, so that several
// workers on one host each get one; any other value is bound as given and
// an error returned when it cannot be, as the operator chose it.
func ListenOps(addr string, base int) (net.Listener, error) {
	switch addr {
	case "off":
		return nil, nil
	case "auto", "":
		return listenFirstFree("127.0.0.1", base, AutoPorts)
	}
	return net.Listen("tcp", addr)
}

// listenFirstFree listens on the first port of host:base … base+n-1 that
// is free, or else on a port the kernel picks.
func listenFirstFree(host string, base, n int) (net.Listener, error) {
	for p := base; p < base+n; p++ {
		if ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(p))); err == nil {
			return ln, nil
		}
	}
	return net.Listen("tcp", net.JoinHostPort(host, "0"))
}

// MetricsURL returns the URL of the /metrics that an endpoint on ln
// serves, for the worker registry: a wildcard address (0.0.0.0, [::]) is
// named by the host's name, which is how other hosts reach it.
func MetricsURL(ln net.Listener) string {
	a, ok := ln.Addr().(*net.TCPAddr)
	if !ok {
		return ""
	}
	host := a.IP.String()
	if a.IP.IsUnspecified() {
		if h, err := os.Hostname(); err == nil && h != "" {
			host = h
		}
	}
	return "http://" + net.JoinHostPort(host, strconv.Itoa(a.Port)) + "/metrics"
}

// serve serves h on ln until ctx ends, then shuts down: requests in flight
// get a second to finish, and whatever still streams then is cut off.
func serve(ctx context.Context, ln net.Listener, h http.Handler) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		if srv.Shutdown(sctx) != nil {
			_ = srv.Close()
		}
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}
