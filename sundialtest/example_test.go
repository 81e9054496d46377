package sundialtest_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sundialhq/sundial"
	"github.com/sundialhq/sundial/pkg/queue/queuetest"
	"github.com/sundialhq/sundial/sundialtest"
)

// redisAddr is the private redis-server of the examples, started by TestMain.
var redisAddr string

func TestMain(m *testing.M) {
	s, stop, err := queuetest.StartMain()
	if err != nil {
		fmt.Fprintln(os.Stderr, "sundialtest tests:", err)
		os.Exit(1)
	}
	redisAddr = s.Addr()
	slog.SetDefault(slog.New(slog.DiscardHandler))
	code := m.Run()
	stop()
	os.Exit(code)
}

// A handler in a plain unit test, no Redis: the result tells the outcome a
// worker would report, and the progress the handler made.
func ExampleWorkArgs() {
	send := func(ctx context.Context, inv Invoice) (any, error) {
		if inv.Cents == 0 {
			return nil, sundial.NoRetry(errors.New("nothing to bill"))
		}
		_ = sundial.Progress(ctx, 100, "sent")
		return inv.Cents, nil
	}
	t := &testing.T{} // in a test, the test's own t
	ok := sundialtest.WorkArgs(context.Background(), t, send, Invoice{Customer: "ada", Cents: 250})
	bad := sundialtest.WorkArgs(context.Background(), t, send, Invoice{Customer: "ada"})
	fmt.Println(ok.Outcome, ok.Value, ok.Progress)
	fmt.Println(bad.Outcome, bad.Err)
	// Output:
	// succeeded 250 [{100 sent}]
	// dead nothing to bill
}

// Drain runs a queue's jobs in the test's goroutine, a day's delay and
// the retries' backoff included (its clock jumps ahead), and
// RequireSubmitted checks what a handler submitted.
func ExampleDrain() {
	ctx := context.Background()
	t := &testing.T{} // in a test, the test's own t
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	c := sundial.NewClient(rdb)
	r := sundial.NewRunner(rdb, sundial.RunnerConfig{Queues: []string{"signup"}})
	r.HandleFunc("user.welcome", func(ctx context.Context, j *sundial.Record) (any, error) {
		_, err := c.Submit(ctx, sundial.Job{Type: "user.nudge", Queue: "signup", Delay: 72 * time.Hour})
		return nil, err
	})
	r.HandleFunc("user.nudge", func(ctx context.Context, j *sundial.Record) (any, error) { return "nudged", nil })

	if _, err := c.Submit(ctx, sundial.Job{Type: "user.welcome", Queue: "signup"}); err != nil {
		panic(err)
	}
	for _, a := range sundialtest.Drain(ctx, t, r, "signup") {
		fmt.Println(a.Job.Type, a.Outcome, a.State)
	}
	nudges := sundialtest.RequireSubmitted(ctx, t, c, "user.nudge", nil)
	fmt.Println(len(nudges), nudges[0].State)
	// Output:
	// user.welcome succeeded succeeded
	// user.nudge succeeded succeeded
	// 1 succeeded
}
