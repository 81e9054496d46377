package sundial_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sundialhq/sundial/internal/mongotest"
	"github.com/sundialhq/sundial/pkg/queue"
	"github.com/sundialhq/sundial/pkg/queue/queuetest"
)

// redisAddr is the address of the private redis-server the examples and
// tests of this package use, started by TestMain.
var redisAddr string

func TestMain(m *testing.M) {
	s, stop, err := queuetest.StartMain()
	if err != nil {
		fmt.Fprintln(os.Stderr, "sundial tests:", err)
		os.Exit(1)
	}
	redisAddr = s.Addr()
	// The examples' Runners log to slog's default logger; their logs are
	// not part of what the examples print.
	slog.SetDefault(slog.New(slog.DiscardHandler))
	code := mongotest.Run(m) // starts PostgreSQL + FerretDB only if a test asks
	waitForWorkers(s.Addr())
	stop()
	os.Exit(code)
}

// waitForWorkers gives the Runners the examples left stopping (their
// context ended as the example returned) up to 5 s to leave the worker
// registry, so that none is cut off from Redis mid-shutdown.
func waitForWorkers(addr string) {
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	q := queue.New(rdb, queue.Options{})
	ctx := context.Background()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if ws, err := q.Workers(ctx, time.Minute); err != nil || len(ws) == 0 {
			return
		}
	}
}
