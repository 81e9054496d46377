// Command historian records Sundial's history: it copies every job event
// from the queues' Redis streams to MongoDB (pkg/history), where the API
// searches it. Run one or more; they share the queues and take over from
// one another (see docs/history.md).
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/sundialhq/sundial/internal/service"
	"github.com/sundialhq/sundial/pkg/history"
	"github.com/sundialhq/sundial/pkg/queue"
)

// retentionVar is read here until pkg/config's table has it.
const retentionVar = "SUNDIAL_HISTORY_RETENTION"

func main() {
	service.Main("historian", func(ctx context.Context, env *service.Env) error {
		c := env.Config
		retention, err := retentionFromEnv()
		if err != nil {
			return err
		}
		client, err := history.Connect(c.MongoURI)
		if err != nil {
			return err
		}
		defer func() {
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			_ = client.Disconnect(dctx)
		}()
		store := history.NewStore(client.Database(c.MongoDB), history.StoreOptions{Retention: retention, Logger: env.Log})
		q := queue.New(env.Redis, queue.Options{LeaseGrace: c.LeaseGrace, EventsMaxLen: c.EventsMaxLen})
		return history.NewWriter(q, store, history.WriterConfig{Logger: env.Log}).Run(ctx)
	})
}

// retentionFromEnv reads SUNDIAL_HISTORY_RETENTION (a Go duration, at
// least 1h; default history.DefaultRetention).
func retentionFromEnv() (time.Duration, error) {
	v := os.Getenv(retentionVar)
	if v == "" {
		return history.DefaultRetention, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < time.Hour {
		return 0, fmt.Errorf("%s=%q: must be a duration of at least 1h, e.g. 720h", retentionVar, v)
	}
	return d, nil
}
