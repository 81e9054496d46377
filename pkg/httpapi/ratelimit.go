package httpapi

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/redis/go-redis/v9"
	"github.com/ulule/limiter/v3"
	redisstore "github.com/ulule/limiter/v3/drivers/store/redis"
)

// rateLimitPrefix starts the Redis keys of the rate limiter.
const rateLimitPrefix = "sundial:ratelimit"

// rateLimiter is a fixed-window request budget per identity, kept in Redis
// by ulule/limiter so that it holds across API processes.
type rateLimiter struct {
	lim      *limiter.Limiter
	log      *slog.Logger
	lastWarn atomic.Int64 // unix ns of the last "limiter unavailable" warning
}

// newRateLimiter returns nil when spec disables rate limiting ("" or "0").
func newRateLimiter(rdb redis.UniversalClient, spec string, log *slog.Logger) (*rateLimiter, error) {
	if spec == "" || spec == "0" {
		return nil, nil
	}
	rate, err := limiter.NewRateFromFormatted(spec)
	if err != nil || rate.Limit < 1 {
		return nil, fmt.Errorf("httpapi: rate limit %q must look like 1000-S, 50000-M, 100-H or 10000-D", spec)
	}
	return &rateLimiter{lim: limiter.New(&lazyStore{rdb: rdb}, rate), log: log}, nil
}

// rateLimit counts one request of identity, sets the X-RateLimit headers,
// and answers 429 with Retry-After when the budget is spent. It reports
// whether the request may go on. While Redis cannot be reached the request
// goes on without headers: the limit protects the API, and the request will
// meet the same outage in its handler.
func (s *Server) rateLimit(c *gin.Context, identity string) bool {
	lc, err := s.limit.lim.Get(c.Request.Context(), identity)
	if err != nil {
		s.limit.warn(err)
		return true
	}
	h := c.Writer.Header()
	h.Set("X-RateLimit-Limit", strconv.FormatInt(lc.Limit, 10))
	h.Set("X-RateLimit-Remaining", strconv.FormatInt(lc.Remaining, 10))
	h.Set("X-RateLimit-Reset", strconv.FormatInt(lc.Reset, 10))
	if !lc.Reached {
		return true
	}
	wait := max(lc.Reset-time.Now().Unix(), 1)
	h.Set("Retry-After", strconv.FormatInt(wait, 10))
	s.metrics.rateLimited.Inc()
	fail(c, &apiError{Status: http.StatusTooManyRequests, Code: codeRateLimited,
		Message: fmt.Sprintf("rate limit of %s exceeded; retry in %d s", s.limit.lim.Rate.Formatted, wait)})
	return false
}

// warn logs a limiter failure at most once every 10 seconds.
func (r *rateLimiter) warn(err error) {
	now := time.Now().UnixNano()
	last := r.lastWarn.Load()
	if now-last < int64(10*time.Second) || !r.lastWarn.CompareAndSwap(last, now) {
		return
	}
	r.log.Warn("rate limiter unavailable; letting requests through", "err", err)
}

// lazyStore builds limiter's Redis store on first use and again after a
// failure: the store loads its Lua scripts when built, and the API must
// start (and serve /healthz) while Redis is down.
type lazyStore struct {
	rdb   redis.UniversalClient
	mu    sync.Mutex
	store atomic.Pointer[limiter.Store]
}

func (l *lazyStore) get() (limiter.Store, error) {
	if st := l.store.Load(); st != nil {
		return *st, nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if st := l.store.Load(); st != nil {
		return *st, nil
	}
	st, err := redisstore.NewStoreWithOptions(l.rdb, limiter.StoreOptions{Prefix: rateLimitPrefix})
	if err != nil {
		return nil, err
	}
	l.store.Store(&st)
	return st, nil
}

// Get counts one request and returns the budget left.
func (l *lazyStore) Get(ctx context.Context, key string, rate limiter.Rate) (limiter.Context, error) {
	st, err := l.get()
	if err != nil {
		return limiter.Context{}, err
	}
	return st.Get(ctx, key, rate)
}

// Peek returns the budget left without counting.
func (l *lazyStore) Peek(ctx context.Context, key string, rate limiter.Rate) (limiter.Context, error) {
	st, err := l.get()
	if err != nil {
		return limiter.Context{}, err
	}
	return st.Peek(ctx, key, rate)
}

// Reset forgets key's count.
func (l *lazyStore) Reset(ctx context.Context, key string, rate limiter.Rate) (limiter.Context, error) {
	st, err := l.get()
	if err != nil {
		return limiter.Context{}, err
	}
	return st.Reset(ctx, key, rate)
}

// Increment counts n requests.
func (l *lazyStore) Increment(ctx context.Context, key string, n int64, rate limiter.Rate) (limiter.Context, error) {
	st, err := l.get()
	if err != nil {
		return limiter.Context{}, err
	}
	return st.Increment(ctx, key, n, rate)
}
