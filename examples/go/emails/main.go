// Command emails sends welcome emails through Sundial: each email is a job
// with an idempotency key (submitting twice sends once), a flaky mail
// server fails some attempts and they are retried with backoff, and an
// address the server rejects for good goes dead at once (NoRetry) instead
// of being retried. It submits a few emails, runs them, prints how each
// ended, and exits.
//
//	go run ./examples/go/emails -redis 127.0.0.1:6379
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sundialhq/sundial"
)

// Email is the payload of an email.send job.
type Email struct {
	To      string `json:"to"`
	Subject string `json:"subject"`
	Body    string `json:"body"`
}

// errRejected is the mail server refusing an address for good.
var errRejected = errors.New("550 mailbox unavailable")

// send stands in for an SMTP client: a third of the attempts fail with a
// temporary error, and addresses at invalid.example are rejected.
func send(ctx context.Context, e Email) error {
	if strings.HasSuffix(e.To, "@invalid.example") {
		return errRejected
	}
	select {
	case <-ctx.Done(): // the job's timeout, a cancel, or shutdown
		return ctx.Err()
	case <-time.After(20 * time.Millisecond):
	}
	if rand.IntN(3) == 0 {
		return errors.New("421 service not available, try again later")
	}
	return nil
}

func main() {
	addr := flag.String("redis", "127.0.0.1:6379", "Redis `host:port`")
	flag.Parse()
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	rdb := redis.NewClient(&redis.Options{Addr: *addr})
	quiet := slog.New(slog.NewTextHandler(log.Writer(), &slog.HandlerOptions{Level: slog.LevelWarn}))

	r := sundial.NewRunner(rdb, sundial.RunnerConfig{Queues: []string{"emails"}, Concurrency: 20, Logger: quiet})
	sundial.HandleJSON(r, "email.send", func(ctx context.Context, e Email) (any, error) {
		err := send(ctx, e)
		if errors.Is(err, errRejected) {
			return nil, sundial.NoRetry(err) // retrying cannot help: dead at once
		}
		if err != nil {
			return nil, err // retried after a backoff, up to MaxAttempts
		}
		return map[string]int{"attempt": sundial.JobFrom(ctx).Attempt}, nil
	})
	go r.Run(ctx)

	c := sundial.NewClient(rdb)
	users := []string{"ada@example.com", "grace@example.com", "edsger@invalid.example", "barbara@example.com"}
	var ids []string
	for _, to := range users {
		sub, err := c.Submit(ctx, sundial.Job{
			Type:           "email.send",
			Queue:          "emails",
			Payload:        Email{To: to, Subject: "Welcome", Body: "Glad to have you."},
			MaxAttempts:    10,
			Timeout:        10 * time.Second,
			Backoff:        &sundial.Backoff{BaseSeconds: 0.1, MaxSeconds: 2},
			IdempotencyKey: "welcome:" + to, // a second signup request sends nothing more
		})
		if err != nil {
			log.Fatal(err)
		}
		ids = append(ids, sub.Job.ID)
	}

	for i, id := range ids {
		j, err := c.Wait(ctx, id)
		if err != nil {
			log.Fatal(err)
		}
		switch j.State {
		case sundial.Succeeded:
			fmt.Printf("%-24s sent (attempt %d)\n", users[i], j.Attempt)
		default:
			fmt.Printf("%-24s %s: %s\n", users[i], j.State, j.LastError)
		}
	}
}
