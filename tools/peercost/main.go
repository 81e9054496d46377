// Command peercost measures what Sundial, asynq and BullMQ cost Redis, each
// against its own private redis-server (loopback, a free port, --save ""
// --appendonly no) that it starts and stops itself:
//
//   - memory: bytes of Redis memory per job in each state (INFO memory
//     used_memory before and after storing -n jobs, after a settle, over the
//     jobs the system counts in that state), with the keys' MEMORY USAGE;
//   - submit: Redis time per single submit (INFO commandstats and cpu
//     around -submits single-job submits from one producer).
//
// Sundial is driven as a library (queue.New(rdb).Submit with jobs from
// job.Spec.Build, pkg/worker to finish them), asynq through Client.Enqueue
// and a Server, BullMQ through node/bullmq.js (Queue.add, addBulk, Worker).
// Run it with run.sh, which installs the Node side and builds this one.
//
//	peercost [-n 100000] [-submits 50000] [-systems sundial,asynq,bullmq] [-only memory,submit] [-json] [-json-file F]
package main

import (
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sundialhq/sundial/pkg/queue"
)

const (
	queueName     = "peercost"
	fillBatch     = 1000 // jobs per bulk call when filling a state (Sundial, BullMQ)
	fillProducers = 16   // concurrent single submits when filling asynq (no bulk call)
	warmSubmits   = 500  // single submits before the measured ones (connections, scripts)
)

// system is one job system as a user drives it.
type system interface {
	// Fill submits n jobs bound for state (with the bulk call where there
	// is one), runs the system's worker until they reached it when state is
	// finished or dead, and returns how many jobs the system counts in state.
	Fill(ctx context.Context, state string, n int) (int, error)
	// Submit makes n single-job submits one after another and returns the
	// time they took.
	Submit(ctx context.Context, n int) (time.Duration, error)
	Close() error
}

var states = []string{"queued", "scheduled", "finished", "dead"}

// stateLabel: each system's name for the tool's states.
var stateLabel = map[string]map[string]string{
	"sundial": {"queued": "queued", "scheduled": "scheduled (run_at +1 h)", "finished": "succeeded (kept: SUNDIAL_JOB_RETENTION 24h)", "dead": "dead (kept: SUNDIAL_DEAD_RETENTION 2160h)"},
	"asynq":   {"queued": "pending", "scheduled": "scheduled (ProcessAt +1 h)", "finished": "completed (Retention 24h)", "dead": "archived (newest 9,999 kept)"},
	"bullmq":  {"queued": "waiting", "scheduled": "delayed (delay 1 h)", "finished": "completed (kept: default)", "dead": "failed (kept: default)"},
}

var systemLabel = map[string]string{"sundial": "Sundial (library)", "asynq": "asynq", "bullmq": "BullMQ"}

func payload(now, due time.Time) []byte {
	return fmt.Appendf(nil, `{"t":%d,"due":%d}`, now.UnixMicro(), due.UnixMicro())
}

