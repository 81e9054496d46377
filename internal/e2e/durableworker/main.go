// Command durableworker is the worker of the durable-execution proof
// (internal/e2e, TestDurableStepsUnderCrashes): a Sundial Runner, built
// as a user builds one, whose "pipeline" jobs run STEPS steps. Each step
// makes its side effect at a sink outside Redis (SINK_URL): a POST with
// the step's idempotency key and the attempt's fencing token, answered
// with the step's value. The job's result is the list of the values.
// It reads the SUNDIAL_* variables as the services do (ConfigFromEnv).
package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/sundialhq/sundial"
)

func main() {
	cfg, rdb, err := sundial.ConfigFromEnv()
	if err != nil {
		log.Fatal(err)
	}
	sink := os.Getenv("SINK_URL")
	steps, _ := strconv.Atoi(os.Getenv("STEPS"))
	if sink == "" || steps < 1 {
		log.Fatal("SINK_URL and STEPS are required")
	}
	cfg.ExternalPoller = true
	r := sundial.NewRunner(rdb, cfg)
	hc := &http.Client{Timeout: 5 * time.Second}
	r.HandleFunc("pipeline", func(ctx context.Context, j *sundial.Record) (any, error) {
		out := make([]string, 0, steps)
		for i := 1; i <= steps; i++ {
			name := "s" + strconv.Itoa(i)
			v, err := sundial.RunStep(ctx, name, func(ctx context.Context) (string, error) {
				lease, _ := sundial.LeaseOf(ctx)
				q := url.Values{"key": {sundial.IdempotencyKey(ctx, name)}, "job": {j.ID}, "token": {lease.Token}}
				req, err := http.NewRequestWithContext(ctx, http.MethodPost, sink+"/apply?"+q.Encode(), nil)
				if err != nil {
					return "", err
				}
				resp, err := hc.Do(req)
				if err != nil {
					return "", err
				}
				defer resp.Body.Close()
				b, _ := io.ReadAll(resp.Body)
				if resp.StatusCode != http.StatusOK {
					return "", fmt.Errorf("sink: %s", resp.Status)
				}
				return string(b), nil
			}, sundial.StepRetries(2, 50*time.Millisecond))
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	})
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := r.Run(ctx); err != nil {
		log.Fatal(err)
	}
}
