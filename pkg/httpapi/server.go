// Package httpapi is Sundial's HTTP API: the REST routes of docs/api.md over
// the Redis engine, with bearer-key auth, rate limiting, request ids and
// access logs, Prometheus metrics and the live websocket stream.
// services/api wires it to the environment; other programs can embed it.
package httpapi

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/sundialhq/sundial/pkg/audit"
	"github.com/sundialhq/sundial/pkg/history"
	"github.com/sundialhq/sundial/pkg/queue"
	"github.com/sundialhq/sundial/web"
)

// Defaults of Config.
const (
	DefaultMaxBodyBytes    = 1 << 20
	DefaultShutdownTimeout = 30 * time.Second
	// DefaultRequestTimeout is Config.RequestTimeout's default: a request
	// answers within ~1.5 s even when Redis stops answering.
	DefaultRequestTimeout = time.Second
	DefaultWorkerMaxAge   = 15 * time.Second
)

// Config configures a Server. Queue is required; every other field has a
// usable zero value.
type Config struct {
	// Queue is the Redis engine the API drives. Required.
	Queue *queue.Client
	// History answers history queries: GET /v1/jobs, a job's events, and
	// finished jobs that have left Redis. Nil when no history store is
	// configured; the history routes then answer 503.
	History history.Reader
	// Audit keeps the audit log's records (an *audit.Store in the history
	// store's database). Nil: each record is written to Logger as an
	// "audit" line, so that none is lost.
	Audit audit.Sink
	// AuditLog answers GET /v1/audit; nil makes it answer 503.
	AuditLog audit.Reader
	// OIDC turns on the dashboard's sign-in with OpenID Connect; nil for
	// none (API keys only).
	OIDC *OIDCConfig
	// APIKeys are the accepted bearer keys. None means an open API, which
	// New announces with a warning.
	APIKeys []string
	// RateLimit is the request budget per API key (or per client IP when the
	// API is open) in ulule/limiter's format: "1000-S", "50000-M". Empty or
	// "0" disables rate limiting.
	RateLimit string
	// AllowedOrigins are browser origins allowed to open the websocket
	// besides the API's own host, e.g. "http://localhost:5173"; host
	// patterns such as "*.example.com" work too.
	AllowedOrigins []string
	// TrustedProxies are the proxies (IPs or CIDRs) whose X-Forwarded-For
	// is believed for the client IP. None: the peer address is the client.
	TrustedProxies []string
	// MaxBodyBytes bounds a request body (default 1 MiB);
	// MaxBatchBodyBytes bounds POST /v1/jobs/batch (default 16×MaxBodyBytes).
	MaxBodyBytes      int64
	MaxBatchBodyBytes int64
	// ShutdownTimeout is how long Run lets in-flight requests finish after
	// its context ends. Default 30 s; a negative value means no wait.
	ShutdownTimeout time.Duration
	// RequestTimeout bounds a request's wait for Redis: past it the request
	// answers 503 unavailable (a Redis that accepts bytes and answers
	// nothing, stopped or cut off). Routes marked Long are exempt. Default
	// DefaultRequestTimeout.
	RequestTimeout time.Duration
	// WorkerMaxAge drops workers not seen for this long from GET
	// /v1/workers: three heartbeats. Default 15 s.
	WorkerMaxAge time.Duration
	// Logger receives the access log and errors. Default slog.Default().
	Logger *slog.Logger
	// Stream tunes the websocket stream.
	Stream StreamOptions
	// Dashboard is the built web app served at / (index.html, assets/).
	// Nil means the one embedded in package web, which is itself empty
	// when web/ was not built: / then says how to build it.
	Dashboard fs.FS
}

// StreamOptions tune GET /v1/stream. Zero fields take their defaults.
type StreamOptions struct {
	// ClientBuffer is how many messages may wait for one client; a client
	// that falls further behind is disconnected. Default 256.
	ClientBuffer int
	// StatsInterval is the period of the stats message. Default 1 s.
	StatsInterval time.Duration
	// DiscoverInterval is how often the event reader looks for new
	// queues. Default 1 s.
	DiscoverInterval time.Duration
	// PingInterval is the websocket keepalive period. Default 20 s.
	PingInterval time.Duration
	// WriteTimeout bounds one write or ping to a client. Default 10 s.
	WriteTimeout time.Duration
}

func (o *StreamOptions) fill() {
	if o.ClientBuffer <= 0 {
		o.ClientBuffer = 256
	}
	if o.StatsInterval <= 0 {
		o.StatsInterval = time.Second
	}
	if o.DiscoverInterval <= 0 {
		o.DiscoverInterval = time.Second
	}
	if o.PingInterval <= 0 {
		o.PingInterval = 20 * time.Second
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = 10 * time.Second
	}
}

