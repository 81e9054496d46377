package httpapi

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"syscall"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/sundialhq/sundial/internal/deadline"
)

// healthBody is the answer of GET /healthz.
type healthBody struct {
	Status string `json:"status"`
}

// readiness is the answer of GET /readyz.
type readiness struct {
	Status string                `json:"status"`
	Checks map[string]readyCheck `json:"checks"`
	Error  *errorDetail          `json:"error,omitempty"`
}

// readyCheck is one dependency's state: ok, down or not_configured, with
// the kind of failure (timeout, connection refused, error) — never the
// underlying error, which goes to the log.
type readyCheck struct {
	Status string `json:"status"`
	Detail string `json:"detail,omitempty"`
}

// readyTimeout bounds /readyz: a dependency that has not answered by then
// is down (timeout), so the probe answers within it whatever the
// dependency does (Kubernetes gives a probe 1 s by default).
const readyTimeout = time.Second

// healthz handles GET /healthz: 200 while the process runs.
func (s *Server) healthz(c *gin.Context) {
	c.JSON(http.StatusOK, healthBody{Status: "ok"})
}

// readyz handles GET /readyz: 200 when Redis (and the history store, when
// configured) answer; otherwise 503 naming what fails.
func (s *Server) readyz(c *gin.Context) {
	ctx, cancel := context.WithTimeout(c.Request.Context(), readyTimeout)
	defer cancel()
	var redisErr, historyErr error
	var wg sync.WaitGroup
	wg.Go(func() {
		redisErr = deadline.Within(ctx, func(ctx context.Context) error { return s.q.Redis().Ping(ctx).Err() })
	})
	if s.cfg.History != nil {
		wg.Go(func() { historyErr = deadline.Within(ctx, s.cfg.History.Ping) })
	}
	wg.Wait()

	out := readiness{Status: "ok", Checks: map[string]readyCheck{"redis": s.check("redis", redisErr)}}
	if s.cfg.History != nil {
		out.Checks["history"] = s.check("history", historyErr)
	} else {
		out.Checks["history"] = readyCheck{Status: "not_configured"}
	}
	var down []string
	if redisErr != nil {
		down = append(down, "redis")
	}
	if historyErr != nil {
		down = append(down, "history")
	}
	if len(down) == 0 {
		c.JSON(http.StatusOK, out)
		return
	}
	out.Status = "unavailable"
	msg := "not ready: " + down[0]
	if len(down) > 1 {
		msg += " and " + down[1]
	}
	msg += " unavailable"
	out.Error = &errorDetail{Code: codeUnavailable, Message: msg}
	c.JSON(http.StatusServiceUnavailable, out)
}

func (s *Server) check(name string, err error) readyCheck {
	if err == nil {
		return readyCheck{Status: "ok"}
	}
	s.log.Warn("readiness check failed", "dependency", name, "err", err)
	return readyCheck{Status: "down", Detail: failureKind(err)}
}

// failureKind names the kind of a dependency failure without its details.
func failureKind(err error) string {
	switch {
	case errors.Is(err, context.DeadlineExceeded), isTimeout(err):
		return "timeout"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case unavailable(err):
		return "unreachable"
	}
	return "error"
}

func isTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}
