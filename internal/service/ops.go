package service

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Check is one readiness check: nil when the part it checks is usable.
type Check func(ctx context.Context) error

// Ops is the operations endpoint of a worker or poller: /metrics
// (Prometheus), /healthz (the process is alive) and /readyz (every check
// passes), on its own address.
type Ops struct {
	reg    *prometheus.Registry
	checks map[string]Check
}

// NewOps returns an Ops serving the Go and process metrics plus cs.
func NewOps(cs ...prometheus.Collector) *Ops {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	reg.MustRegister(cs...)
	return &Ops{reg: reg, checks: map[string]Check{}}
}

// Register adds collectors to the endpoint's metrics.
func (o *Ops) Register(cs ...prometheus.Collector) { o.reg.MustRegister(cs...) }

// Check adds a named readiness check.
func (o *Ops) Check(name string, c Check) { o.checks[name] = c }

// Handler returns the endpoint's routes.
func (o *Ops) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(o.reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		status, code := map[string]string{}, http.StatusOK
		for name, c := range o.checks {
			if err := c(ctx); err != nil {
				// The reason stays in the log: probes may be public.
				slog.Warn("readiness check failed", "check", name, "err", err)
				status[name], code = "unavailable", http.StatusServiceUnavailable
			} else {
				status[name] = "ok"
			}
		}
		writeJSON(w, code, map[string]any{"status": map[bool]string{true: "ok", false: "unavailable"}[code == http.StatusOK], "checks": status})
	})
	return mux
}

// Serve listens on addr and serves until ctx ends. The address it bound
// (port 0 picks a free one) is logged.
func (o *Ops) Serve(ctx context.Context, addr string, log *slog.Logger) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	log.Info("operations endpoint listening", "url", "http://"+ln.Addr().String(), "paths", "/metrics /healthz /readyz")
	return serve(ctx, ln, o.Handler())
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
