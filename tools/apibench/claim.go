package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// claimBench measures the HTTP worker protocol: o.workers HTTP workers
// long-poll POST /v1/queues/{q}/claim and complete what they get, while
// jobs are submitted at o.rate per second (0: none, an idle fleet). It
// reports enqueue→claim latency and, for the -pids given, the CPU time
// those processes used during the run.
func (b *bench) claimBench() error {
	ctx, cancel := context.WithTimeout(context.Background(), b.o.duration)
	defer cancel()
	cpu0 := cpuTimes(b.o.pids)
	var mu sync.Mutex
	var lat []time.Duration
	claims := 0
	var wg sync.WaitGroup
	for i := 0; i < b.o.workers; i++ {
		wg.Go(func() {
			id := fmt.Sprintf("bench-%d-%d", os.Getpid(), i)
			for ctx.Err() == nil {
				jobs, err := b.claim(ctx, id)
				got := time.Now()
				if err != nil {
					continue
				}
				mu.Lock()
				claims++
				mu.Unlock()
				for _, c := range jobs {
					var p struct {
						SentNS int64 `json:"sent_ns"`
					}
					if json.Unmarshal(c.Job.Payload, &p) == nil && p.SentNS > 0 {
						mu.Lock()
						lat = append(lat, got.Sub(time.Unix(0, p.SentNS)))
						mu.Unlock()
					}
					body, _ := json.Marshal(map[string]any{"token": c.Lease.Token, "worker_id": id})
					_ = b.post(context.WithoutCancel(ctx), "/v1/jobs/"+c.Job.ID+"/complete", body)
				}
			}
		})
	}
	submitted := 0
	if b.o.rate > 0 {
		tick := time.NewTicker(time.Duration(float64(time.Second) / b.o.rate))
		defer tick.Stop()
	submit:
		for {
			select {
			case <-ctx.Done():
				break submit
			case <-tick.C:
			}
			body, _ := json.Marshal(map[string]any{"queue": b.o.queue, "type": b.o.jobType, "payload": map[string]any{"sent_ns": time.Now().UnixNano()}})
			go func() { _ = b.post(context.WithoutCancel(ctx), "/v1/jobs", body) }()
			submitted++
		}
	}
	wg.Wait()
	cpu1 := cpuTimes(b.o.pids)
	fmt.Printf("mode=claim workers=%d rate=%.0f/s duration=%v submitted=%d claim calls=%d jobs claimed=%d\n",
		b.o.workers, b.o.rate, b.o.duration, submitted, claims, len(lat))
	if len(lat) > 0 {
		fmt.Printf("enqueue→claim over HTTP: %s\n", percentiles(lat))
	}
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for k := range cpu1 {
			if !yield(k) {
				return
			}
		}
	}) {
		used := cpu1[name] - cpu0[name]
		fmt.Printf("cpu %s: %.2f s over %v (%.1f%% of one core)\n", name, used.Seconds(), b.o.duration, 100*used.Seconds()/b.o.duration.Seconds())
	}
	return nil
}

type claimedJob struct {
	Job struct {
		ID      string          `json:"id"`
		Payload json.RawMessage `json:"payload"`
	} `json:"job"`
	Lease struct {
		Token string `json:"token"`
	} `json:"lease"`
}

func (b *bench) claim(ctx context.Context, worker string) ([]claimedJob, error) {
	body, _ := json.Marshal(map[string]any{"worker_id": worker, "wait_seconds": 20, "max": 1})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, b.o.base+"/v1/queues/"+b.o.queue+"/claim", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if b.o.key != "" {
		req.Header.Set("Authorization", "Bearer "+b.o.key)
	}
	res, err := b.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return nil, statusError(res.StatusCode)
	}
	var out struct {
		Jobs []claimedJob `json:"jobs"`
	}
	err = json.NewDecoder(res.Body).Decode(&out)
	return out.Jobs, err
}

// cpuTimes reads the user+system CPU time of each name=pid in spec from
// /proc (Linux).
func cpuTimes(spec string) map[string]time.Duration {
	out := map[string]time.Duration{}
	for _, kv := range strings.Split(spec, ",") {
		name, pid, ok := strings.Cut(kv, "=")
		if !ok {
			continue
		}
		data, err := os.ReadFile("/proc/" + pid + "/stat")
		if err != nil {
			continue
		}
		// Fields after the command (which may hold spaces) start after ")".
		f := strings.Fields(string(data[bytes.LastIndexByte(data, ')')+2:]))
		if len(f) < 13 {
			continue
		}
		utime, _ := strconv.ParseInt(f[11], 10, 64)
		stime, _ := strconv.ParseInt(f[12], 10, 64)
		out[name] = time.Duration(utime+stime) * (time.Second / 100) // USER_HZ = 100
	}
	return out
}