// waitCount polls f until it reaches target (10 min at most).
func waitCount(ctx context.Context, f func() (int, error), target int) error {
	deadline := time.Now().Add(10 * time.Minute)
	for {
		c, err := f()
		if err != nil {
			return err
		}
		if c >= target {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out: %d of %d", c, target)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

type memResult struct {
	System, State, Label string
	Jobs                 int     // jobs added to the state (the system's own count)
	Before, After        int64   // used_memory
	BytesPerJob          float64 // (after − before) / jobs; Sundial: with its events stream
	// Sundial: the events stream's share (bytes per job), and bytes per job
	// once the stream is trimmed (as it is once history recorded it).
	StreamPerJob   float64 `json:",omitempty"`
	NoStreamPerJob float64 `json:",omitempty"`
	JobKeyUsage    int64   // MEMORY USAGE of one job's main key (average of a sample)
	Keys           []keyGroup
	Seconds        float64
	Load           [3]float64
	Err            string `json:",omitempty"`
}

type keyGroup struct {
	Pattern    string
	Keys       int
	Bytes      int64   // MEMORY USAGE (SAMPLES 0), summed; per-job groups: the sample's average × keys
	PerJob     float64 // Bytes / jobs in the state
	PerJobKeys bool    // one key per job (the average is over a sample)
}

type submitResult struct {
	System        string
	N             int
	Seconds       float64
	JobsPerSec    float64
	CPUUsPerJob   float64 // used_cpu_sys + used_cpu_user delta
	ScriptUsPer   float64 // usec of EVAL/EVALSHA/FCALL (they include the commands they run)
	ScriptCalls   float64
	Commands      float64 // every command, those inside scripts included (INFO excluded)
	RoundTrips    float64 // total_reads_processed delta, less the tool's INFO reads
	BytesIn       float64 // total_net_input_bytes per submit: the request's size
	BytesOut      float64 // total_net_output_bytes per submit
	Top           []string
	StreamPerJob  float64 `json:",omitempty"` // Sundial: events stream bytes per single-submitted job
	Load          [3]float64
	Err           string `json:",omitempty"`
	CmdUsPerJob   map[string]float64
	CmdCallPerJob map[string]float64
}

type report struct {
	Date      string
	Commit    string
	Redis     string
	Versions  map[string]string
	GOMAXPROC int
	LoadStart [3]float64
	N         int
	Submits   int
	Memory    []memResult
	Submit    []submitResult
}

func main() {
	n := flag.Int("n", 100000, "memory: jobs stored in each state")
	submits := flag.Int("submits", 50000, "submit: single-job submits from one producer")
	systemsF := flag.String("systems", "sundial,asynq,bullmq", "systems to measure")
	only := flag.String("only", "memory,submit", "measurements: memory, submit")
	statesF := flag.String("states", strings.Join(states, ","), "memory: states to measure")
	asJSON := flag.Bool("json", false, "print JSON instead of markdown")
	jsonFile := flag.String("json-file", "", "also write the JSON to this file")
	redisBin := flag.String("redis-server", "redis-server", "the redis-server binary")
	nodeScript := flag.String("node-script", "", "the BullMQ script (default: node/bullmq.js under the current directory; run.sh passes it)")
	commit := flag.String("commit", "", "the Sundial commit, for the report")
	flag.Parse()
	if *nodeScript == "" {
		*nodeScript = filepath.Join("node", "bullmq.js")
	}
	ctx := context.Background()
	rep := report{Date: time.Now().UTC().Format("2006-01-02 15:04 MST"), Commit: *commit, GOMAXPROC: runtime.GOMAXPROCS(0),
		LoadStart: loadavg(), N: *n, Submits: *submits, Versions: versions()}
	if out, err := exec.Command(*redisBin, "--version").Output(); err == nil {
		rep.Redis = strings.TrimSpace(string(out))
	}
	makers := map[string]func(string) (system, error){"sundial": newSundial, "asynq": newAsynq, "bullmq": newBull(*nodeScript)}
	systems := strings.Split(*systemsF, ",")
	for _, s := range systems {
		if makers[s] == nil {
			fatalf("unknown system %q", s)
		}
	}
	if slices.Contains(systems, "bullmq") {
		rep.Versions["bullmq"] = bullVersion(*redisBin, makers["bullmq"])
	}
	measure := strings.Split(*only, ",")
	if slices.Contains(measure, "memory") {
		for _, st := range strings.Split(*statesF, ",") {
			for _, s := range systems {
				r := runMemory(ctx, *redisBin, s, st, *n, makers[s])
				logf("memory %s %s: %d jobs, %.0f B/job (%s)", s, st, r.Jobs, r.BytesPerJob, r.Err)
				rep.Memory = append(rep.Memory, r)
			}
		}
	}
	if slices.Contains(measure, "submit") {
		for _, s := range systems {
			r := runSubmit(ctx, *redisBin, s, *submits, makers[s])
			logf("submit %s: %.1f µs Redis CPU, %.0f jobs/s (%s)", s, r.CPUUsPerJob, r.JobsPerSec, r.Err)
			rep.Submit = append(rep.Submit, r)
		}
	}
	js, _ := json.MarshalIndent(rep, "", "  ")
	if *jsonFile != "" {
		if err := os.WriteFile(*jsonFile, append(js, '\n'), 0o644); err != nil {
			logf("%v", err)
		}
	}
	if *asJSON {
		fmt.Println(string(js))
		return
	}
	fmt.Print(markdown(rep))
}

func runMemory(ctx context.Context, bin, name, state string, n int, mk func(string) (system, error)) (r memResult) {
	r = memResult{System: name, State: state, Label: stateLabel[name][state], Load: loadavg()}
	fail := func(err error) memResult { r.Err = err.Error(); return r }
	srv, err := startRedis(bin)
	if err != nil {
		return fail(err)
	}
	defer srv.stop()
	sys, err := mk(srv.addr)
	if err != nil {
		return fail(err)
	}
	defer sys.Close()
	// One job first: connections made, scripts loaded, the queue's own keys
	// written, so that the delta is the jobs'.
	c0, err := sys.Fill(ctx, state, 1)
	if err != nil {
		return fail(err)
	}
	if r.Before, err = usedMemory(ctx, srv.rdb); err != nil {
		return fail(err)
	}
	start := time.Now()
	c1, err := sys.Fill(ctx, state, n)
	if err != nil {
		return fail(err)
	}
	r.Seconds = time.Since(start).Seconds()
	r.Jobs = c1 - c0
	if r.Jobs <= 0 {
		return fail(fmt.Errorf("no jobs in state %s (%d before, %d after)", state, c0, c1))
	}
	if r.After, err = usedMemory(ctx, srv.rdb); err != nil {
		return fail(err)
	}
	r.BytesPerJob = float64(r.After-r.Before) / float64(r.Jobs)
	if r.Keys, r.JobKeyUsage, err = keyBreakdown(ctx, srv.rdb, c1); err != nil {
		return fail(err)
	}
	if name == "sundial" {
		// The events stream holds every event until history recorded it
		// (then the poller trims it): trim it here as that would, and measure again.
		ev := queue.EventStreamKey(queueName)
		if err := srv.rdb.XTrimMaxLen(ctx, ev, 0).Err(); err != nil {
			return fail(err)
		}
		m, err := usedMemory(ctx, srv.rdb)
		if err != nil {
			return fail(err)
		}
		r.NoStreamPerJob = float64(m-r.Before) / float64(r.Jobs)
		r.StreamPerJob = r.BytesPerJob - r.NoStreamPerJob
	}
	return r
}

// idSegment matches the parts of a key that name one job (ULIDs, UUIDs,
// numbers), so that keys group by pattern.
var idSegment = regexp.MustCompile(`[0-9A-HJKMNP-TV-Z]{26}|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|\b[0-9]+\b`)

// keyBreakdown groups every key by pattern with its MEMORY USAGE; a
// pattern with at least jobs/2 keys is one key per job, measured over a
// sample of 1000. It also returns the per-job pattern's average.
func keyBreakdown(ctx context.Context, rdb *redis.Client, jobs int) ([]keyGroup, int64, error) {
	groups := map[string][]string{}
	iter := rdb.Scan(ctx, 0, "*", 1000).Iterator()
	for iter.Next(ctx) {
		k := iter.Val()
		p := idSegment.ReplaceAllString(k, "<id>")
		groups[p] = append(groups[p], k)
	}
	if err := iter.Err(); err != nil {
		return nil, 0, err
	}
	var out []keyGroup
	var jobKey int64
	for p, keys := range groups {
		g := keyGroup{Pattern: p, Keys: len(keys), PerJobKeys: len(keys)*2 >= jobs}
		sample := keys
		if g.PerJobKeys && len(sample) > 1000 {
			sample = sample[:1000]
		}
		pipe := rdb.Pipeline()
		cmds := make([]*redis.IntCmd, len(sample))
		for i, k := range sample {
			cmds[i] = pipe.MemoryUsage(ctx, k, 0)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return nil, 0, err
		}
		var sum int64
		for _, c := range cmds {
			sum += c.Val()
		}
		g.Bytes = sum
		if len(sample) < len(keys) {
			g.Bytes = sum * int64(len(keys)) / int64(len(sample))
		}
		g.PerJob = float64(g.Bytes) / float64(jobs)
		if g.PerJobKeys && len(sample) > 0 {
			jobKey = max(jobKey, sum/int64(len(sample)))
		}
		out = append(out, g)
	}
	slices.SortFunc(out, func(a, b keyGroup) int { return cmp.Compare(b.Bytes, a.Bytes) })
	return out, jobKey, nil
}

func runSubmit(ctx context.Context, bin, name string, n int, mk func(string) (system, error)) (r submitResult) {
	r = submitResult{System: name, N: n, Load: loadavg()}
	fail := func(err error) submitResult { r.Err = err.Error(); return r }
	srv, err := startRedis(bin)
	if err != nil {
		return fail(err)
	}
	defer srv.stop()
	sys, err := mk(srv.addr)
	if err != nil {
		return fail(err)
	}
	defer sys.Close()
	if _, err := sys.Submit(ctx, warmSubmits); err != nil {
		return fail(err)
	}
	before, err := readInfo(ctx, srv.rdb, "commandstats", "stats", "cpu")
	if err != nil {
		return fail(err)
	}
	d, err := sys.Submit(ctx, n)
	if err != nil {
		return fail(err)
	}
	after, err := readInfo(ctx, srv.rdb, "commandstats", "stats", "cpu")
	if err != nil {
		return fail(err)
	}
	fn := float64(n)
	r.Seconds = d.Seconds()
	r.JobsPerSec = fn / d.Seconds()
	r.CPUUsPerJob = (after.cpu() - before.cpu()) * 1e6 / fn
	r.RoundTrips = float64(after.int("total_reads_processed")-before.int("total_reads_processed")-1) / fn // less the first INFO's read
	r.BytesIn = float64(after.int("total_net_input_bytes")-before.int("total_net_input_bytes")) / fn
	r.BytesOut = float64(after.int("total_net_output_bytes")-before.int("total_net_output_bytes")) / fn
	r.CmdUsPerJob, r.CmdCallPerJob = map[string]float64{}, map[string]float64{}
	type kv struct {
		k string
		v int64
	}
	var all []kv
	for k, a := range after.cmds {
		if k == "info" {
			continue
		}
		b := before.cmds[k]
		dc, du := a.calls-b.calls, a.usec-b.usec
		if dc <= 0 {
			continue
		}
		r.CmdCallPerJob[k] = float64(dc) / fn
		r.CmdUsPerJob[k] = float64(du) / fn
		r.Commands += float64(dc) / fn
		if isScript(k) {
			r.ScriptCalls += float64(dc) / fn
			r.ScriptUsPer += float64(du) / fn
		}
		all = append(all, kv{k, dc})
	}
	slices.SortFunc(all, func(a, b kv) int { return cmp.Or(cmp.Compare(b.v, a.v), cmp.Compare(a.k, b.k)) })
	for i := 0; i < len(all) && i < 8; i++ {
		r.Top = append(r.Top, fmt.Sprintf("%s %.2f", strings.ToUpper(all[i].k), float64(all[i].v)/fn))
	}
	if name == "sundial" {
		if u, err := srv.rdb.MemoryUsage(ctx, queue.EventStreamKey(queueName), 0).Result(); err == nil {
			r.StreamPerJob = float64(u) / float64(n+warmSubmits)
		}
	}
	return r
}

func isScript(cmd string) bool {
	switch cmd {
	case "eval", "evalsha", "eval_ro", "evalsha_ro", "fcall", "fcall_ro":
		return true
	}
	return false
}

func bullVersion(bin string, mk func(string) (system, error)) string {
	srv, err := startRedis(bin)
	if err != nil {
		return "unknown"
	}
	defer srv.stop()
	s, err := mk(srv.addr)
	if err != nil {
		return "unknown"
	}
	defer s.Close()
	return s.(*bullSys).version()
}

func versions() map[string]string {
	v := map[string]string{"go": runtime.Version()}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			switch d.Path {
			case "github.com/hibiken/asynq":
				v["asynq"] = d.Version
			case "github.com/redis/go-redis/v9":
				v["go-redis"] = d.Version
			}
		}
	}
	return v
}

func loadavg() [3]float64 {
	var l [3]float64
	b, err := os.ReadFile("/proc/loadavg")
	if err == nil {
		fmt.Sscanf(string(b), "%f %f %f", &l[0], &l[1], &l[2])
	}
	return l
}

func logf(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "peercost: "+format+"\n", a...)
}

func fatalf(format string, a ...any) {
	logf(format, a...)
	os.Exit(2)
}
