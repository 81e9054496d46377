package queue_test

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sundialhq/sundial/pkg/job"
	"github.com/sundialhq/sundial/pkg/queue"
	"github.com/sundialhq/sundial/pkg/queue/queuetest"
)

// benchClient returns a client of a fresh redis-server without AOF (the
// tests' servers have it on), so what is measured is the engine's work. It
// writes the storage format a deployment writes once the gate opened.
func benchClient(b *testing.B) *queue.Client {
	srv := queuetest.StartWith(b, "--appendonly", "no")
	c := queue.New(srv.Client(), queue.Options{})
	queue.SetWriteFormat(c, queue.WriteFormat)
	return c
}

func benchJobs(b *testing.B, n int) []*job.Job {
	out := make([]*job.Job, n)
	for i := range out {
		j, err := (&job.Spec{Type: "noop"}).Build(time.Now())
		if err != nil {
			b.Fatal(err)
		}
		out[i] = j
	}
	return out
}

// BenchmarkSubmitBatch1000 reports jobs/s for 1000-job batch submits.
func BenchmarkSubmitBatch1000(b *testing.B) {
	c := benchClient(b)
	ctx := context.Background()
	var cpu float64 // Redis CPU seconds spent in the submits
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		jobs := benchJobs(b, 1000)
		cpu0, _ := redisCost(b, c.Redis())
		b.StartTimer()
		if _, err := c.Submit(ctx, jobs); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		cpu1, _ := redisCost(b, c.Redis())
		cpu += cpu1 - cpu0
		b.StartTimer()
	}
	b.ReportMetric(float64(b.N*1000)/b.Elapsed().Seconds(), "jobs/s")
	b.ReportMetric(cpu*1e6/float64(b.N*1000), "redis-µs/job")
}

