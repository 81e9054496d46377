package service

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
)

// pprofHandler serves Go's profiling endpoints under /debug/pprof/ on a mux
// of its own: net/http/pprof also registers them on http.DefaultServeMux,
// which no Sundial listener serves, so they are reachable only here.
func pprofHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index) // heap, goroutine, allocs, block, mutex, threadcreate
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}

// startPprof listens on addr (SUNDIAL_PPROF_ADDR) and serves the profiling
// endpoints until ctx ends. Binding happens before it returns, so a taken
// or invalid address stops the binary at start instead of going unnoticed.
func startPprof(ctx context.Context, addr string, log *slog.Logger) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	log.Info("profiling endpoint listening", "url", "http://"+ln.Addr().String()+"/debug/pprof/")
	go func() {
		// A CPU profile or trace streams for as long as asked (?seconds=N):
		// serve sets no write timeout.
		if err := serve(ctx, ln, pprofHandler()); err != nil {
			log.Error("profiling endpoint stopped", "err", err)
		}
	}()
	return nil
}
