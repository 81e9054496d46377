// Command nightly builds a report every night at 03:00 Berlin time: it
// stores a recurring schedule (a cron expression in a time zone; storing it
// again replaces it) and runs the jobs the schedule submits. The Runner
// fires the schedule (one Runner or poller of a deployment leads, the
// others stand by), so this program alone keeps the nightly report going.
// With -now it also triggers one run at once, waits for it and exits.
//
//	go run ./examples/go/nightly -redis 127.0.0.1:6379 -now
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"os"
	"os/signal"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sundialhq/sundial"
	"github.com/sundialhq/sundial/pkg/schedule"
)

// Report is the payload of a report.build job.
type Report struct {
	Kind string `json:"kind"`
}

func main() {
	addr := flag.String("redis", "127.0.0.1:6379", "Redis `host:port`")
	now := flag.Bool("now", false, "trigger one run now, wait for it and exit")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	rdb := redis.NewClient(&redis.Options{Addr: *addr})
	quiet := slog.New(slog.NewTextHandler(log.Writer(), &slog.HandlerOptions{Level: slog.LevelWarn}))

	r := sundial.NewRunner(rdb, sundial.RunnerConfig{Queues: []string{"reports"}, Logger: quiet})
	sundial.HandleJSON(r, "report.build", func(ctx context.Context, rep Report) (any, error) {
		j := sundial.JobFrom(ctx)
		// run_at is the fire time the job stands for, even when it runs late.
		return map[string]string{"report": rep.Kind + "-" + j.RunAt.Format("2006-01-02") + ".pdf"}, nil
	})
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()

	c := sundial.NewClient(rdb)
	payload, _ := json.Marshal(Report{Kind: "sales"})
	s, _, err := c.Schedules().Put(ctx, &schedule.Schedule{
		ID:       "nightly-report",
		Cron:     "0 3 * * *",
		Timezone: "Europe/Berlin",
		Misfire:  schedule.MisfireRunOnce, // after downtime, one catch-up run, not one per missed night
		Job:      schedule.JobTemplate{Queue: "reports", Type: "report.build", Payload: payload},
	})
	if err != nil {
		log.Fatal(err)
	}
	berlin, _ := time.LoadLocation("Europe/Berlin")
	fmt.Println("schedule", s.ID, "next runs:")
	for _, t := range s.Upcoming[:3] {
		fmt.Println(" ", t.In(berlin).Format("Mon 2006-01-02 15:04 MST"))
	}

	if *now {
		j, err := c.Schedules().Trigger(ctx, s.ID)
		if err != nil {
			log.Fatal(err)
		}
		j, err = c.Wait(ctx, j.ID)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println("triggered run:", j.State, string(j.Result))
		return
	}
	fmt.Println("running until Ctrl-C")
	if err := <-done; err != nil {
		log.Fatal(err)
	}
}
