package main

import (
	"fmt"
	"strings"
)

func markdown(rep report) string {
	var b strings.Builder
	w := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	w("# peercost: Redis memory per job and Redis time per single submit\n\n")
	w("%s; Sundial %s; %s; asynq %s, BullMQ %s, go-redis %s, %s; GOMAXPROCS %d. Load average at the start: %.2f %.2f %.2f (other work on the machine: CPU µs figures are what matters, wall-clock rates are lower bounds).\n\n",
		rep.Date, orUnknown(rep.Commit), rep.Redis, orUnknown(rep.Versions["asynq"]), orUnknown(rep.Versions["bullmq"]), orUnknown(rep.Versions["go-redis"]), rep.Versions["go"], rep.GOMAXPROC,
		rep.LoadStart[0], rep.LoadStart[1], rep.LoadStart[2])
	if len(rep.Memory) > 0 {
		w("## Redis memory per job\n\n")
		w("%d jobs stored in each state (1000-job bulk calls where there is one: Sundial, BullMQ; asynq from 16 producers of single Enqueue calls), each system on a fresh redis-server; payload `{\"t\":µs,\"due\":µs}`. Bytes per job = `used_memory` after − before (after a settle) ÷ the jobs the system counts in the state; in brackets, MEMORY USAGE of one job's own key (average over 1000). Sundial's first column is without its events stream (trimmed, as the poller does once history recorded the events), the second with it.\n\n", rep.N)
		w("| state (Sundial / asynq / BullMQ) | Sundial, stream trimmed | Sundial, with events stream | asynq | BullMQ |\n|---|---:|---:|---:|---:|\n")
		for _, st := range states {
			var label []string
			var cells []string
			for _, s := range []string{"sundial", "asynq", "bullmq"} {
				label = append(label, stateLabel[s][st])
				r, ok := findMem(rep, s, st)
				switch {
				case !ok:
					cells = append(cells, "–")
					if s == "sundial" {
						cells = append(cells, "–")
					}
				case r.Err != "":
					cells = append(cells, "error")
					if s == "sundial" {
						cells = append(cells, "error")
					}
				case s == "sundial":
					cells = append(cells, fmt.Sprintf("%.0f B (%d)", r.NoStreamPerJob, r.JobKeyUsage), fmt.Sprintf("%.0f B", r.BytesPerJob))
				default:
					cells = append(cells, fmt.Sprintf("%.0f B (%d)", r.BytesPerJob, r.JobKeyUsage))
				}
			}
			w("| %s | %s |\n", strings.Join(label, " / "), strings.Join(cells, " | "))
		}
		w("\n### Where the bytes go\n\nEvery key after the fill, grouped by pattern (job ids as `<id>`), MEMORY USAGE SAMPLES 0 summed (per-job keys: a 1000-key sample's average × keys), per job in the state; groups under 0.5 B/job left out.\n\n")
		w("| system | state | jobs | used_memory Δ/job | keys: bytes per job | fill s | load |\n|---|---|---:|---:|---|---:|---:|\n")
		for _, r := range rep.Memory {
			if r.Err != "" {
				w("| %s | %s | | | error: %s | | %.2f |\n", systemLabel[r.System], r.State, short(r.Err), r.Load[0])
				continue
			}
			var parts []string
			for _, g := range r.Keys {
				if g.PerJob < 0.5 {
					continue
				}
				parts = append(parts, fmt.Sprintf("`%s` %.0f", g.Pattern, g.PerJob))
			}
			w("| %s | %s | %d | %.0f | %s | %.1f | %.2f |\n", systemLabel[r.System], r.State, r.Jobs, r.BytesPerJob, strings.Join(parts, ", "), r.Seconds, r.Load[0])
		}
		w("\n")
	}
	if len(rep.Submit) > 0 {
		w("## Redis time per single submit\n\n")
		w("%d single-job submits from 1 producer, one after another (Sundial `queue.Client.Submit` of one job from `job.Spec.Build`, asynq `Client.Enqueue`, BullMQ `Queue.add`), after %d unmeasured ones; fresh redis-server each. Redis CPU = `used_cpu_sys` + `used_cpu_user` delta; script µs = `usec` of EVALSHA/EVAL/FCALL in `INFO commandstats` (which includes the commands the script runs); commands count every command, those inside scripts included; round trips = `total_reads_processed` delta (a pipeline counts once); bytes = `total_net_input_bytes` / `total_net_output_bytes` deltas.\n\n", firstN(rep), warmSubmits)
		w("| system | Redis CPU µs/submit | script µs/submit | commands/submit | script calls/submit | round trips/submit | bytes in / out per submit | jobs/s | load | commands per submit |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---|\n")
		for _, r := range rep.Submit {
			if r.Err != "" {
				w("| %s | error: %s | | | | | | | %.2f | |\n", systemLabel[r.System], short(r.Err), r.Load[0])
				continue
			}
			w("| %s | %.1f | %.1f | %.2f | %.2f | %.2f | %.0f / %.0f | %.0f | %.2f | %s |\n", systemLabel[r.System], r.CPUUsPerJob, r.ScriptUsPer, r.Commands, r.ScriptCalls, r.RoundTrips, r.BytesIn, r.BytesOut, r.JobsPerSec, r.Load[0], strings.Join(r.Top, ", "))
		}
		for _, r := range rep.Submit {
			if r.System == "sundial" && r.StreamPerJob > 0 {
				w("\nSundial's events stream after these single submits: %.0f B per job (one entry each), until history records it.\n", r.StreamPerJob)
			}
		}
		w("\n")
	}
	return b.String()
}

func findMem(rep report, sys, state string) (memResult, bool) {
	for _, r := range rep.Memory {
		if r.System == sys && r.State == state {
			return r, true
		}
	}
	return memResult{}, false
}

func firstN(rep report) int {
	if len(rep.Submit) > 0 {
		return rep.Submit[0].N
	}
	return rep.Submits
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

func short(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	s = strings.ReplaceAll(s, "|", "/")
	if len(s) > 160 {
		return s[:160] + "…"
	}
	return s
}
