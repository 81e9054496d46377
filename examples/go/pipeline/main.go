// Command pipeline runs a small data pipeline as jobs that depend on each
// other: an export, two transforms that wait for it, and a report that
// waits for both. SubmitMany stores the whole graph at once, all or
// nothing, each job naming the earlier ones it needs as "#n"; a job
// becomes due only when everything it depends on succeeded. It prints the
// order the steps ran in and exits.
//
//	go run ./examples/go/pipeline -redis 127.0.0.1:6379
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sundialhq/sundial"
)

// Step is the payload of every job of the pipeline.
type Step struct {
	Name string `json:"name"`
}

func main() {
	addr := flag.String("redis", "127.0.0.1:6379", "Redis `host:port`")
	flag.Parse()
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	rdb := redis.NewClient(&redis.Options{Addr: *addr})
	quiet := slog.New(slog.NewTextHandler(log.Writer(), &slog.HandlerOptions{Level: slog.LevelWarn}))

	var mu sync.Mutex
	var order []string
	r := sundial.NewRunner(rdb, sundial.RunnerConfig{Queues: []string{"pipeline"}, Concurrency: 4, Logger: quiet})
	sundial.HandleJSON(r, "pipeline.step", func(ctx context.Context, s Step) (any, error) {
		time.Sleep(30 * time.Millisecond) // the work
		mu.Lock()
		order = append(order, s.Name)
		mu.Unlock()
		return map[string]string{"output": s.Name + ".parquet"}, nil
	})
	go r.Run(ctx)

	step := func(name string, deps ...string) sundial.Job {
		return sundial.Job{Type: "pipeline.step", Queue: "pipeline", Payload: Step{Name: name}, DependsOn: deps}
	}
	c := sundial.NewClient(rdb)
	subs, err := c.SubmitMany(ctx, []sundial.Job{
		step("export"),             // #0
		step("clean", "#0"),        // #1
		step("enrich", "#0"),       // #2
		step("report", "#1", "#2"), // #3
	})
	if err != nil {
		log.Fatal(err)
	}
	for _, s := range subs {
		fmt.Printf("submitted %s: %s\n", s.Job.ID, s.Job.State)
	}
	report, err := c.Wait(ctx, subs[3].Job.ID)
	if err != nil {
		log.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	fmt.Printf("report %s %s\n", report.State, report.Result)
	fmt.Println("ran:", order[0], "→", order[1], "+", order[2], "→", order[3])
}
