// Command durableworker is the worker of the durable-execution tests of
// internal/e2e: a Sundial Runner, built as a user builds one. Its steps
// make their side effects at a sink outside Redis (SINK_URL): a POST with
// the step's idempotency key and the attempt's fencing token, answered
// with the step's value. It serves three types:
//   - "pipeline" runs STEPS steps; its result is the list of their values
//     (TestDurableStepsUnderCrashes);
//   - "order" is docs/durable.md's example: a charge step, a wait for the
//     signal "shipped" (by the key "order-<order>", until timeout_ms), a
//     sleep of sleep_ms, an email step; never shipped ends it cancelled;
//   - "nap" sleeps ms and returns "rested";
//   - "fanout" runs n "child" jobs over queues (RunChildren) and returns
//     "<queue>:<state>:<result>" of each; a child returns its payload × 10.
//
// It reads the SUNDIAL_* variables as the services do (ConfigFromEnv).
package main

import (
	"context"
	"encoding/json"
	"errors"
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
	if sink == "" {
		log.Fatal("SINK_URL is required")
	}
	cfg.ExternalPoller = true
	r := sundial.NewRunner(rdb, cfg)
	hc := &http.Client{Timeout: 5 * time.Second}
	// apply is a step's side effect at the sink.
	apply := func(ctx context.Context, j *sundial.Record, name string) (string, error) {
		return sundial.RunStep(ctx, name, func(ctx context.Context) (string, error) {
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
	}
	r.HandleFunc("pipeline", func(ctx context.Context, j *sundial.Record) (any, error) {
		out := make([]string, 0, steps)
		for i := 1; i <= steps; i++ {
			v, err := apply(ctx, j, "s"+strconv.Itoa(i))
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	})
	r.HandleFunc("order", func(ctx context.Context, j *sundial.Record) (any, error) {
		var o struct {
			Order     string `json:"order"`
			SleepMS   int    `json:"sleep_ms"`
			TimeoutMS int    `json:"timeout_ms"`
		}
		if err := json.Unmarshal(j.Payload, &o); err != nil {
			return nil, sundial.NoRetry(err)
		}
		charge, err := apply(ctx, j, "charge")
		if err != nil {
			return nil, err
		}
		carrier, err := sundial.WaitSignal[string](ctx, "shipped", time.Duration(o.TimeoutMS)*time.Millisecond, sundial.SignalKey("order-"+o.Order))
		if errors.Is(err, sundial.ErrSignalTimeout) {
			return nil, sundial.Cancel(errors.New("never shipped"))
		} else if err != nil {
			return nil, err
		}
		if err := sundial.Sleep(ctx, time.Duration(o.SleepMS)*time.Millisecond); err != nil {
			return nil, err
		}
		email, err := apply(ctx, j, "email")
		if err != nil {
			return nil, err
		}
		return map[string]string{"charge": charge, "carrier": carrier, "email": email}, nil
	})
	r.HandleFunc("fanout", func(ctx context.Context, j *sundial.Record) (any, error) {
		var f struct {
			Queues []string `json:"queues"`
			N      int      `json:"n"`
		}
		if err := json.Unmarshal(j.Payload, &f); err != nil || len(f.Queues) == 0 {
			return nil, sundial.NoRetry(fmt.Errorf("payload: want queues and n: %v", err))
		}
		kids := make([]sundial.Job, f.N)
		for i := range kids {
			kids[i] = sundial.Job{Type: "child", Queue: f.Queues[i%len(f.Queues)], Payload: i}
		}
		res, err := sundial.RunChildren(ctx, "kids", kids)
		if err != nil {
			return nil, err
		}
		out := make([]string, len(res))
		for i, c := range res {
			out[i] = c.Queue + ":" + string(c.State) + ":" + string(c.Result)
		}
		return out, nil
	})
	r.HandleFunc("child", func(ctx context.Context, j *sundial.Record) (any, error) {
		var n int
		_ = json.Unmarshal(j.Payload, &n)
		return n * 10, nil
	})
	r.HandleFunc("nap", func(ctx context.Context, j *sundial.Record) (any, error) {
		var ms int
		_ = json.Unmarshal(j.Payload, &ms)
		if err := sundial.Sleep(ctx, time.Duration(ms)*time.Millisecond); err != nil {
			return nil, err
		}
		return "rested", nil
	})
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := r.Run(ctx); err != nil {
		log.Fatal(err)
	}
}