func (c *Config) fill() error {
	if c.Queue == nil {
		return errors.New("httpapi: Config.Queue is required")
	}
	if c.MaxBodyBytes <= 0 {
		c.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if c.MaxBatchBodyBytes <= 0 {
		c.MaxBatchBodyBytes = 16 * c.MaxBodyBytes
	}
	if c.ShutdownTimeout == 0 {
		c.ShutdownTimeout = DefaultShutdownTimeout
	}
	if c.RequestTimeout <= 0 {
		c.RequestTimeout = DefaultRequestTimeout
	}
	if c.WorkerMaxAge <= 0 {
		c.WorkerMaxAge = DefaultWorkerMaxAge
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	c.Stream.fill()
	if c.Audit == nil {
		c.Audit = audit.Log{Logger: c.Logger}
	}
	if c.Dashboard == nil {
		c.Dashboard = web.Dist()
	}
	return nil
}

// Server is the HTTP API. Build it with New, serve it with Run.
type Server struct {
	cfg     Config
	q       *queue.Client
	log     *slog.Logger
	engine  *gin.Engine
	auth    *authenticator
	oidc    *oidcAuth // nil without sign-in
	audit   audit.Sink
	limit   *rateLimiter // nil when rate limiting is off
	metrics *metrics
	hub     *hub
	dash    *dashboard
	backlog *history.Monitor // measures the history backlog for GET /v1/history/backlog
	wake    *wakeups         // long-polling claims of HTTP workers
	seen    seenWorkers      // HTTP workers' registry writes, throttled
	started sync.Once
	// deadlines are the routes' own request deadlines by "METHOD path": 0
	// for none (operation.Long), more for operation.Many; the others have
	// Config.RequestTimeout.
	deadlines map[string]time.Duration
}

// New builds a Server from cfg. It returns an error for an invalid
// configuration (a bad rate limit or proxy list); it does not contact Redis.
func New(cfg Config) (*Server, error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, q: cfg.Queue, log: cfg.Logger, auth: newAuthenticator(cfg.APIKeys), audit: cfg.Audit, deadlines: map[string]time.Duration{}}
	s.metrics = newMetrics()
	s.metrics.reg.MustRegister(newEngineCollector(cfg.Queue))
	s.dash = newDashboard(cfg.Dashboard)
	s.backlog = history.NewMonitor(cfg.Queue, history.MonitorConfig{Logger: s.log})
	s.wake = newWakeups(cfg.Queue, s.log)
	if cfg.OIDC != nil {
		o, err := newOIDCAuth(*cfg.OIDC)
		if err != nil {
			return nil, fmt.Errorf("httpapi: %w", err)
		}
		s.oidc = o
	}
	lim, err := newRateLimiter(cfg.Queue.Redis(), cfg.RateLimit, s.log)
	if err != nil {
		return nil, err
	}
	s.limit = lim
	s.hub = newHub(cfg.Queue, cfg.Stream, cfg.WorkerMaxAge, s.metrics, s.log)
	if s.engine, err = s.newEngine(); err != nil {
		return nil, err
	}
	if s.open() {
		s.log.Warn("the API is open: SUNDIAL_API_KEYS is empty, so every /v1 route is served without authentication; set keys outside local development")
	}
	if s.limit == nil {
		s.log.Info("rate limiting is off")
	}
	return s, nil
}

// Handler returns the API's HTTP handler. The live stream and the
// queue-depth metrics run only while Run runs.
func (s *Server) Handler() http.Handler { return s.engine }

// Run serves the API on ln until ctx ends, then shuts down gracefully: it
// stops accepting connections, closes websockets with status 1001, and lets
// in-flight requests finish for up to Config.ShutdownTimeout. It returns
// nil after a clean shutdown. A Server runs at most once.
func (s *Server) Run(ctx context.Context, ln net.Listener) error {
	first := false
	s.started.Do(func() { first = true })
	if !first {
		return errors.New("httpapi: Server.Run called twice")
	}
	// The API registers as a reader of the storage format while it serves:
	// a Redis holding a format this release does not read stops it, as a
	// signal does, and Run returns the *queue.FormatError.
	ctx, reg := s.cfg.Queue.Register(ctx, "api", s.log)
	defer reg.Close()
	// Requests keep their context while they drain; the base context ends
	// only when the drain is over.
	base, cancelBase := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelBase()
	srv := &http.Server{
		Handler:           s.engine,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
		BaseContext:       func(net.Listener) context.Context { return base },
	}
	s.recordKeys(ctx)
	s.wake.start(base)
	hubDone := s.hub.start(base) // running before the first request
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()

	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-served:
	}
	s.log.Info("shutting down the API", "timeout", s.cfg.ShutdownTimeout.String())
	s.wake.close() // long polls answer now instead of holding the drain
	drain, cancelDrain := context.WithTimeout(base, max(s.cfg.ShutdownTimeout, 0))
	defer cancelDrain()
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		s.hub.closeClients(drain)
	}()
	if err := srv.Shutdown(drain); err != nil {
		s.log.Warn("in-flight requests did not finish in time; closing them", "err", err)
		_ = srv.Close()
	}
	<-closed
	cancelBase()
	<-hubDone
	if serveErr == nil {
		serveErr = <-served
	}
	if err := reg.Close(); err != nil {
		return err
	}
	if errors.Is(serveErr, http.ErrServerClosed) {
		return nil
	}
	return fmt.Errorf("serve: %w", serveErr)
}