// BenchmarkSubmitSingleParallel reports jobs/s for one-job submits from 16
// parallel producers (peerbench's 16-producer row; coalesced into shared
// script calls), with Redis CPU per job, the script calls per job (1 / the
// mean batch a call carried) and the benchmark process' CPU per job
// (client_µs/job: building, coalescing, go-redis and its syscalls).
func BenchmarkSubmitSingleParallel(b *testing.B) {
	c := benchClient(b)
	ctx := context.Background()
	if err := c.Redis().ConfigResetStat(ctx).Err(); err != nil {
		b.Fatal(err)
	}
	b.SetParallelism((16 + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
	cpu0, _ := redisCost(b, c.Redis())
	self0 := processCPU()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			j, _ := (&job.Spec{Type: "noop"}).Build(time.Now())
			if _, err := c.Submit(ctx, []*job.Job{j}); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	self1 := processCPU()
	cpu1, _ := redisCost(b, c.Redis())
	_, stats := serverStats(b, c.Redis())
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
	b.ReportMetric((cpu1-cpu0)*1e6/float64(b.N), "redis-µs/job")
	b.ReportMetric(float64(stats["fcall"].calls+stats["evalsha"].calls)/float64(b.N), "calls/job")
	b.ReportMetric((self1-self0).Seconds()*1e6/float64(b.N), "client-µs/job")
}

// processCPU is the CPU time (user + system) this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkClaimComplete50 reports jobs/s for claiming and completing in
// batches of 50 (the worker's pattern at concurrency 50), two round trips
// per batch: plain jobs, and the costs of flow control
// (docs/flow-control.md) — a concurrency limit over the type and one per
// payload key (100 customers), neither holding anything back; a rate limit
// of 10000 per second over the type, which holds jobs back when the
// benchmark runs faster; the same per customer, which does not; and jobs
// in 10 fairness groups.
func BenchmarkClaimComplete50(b *testing.B) {
	plain := func(int) job.Spec { return job.Spec{Type: "noop"} }
	keyed := func(i int) job.Spec {
		return job.Spec{Type: "noop", Payload: []byte(`{"customer":"c` + strconv.Itoa(i%100) + `"}`)}
	}
	for _, v := range []struct {
		name   string
		limit  *queue.Limit
		spec   func(int) job.Spec
		format int // storage format written (0: queue.WriteFormat)
	}{
		{"plain", nil, plain, 0},
		{"plain-format1", nil, plain, 1},
		{"concurrency", &queue.Limit{Name: "l", Types: []string{"noop"}, Concurrency: 10000}, plain, 0},
		{"keyed", &queue.Limit{Name: "l", Key: "customer", Concurrency: 10000}, keyed, 0},
		{"rate", &queue.Limit{Name: "l", Rate: &queue.Rate{Limit: 10000, PeriodSeconds: 1}}, plain, 0},
		{"rate-keyed", &queue.Limit{Name: "l", Key: "customer", Rate: &queue.Rate{Limit: 10000, PeriodSeconds: 1}}, keyed, 0},
		{"groups", nil, func(i int) job.Spec { return job.Spec{Type: "noop", Group: "g" + strconv.Itoa(i%10)} }, 0},
	} {
		b.Run(v.name, func(b *testing.B) { benchClaimComplete(b, v.limit, v.spec, v.format) })
	}
}

func benchClaimComplete(b *testing.B, limit *queue.Limit, spec func(int) job.Spec, format int) {
	c := benchClient(b)
	if format != 0 {
		queue.SetWriteFormat(c, format)
	}
	ctx := context.Background()
	const batch = 50
	if limit != nil {
		if _, _, err := c.SetLimit(ctx, "default", *limit); err != nil {
			b.Fatal(err)
		}
	}
	for done := 0; done < b.N; done += 1000 {
		jobs := make([]*job.Job, 1000)
		for i := range jobs {
			s := spec(done + i)
			j, err := s.Build(time.Now())
			if err != nil {
				b.Fatal(err)
			}
			jobs[i] = j
		}
		if _, err := c.Submit(ctx, jobs); err != nil {
			b.Fatal(err)
		}
	}
	cpu0, cmds0 := redisCost(b, c.Redis())
	b.ResetTimer()
	for done := 0; done < b.N; {
		ls, err := c.Claim(ctx, "default", min(batch, b.N-done), "bench")
		if err != nil {
			b.Fatalf("claim: %v", err)
		}
		if len(ls) == 0 { // a rate limit's window is full: the poller's part
			if _, _, err := c.Promote(ctx, "default", 100); err != nil {
				b.Fatal(err)
			}
			continue
		}
		outs := make([]queue.Outcome, len(ls))
		for i, l := range ls {
			outs[i] = queue.Outcome{ID: l.Job.ID, Token: l.Token, Kind: queue.OutcomeSucceeded}
		}
		if _, err := c.Complete(ctx, "default", outs); err != nil {
			b.Fatal(err)
		}
		done += len(ls)
	}
	b.StopTimer()
	cpu1, cmds1 := redisCost(b, c.Redis())
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
	b.ReportMetric((cpu1-cpu0)*1e6/float64(b.N), "redis-µs/job")
	b.ReportMetric(float64(cmds1-cmds0)/float64(b.N), "redis-cmds/job")
}

// redisCost returns the server's CPU seconds (user + sys) and the number
// of commands it ran, scripts' commands included (INFO cpu, commandstats).
func redisCost(b *testing.B, rdb redis.UniversalClient) (cpu float64, cmds int64) {
	cpu, stats := serverStats(b, rdb)
	for name, st := range stats {
		if name != "info" {
			cmds += st.calls
		}
	}
	return cpu, cmds
}

// BenchmarkSubmitSingle reports jobs/s and Redis CPU per job for one-job
// submits from one producer: a round trip each.
func BenchmarkSubmitSingle(b *testing.B) {
	c := benchClient(b)
	ctx := context.Background()
	if err := c.Redis().ConfigResetStat(ctx).Err(); err != nil {
		b.Fatal(err)
	}
	cpu0, cmds0 := redisCost(b, c.Redis())
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		j, _ := (&job.Spec{Type: "noop"}).Build(time.Now())
		if _, err := c.Submit(ctx, []*job.Job{j}); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	cpu1, cmds1 := redisCost(b, c.Redis())
	script, inner := scriptTime(b, c.Redis())
	b.ReportMetric(script/float64(b.N), "script-µs/job")
	b.ReportMetric((script-inner)/float64(b.N), "lua-µs/job")
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
	b.ReportMetric((cpu1-cpu0)*1e6/float64(b.N), "redis-µs/job")
	b.ReportMetric(float64(cmds1-cmds0)/float64(b.N), "redis-cmds/job")
}

// BenchmarkRoundTrip is the floor under BenchmarkSubmitSingle: PING from
// one client, one round trip each, with the same client and server. What
// a single submit takes beyond it is the submit's own work (its script and
// the bigger request); the rest is the machine's loopback and wake-ups,
// which every system pays (docs/benchmarks/2026-11-28-submit.md).
func BenchmarkRoundTrip(b *testing.B) {
	c := benchClient(b)
	ctx := context.Background()
	cpu0, _ := redisCost(b, c.Redis())
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := c.Redis().Ping(ctx).Err(); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	cpu1, _ := redisCost(b, c.Redis())
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "calls/s")
	b.ReportMetric((cpu1-cpu0)*1e6/float64(b.N), "redis-µs/call")
}

// BenchmarkCallCost reports, for claim+complete batches of 1 to 50 jobs as
// two calls (Claim, Complete) or one (CompleteAndClaim), the script time
// per call and per job and the part of it spent outside Redis commands
// (Lua and the bridge of each redis.call), from INFO commandstats: what a
// call costs whatever its size, and what each job adds.
func BenchmarkCallCost(b *testing.B) {
	for _, batch := range []int{1, 3, 10, 50} {
		for _, fused := range []bool{false, true} {
			name := fmt.Sprintf("batch=%d/separate", batch)
			if fused {
				name = fmt.Sprintf("batch=%d/cycle", batch)
			}
			b.Run(name, func(b *testing.B) {
				c := benchClient(b)
				ctx := context.Background()
				for done := 0; done < b.N+batch; done += 1000 {
					if _, err := c.Submit(ctx, benchJobs(b, 1000)); err != nil {
						b.Fatal(err)
					}
				}
				if err := c.Redis().ConfigResetStat(ctx).Err(); err != nil {
					b.Fatal(err)
				}
				b.ResetTimer()
				ls, _ := c.Claim(ctx, "default", batch, "bench")
				calls := 1
				for done := 0; done < b.N && len(ls) > 0; {
					outs := make([]queue.Outcome, len(ls))
					for i, l := range ls {
						outs[i] = queue.Outcome{ID: l.Job.ID, Token: l.Token, Kind: queue.OutcomeSucceeded}
					}
					done += len(ls)
					var err error
					if fused {
						_, ls, err = c.CompleteAndClaim(ctx, "default", outs, min(batch, b.N-done), "bench")
						calls++
					} else {
						if _, err = c.Complete(ctx, "default", outs); err == nil {
							ls, err = c.Claim(ctx, "default", min(batch, b.N-done), "bench")
						}
						calls += 2
					}
					if err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				script, inner := scriptTime(b, c.Redis())
				b.ReportMetric(script/float64(calls), "script-µs/call")
				b.ReportMetric((script-inner)/float64(calls), "lua-µs/call")
				b.ReportMetric(script/float64(b.N), "script-µs/job")
			})
		}
	}
}

// scriptTime returns the µs Redis spent in script calls (FCALL, EVALSHA) since the last CONFIG
// RESETSTAT, and the part of it in the commands the scripts ran.
func scriptTime(b *testing.B, rdb redis.UniversalClient) (script, inner float64) {
	_, stats := serverStats(b, rdb)
	for name, st := range stats {
		switch {
		case name == "info" || strings.HasPrefix(name, "config"):
		case name == "evalsha" || name == "fcall":
			script += st.usec
		default:
			inner += st.usec
		}
	}
	return script, inner
}

// BenchmarkPromote1000 reports what making 1000 scheduled jobs due costs in
// one promote call (the poller's batch): script µs and Redis commands per
// job. The jobs are stored outside the timer.
func BenchmarkPromote1000(b *testing.B) {
	srv := queuetest.StartWith(b, "--appendonly", "no")
	clk := &clock{t: time.Now()}
	c := queue.New(srv.Client(), queue.Options{Now: clk.Now})
	ctx := context.Background()
	var script, cmds float64
	for b.Loop() {
		b.StopTimer()
		due := clk.t.Add(time.Second)
		jobs := make([]*job.Job, 1000)
		for i := range jobs {
			j, err := (&job.Spec{Type: "noop", RunAt: &due}).Build(clk.t)
			if err != nil {
				b.Fatal(err)
			}
			jobs[i] = j
		}
		if _, err := c.Submit(ctx, jobs); err != nil {
			b.Fatal(err)
		}
		clk.Advance(2 * time.Second)
		if err := c.Redis().ConfigResetStat(ctx).Err(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if n, _, err := c.Promote(ctx, "default", 1000); err != nil || n != 1000 {
			b.Fatalf("promoted %d: %v", n, err)
		}
		b.StopTimer()
		s, _ := scriptTime(b, c.Redis())
		_, n := redisCost(b, c.Redis())
		script += s
		cmds += float64(n)
		b.StartTimer()
	}
	b.ReportMetric(script/float64(b.N*1000), "script-µs/job")
	b.ReportMetric(cmds/float64(b.N*1000), "cmds/job")
}

// BenchmarkRecordStep reports what a durable job's step costs (docs/durable.md):
// each op records one step of a running job (a 20-byte JSON result) with
// RecordStep, over jobs of 5 steps each. Redis CPU and memory per step,
// and steps/s from one caller.
func BenchmarkRecordStep(b *testing.B) {
	c := benchClient(b)
	ctx := context.Background()
	const per = 5
	n := (b.N + per - 1) / per
	for start := 0; start < n; start += 1000 {
		if _, err := c.Submit(ctx, benchJobs(b, min(1000, n-start))); err != nil {
			b.Fatal(err)
		}
	}
	var leases []queue.Lease
	for len(leases) < n {
		ls, err := c.Claim(ctx, "default", 1000, "bench")
		if err != nil || len(ls) == 0 {
			b.Fatal(len(ls), err)
		}
		leases = append(leases, ls...)
	}
	mem0 := usedMemory(b, c.Redis())
	cpu0, _ := redisCost(b, c.Redis())
	now := time.Now()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		rec := job.StepRecord(job.StepOK, "step-"+strconv.Itoa(i%per+1), now, now, `{"charge":"ch_0123456"}`)
		if _, _, err := c.RecordStep(ctx, "default", leases[i/per], queue.StepWrite{Seq: i%per + 1, Record: rec}); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	cpu1, _ := redisCost(b, c.Redis())
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "steps/s")
	b.ReportMetric((cpu1-cpu0)*1e6/float64(b.N), "redis-µs/step")
	b.ReportMetric(float64(usedMemory(b, c.Redis())-mem0)/float64(b.N), "bytes/step")
}

// usedMemory is Redis' used_memory (INFO memory).
func usedMemory(b *testing.B, rdb redis.UniversalClient) int64 {
	info, err := rdb.Info(context.Background(), "memory").Result()
	if err != nil {
		b.Fatal(err)
	}
	for _, l := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(l, "used_memory:"); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	return 0
}
