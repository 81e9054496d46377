package httpapi

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sundialhq/sundial/pkg/queue/queuetest"
)

func TestRateLimit(t *testing.T) {
	a := start(t, func(c *Config) {
		c.RateLimit = "3-M"
		c.APIKeys = []string{"k1", "k2"}
	})
	k1 := []string{"Authorization", "Bearer k1"}
	for i := 0; i < 3; i++ {
		res := a.do("POST", "/v1/jobs/batch", map[string]any{"jobs": []any{map[string]any{"type": "a"}, map[string]any{"type": "b"}}}, k1...)
		res.decode(t, http.StatusCreated, nil)
		if res.header.Get("X-RateLimit-Limit") != "3" || res.header.Get("X-RateLimit-Remaining") != strconv.Itoa(2-i) {
			t.Fatalf("request %d: limit %q remaining %q", i, res.header.Get("X-RateLimit-Limit"), res.header.Get("X-RateLimit-Remaining"))
		}
		reset, err := strconv.ParseInt(res.header.Get("X-RateLimit-Reset"), 10, 64)
		if err != nil || reset < time.Now().Unix() || reset > time.Now().Add(61*time.Second).Unix() {
			t.Fatalf("X-RateLimit-Reset %q", res.header.Get("X-RateLimit-Reset"))
		}
	}
	res := a.do("GET", "/v1/queues", nil, k1...)
	res.wantError(t, http.StatusTooManyRequests, codeRateLimited, "")
	retry, err := strconv.Atoi(res.header.Get("Retry-After"))
	if err != nil || retry < 1 || retry > 60 {
		t.Fatalf("Retry-After %q", res.header.Get("Retry-After"))
	}
	if res.header.Get("X-RateLimit-Remaining") != "0" {
		t.Errorf("remaining %q", res.header.Get("X-RateLimit-Remaining"))
	}
	// Another key has its own budget; health needs none.
	a.do("GET", "/v1/queues", nil, "Authorization", "Bearer k2").decode(t, http.StatusOK, nil)
	for range 5 {
		a.do("GET", "/healthz", nil).decode(t, http.StatusOK, nil)
	}
	// Wrong keys are throttled per IP in a bucket of their own, with headers.
	for i := range 3 {
		res := a.do("GET", "/v1/queues", nil, "Authorization", "Bearer guess"+strconv.Itoa(i))
		res.wantError(t, http.StatusUnauthorized, codeUnauthenticated, "")
		if res.header.Get("X-RateLimit-Limit") != "3" {
			t.Fatal("401 without rate-limit headers")
		}
	}
	a.do("GET", "/v1/queues", nil, "Authorization", "Bearer guess").wantError(t, http.StatusTooManyRequests, codeRateLimited, "")
	// Only digests of the keys reach Redis.
	keys, err := a.redis.Client().Keys(context.Background(), rateLimitPrefix+":*").Result()
	if err != nil || len(keys) != 3 {
		t.Fatalf("limiter keys %v %v", keys, err)
	}
	for _, k := range keys {
		if strings.Contains(k, "k1") || strings.Contains(k, "k2") {
			t.Fatalf("a raw key in Redis: %s", k)
		}
	}
	if !strings.Contains(gather(t, a), "sundial_http_rate_limited_total 2") {
		t.Error("429s not counted")
	}
}

func TestRateLimitSharedAcrossInstances(t *testing.T) {
	t.Parallel()
	srv := queuetest.Start(t)
	limit := func(c *Config) { c.RateLimit = "10-M"; c.APIKeys = []string{"shared"} }
	a := startOn(t, srv, limit)
	b := startOn(t, srv, limit)
	key := []string{"Authorization", "Bearer shared"}
	codes := map[int]int{}
	for i := range 12 {
		api := a
		if i%2 == 1 {
			api = b
		}
		res := api.do("GET", "/v1/queues", nil, key...)
		codes[res.status]++
		if res.status == http.StatusTooManyRequests && res.header.Get("Retry-After") == "" {
			t.Fatal("429 without Retry-After")
		}
	}
	if codes[http.StatusOK] != 10 || codes[http.StatusTooManyRequests] != 2 {
		t.Fatalf("two instances with a shared limit of 10 answered %v", codes)
	}
}

func TestRateLimitOff(t *testing.T) {
	a := start(t) // RateLimit "0"
	res := a.do("GET", "/v1/queues", nil)
	if res.status != http.StatusOK || res.header.Get("X-RateLimit-Limit") != "" {
		t.Fatalf("%d %v", res.status, res.header)
	}
	if _, err := New(Config{Queue: a.q, RateLimit: "lots", Logger: discardLogger()}); err == nil {
		t.Fatal("a bad rate limit was accepted")
	}
}

func TestRateLimitPerIPWhenOpen(t *testing.T) {
	a := start(t, func(c *Config) { c.RateLimit = "2-M" })
	a.do("GET", "/v1/queues", nil).decode(t, http.StatusOK, nil)
	a.do("GET", "/v1/workers", nil).decode(t, http.StatusOK, nil)
	a.do("GET", "/v1/queues", nil).wantError(t, http.StatusTooManyRequests, codeRateLimited, "")
	keys, _ := a.redis.Client().Keys(context.Background(), rateLimitPrefix+":ip:*").Result()
	if len(keys) != 1 || !strings.HasPrefix(keys[0], rateLimitPrefix+":ip:127.0.0.1:") { // :<window>
		t.Fatalf("%v", keys)
	}
}

// Three API processes' limiters over one Redis, 1,000 a minute, 1,500
// requests at once: never more than 1,000 pass, at most a chunk per
// process is left unspent, and most requests cost no Redis call.
func TestRateLimitReservesInChunks(t *testing.T) {
	t.Parallel()
	srv := queuetest.Start(t)
	var lims []*rateLimiter
	for range 3 {
		l, err := newRateLimiter(srv.Client(), "1000-M", discardLogger())
		if err != nil {
			t.Fatal(err)
		}
		lims = append(lims, l)
	}
	ctx := context.Background()
	before, _ := srv.Client().Info(ctx, "commandstats").Result()
	var passed atomic.Int64
	var wg sync.WaitGroup
	for i := range 1500 {
		wg.Go(func() {
			ok, _, _, err := lims[i%3].take(ctx, "key:k")
			if err != nil {
				t.Error(err)
			}
			if ok {
				passed.Add(1)
			}
		})
	}
	wg.Wait()
	chunk := rateChunk(1000)
	if n := passed.Load(); n > 1000 || n < 1000-3*chunk {
		t.Fatalf("%d requests passed a limit of 1000 (chunk %d, 3 processes)", n, chunk)
	}
	after, _ := srv.Client().Info(ctx, "commandstats").Result()
	if calls := incrbyCalls(after) - incrbyCalls(before); calls > 1500/5 {
		t.Fatalf("%d INCRBY calls for 1,500 requests", calls)
	}
}

// incrbyCalls reads INCRBY's call count from INFO commandstats.
func incrbyCalls(info string) int {
	for _, line := range strings.Split(info, "\n") {
		if rest, ok := strings.CutPrefix(line, "cmdstat_incrby:calls="); ok {
			n, _ := strconv.Atoi(rest[:strings.IndexByte(rest, ',')])
			return n
		}
	}
	return 0
}
