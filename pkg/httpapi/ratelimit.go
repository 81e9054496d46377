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
)

// rateLimitPrefix starts the Redis keys of the rate limiter.
const rateLimitPrefix = "sundial:ratelimit"

// rateLimiter is a fixed-window request budget per identity that holds
// across API processes: the window's count lives in Redis
// (rateLimitPrefix:<identity>:<window>), and each process reserves it in
// chunks (INCRBY), which it then spends locally, so that most requests pay
// no Redis round trip (issue 54: one was a fifth of a REST submit's cost).
// Every request spends a reserved token, and Redis never reserves more
// than the limit a window, so the processes together never let more than
// the limit through; tokens a process reserved and did not spend by the
// window's end are lost (at most chunk−1 per process and identity a
// window). A limit under 40 a window reserves one token at a time: exact,
// as before.
type rateLimiter struct {
	rdb      redis.UniversalClient
	rate     limiter.Rate
	chunk    int64
	log      *slog.Logger
	lastWarn atomic.Int64 // unix ns of the last "limiter unavailable" warning

	mu     sync.Mutex
	budget map[string]*localBudget // identity → this window's reserved tokens
}

// localBudget is what this process holds of one identity's window.
type localBudget struct {
	window   int64 // the window's number (unix time / period)
	left     int64 // reserved tokens not spent yet
	reserved int64 // the window's count in Redis after this process's last reservation
	spent    bool  // Redis has no tokens left for the window
	// inflight is closed when the reservation in flight ends (nil: none).
	inflight chan struct{}
}

// rateChunk is how many tokens a process reserves at once: a twentieth of
// the limit, between 1 and 100.
func rateChunk(limit int64) int64 { return min(max(limit/20, 1), 100) }

// newRateLimiter returns nil when spec disables rate limiting ("" or "0").
func newRateLimiter(rdb redis.UniversalClient, spec string, log *slog.Logger) (*rateLimiter, error) {
	if spec == "" || spec == "0" {
		return nil, nil
	}
	rate, err := limiter.NewRateFromFormatted(spec)
	if err != nil || rate.Limit < 1 {
		return nil, fmt.Errorf("httpapi: rate limit %q must look like 1000-S, 50000-M, 100-H or 10000-D", spec)
	}
	return &rateLimiter{rdb: rdb, rate: rate, chunk: rateChunk(rate.Limit), log: log, budget: map[string]*localBudget{}}, nil
}

// take spends one token of identity's current window: ok, the tokens left
// (across processes, as far as this one knows) and the window's end (unix
// seconds). One reservation per identity is in flight at a time in this
// process; requests that find the local budget empty meanwhile wait for it
// instead of reserving chunks of their own.
func (r *rateLimiter) take(ctx context.Context, identity string) (ok bool, remaining, reset int64, err error) {
	period := r.rate.Period.Nanoseconds()
	w := time.Now().UnixNano() / period
	reset = (w + 1) * period / int64(time.Second)
	r.mu.Lock()
	for {
		b := r.current(identity, w)
		switch {
		case b.left > 0:
			b.left--
			remaining = r.rate.Limit - b.reserved + b.left
			r.mu.Unlock()
			return true, remaining, reset, nil
		case b.spent:
			r.mu.Unlock()
			return false, 0, reset, nil
		case b.inflight != nil:
			ch := b.inflight
			r.mu.Unlock()
			select {
			case <-ch:
			case <-ctx.Done():
				return false, 0, reset, ctx.Err()
			}
			r.mu.Lock()
			continue
		}
		b.inflight = make(chan struct{})
		r.mu.Unlock()
		n, err := r.reserve(ctx, identity, w)
		r.mu.Lock()
		close(b.inflight)
		b.inflight = nil
		if err != nil {
			r.mu.Unlock()
			return false, 0, reset, err
		}
		granted := r.chunk
		if n > r.rate.Limit {
			granted = max(0, r.rate.Limit-(n-r.chunk))
		}
		b.left += granted
		b.reserved = max(b.reserved, min(n, r.rate.Limit))
		if n >= r.rate.Limit && b.left == 0 {
			b.spent = true
		}
	}
}

// reserve counts a chunk of identity's window w in Redis and returns the
// window's count after it.
func (r *rateLimiter) reserve(ctx context.Context, identity string, w int64) (int64, error) {
	key := rateLimitPrefix + ":" + identity + ":" + strconv.FormatInt(w, 10)
	pipe := r.rdb.Pipeline()
	incr := pipe.IncrBy(ctx, key, r.chunk)
	pipe.PExpire(ctx, key, 2*r.rate.Period)
	if _, err := pipe.Exec(ctx); err != nil {
		return 0, err
	}
	return incr.Val(), nil
}

// current returns identity's budget for window w (r.mu held), forgetting
// the budgets of past windows now and then.
func (r *rateLimiter) current(identity string, w int64) *localBudget {
	b := r.budget[identity]
	if b == nil || b.window != w {
		if len(r.budget) >= 10_000 {
			for id, old := range r.budget {
				if old.window < w {
					delete(r.budget, id)
				}
			}
		}
		b = &localBudget{window: w}
		r.budget[identity] = b
	}
	return b
}

// rateLimit counts one request of identity, sets the X-RateLimit headers,
// and answers 429 with Retry-After when the budget is spent. It reports
// whether the request may go on. While Redis cannot be reached the request
// goes on without headers: the limit protects the API, and the request will
// meet the same outage in its handler.
func (s *Server) rateLimit(c *gin.Context, identity string) bool {
	ok, remaining, reset, err := s.limit.take(c.Request.Context(), identity)
	if err != nil {
		s.limit.warn(err)
		return true
	}
	h := c.Writer.Header()
	h.Set("X-RateLimit-Limit", strconv.FormatInt(s.limit.rate.Limit, 10))
	h.Set("X-RateLimit-Remaining", strconv.FormatInt(remaining, 10))
	h.Set("X-RateLimit-Reset", strconv.FormatInt(reset, 10))
	if ok {
		return true
	}
	wait := max(reset-time.Now().Unix(), 1)
	h.Set("Retry-After", strconv.FormatInt(wait, 10))
	s.metrics.rateLimited.Inc()
	fail(c, &apiError{Status: http.StatusTooManyRequests, Code: codeRateLimited,
		Message: fmt.Sprintf("rate limit of %s exceeded; retry in %d s", s.limit.rate.Formatted, wait)})
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
