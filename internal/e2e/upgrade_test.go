package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sundialhq/sundial/internal/proctest"
	"github.com/sundialhq/sundial/pkg/job"
	"github.com/sundialhq/sundial/pkg/queue"
	"github.com/sundialhq/sundial/pkg/queue/queuetest"
)

// previousRelease is the commit whose services TestRollingUpgrade runs
// beside this checkout's: release 0.1.0, the release this one replaces.
// Move it to each new release once it is cut (and, between releases, to
// the newest landing whenever the scripts or what the engine writes to
// Redis change), so that every change is checked against what it replaces.
const previousRelease = "252493e5092a093053e3784fb98ecb233f654d8d" // 0.1.0

// oldFormat is the newest storage format previousRelease writes, and
// oldReads the formats it reads (its pkg/queue/format.go: WriteFormat,
// readFormats). 0.1.0 reads and writes what this release does, so no
// format switch happens during this rollout.
const oldFormat = 4

var oldReads = []int{1, 2, 3, 4}

// oldServices builds the api, worker and poller of commit, taken from this
// repository's history, and returns the directory holding them. Without
// the history (a shallow clone, an export) the test is skipped, and fails
// under CI=true, whose clone has it.
func oldServices(t *testing.T, commit string) string {
	t.Helper()
	unavailable := func(format string, args ...any) {
		t.Helper()
		if os.Getenv("CI") == "true" {
			t.Fatalf(format, args...)
		}
		t.Skipf(format, args...)
	}
	root, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		unavailable("not in a git checkout: %v", err)
	}
	repo := strings.TrimSpace(string(root))
	if exec.Command("git", "-C", repo, "cat-file", "-e", commit+"^{commit}").Run() != nil {
		unavailable("commit %s is not in this checkout's history", commit)
	}
	src, bin := t.TempDir(), t.TempDir()
	extract := exec.Command("sh", "-c", `git -C "$1" archive "$2" | tar -x -C "$3"`, "extract", repo, commit, src)
	if out, err := extract.CombinedOutput(); err != nil {
		t.Fatalf("extract %s: %v\n%s", commit, err, out)
	}
	build := exec.Command("go", "build", "-o", bin+"/", "./services/api", "./services/worker", "./services/poller")
	build.Dir = src
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the services of %s: %v\n%s", commit, err, out)
	}
	return bin
}

// TestRollingUpgrade runs the previous release's API, poller and worker
// beside this checkout's on one Redis and one queue, as a rolling upgrade
// has them (docs/deploy.md, "Upgrades"): jobs are submitted through both
// APIs and the library, run by both workers, retried, delayed, chained and
// cancelled, and a batch's members run by the old worker; the old worker
// is killed (-9) while it holds leases and a new one takes its place, then
// the old poller stops. Every job must end once, in the state it should,
// with nothing lost, and the batch count each member once.
func TestRollingUpgrade(t *testing.T) {
	t.Parallel()
	old := oldServices(t, previousRelease)
	srv := queuetest.Start(t)
	rdb := srv.Client()
	q := queue.New(rdb, queue.Options{})
	ctx := context.Background()
	// A short recount wait: the batch below relies on it (0.1.0 ignores it).
	env := serviceEnv(srv, "SUNDIAL_HISTORY=off", "SUNDIAL_BATCH_RECOUNT_AFTER=2s")
	worker := func(bin, id string) *proctest.Proc {
		return startProc(t, bin, append(env, "SUNDIAL_CONCURRENCY=10", "SUNDIAL_WORKER_ID="+id)...)
	}

	// The old release runs first, as in a rollout: where the old release
	// lacks the newest format, a new process that found no reader lacking it
	// would switch the storage format at once, and the old processes
	// starting after it would be refused. The old release reads formats
	// oldReads, and on this new Redis moves the marker to oldFormat at once
	// (0.1.0: formats 1 to 4, marker at 4, as this release would).
	oldAddr, newAddr := proctest.FreeAddr(t), proctest.FreeAddr(t)
	oldAPI := startProc(t, filepath.Join(old, "api"), append(env, "SUNDIAL_HTTP_ADDR="+oldAddr)...)
	oldPoller := startProc(t, filepath.Join(old, "poller"), env...)
	queuetest.Eventually(t, 30*time.Second, "the old API and poller registered", func() bool {
		st, err := q.Storage(ctx, time.Minute)
		return err == nil && len(st.Readers) == 2 && st.Format == strconv.Itoa(oldFormat) &&
			!slices.ContainsFunc(st.Readers, func(r queue.ReaderInfo) bool { return !slices.Equal(r.Reads, oldReads) })
	})
	startProc(t, binary(t, "api"), append(env, "SUNDIAL_HTTP_ADDR="+newAddr)...)
	startProc(t, binary(t, "poller"), env...)
	for _, addr := range []string{oldAddr, newAddr} {
		queuetest.Eventually(t, 30*time.Second, "the API on "+addr, func() bool { return proctest.Ready(http.DefaultClient, "http://"+addr) })
	}

	// Jobs through each API (REST batches) and through the library; 200 ms
	// each, so that both workers are busy for seconds.
	sleep := job.Spec{Type: "sundial.sleep", Payload: json.RawMessage(`{"ms":200}`),
		TimeoutSeconds: ptr(1), MaxAttempts: ptr(10), Backoff: &job.Backoff{}}
	viaAPI := func(base string, specs ...job.Spec) []*job.Job {
		t.Helper()
		body, _ := json.Marshal(map[string]any{"jobs": specs})
		res, err := http.Post("http://"+base+"/v1/jobs/batch", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var out struct{ Jobs []*job.Job }
		if res.StatusCode != http.StatusCreated || json.NewDecoder(res.Body).Decode(&out) != nil || len(out.Jobs) != len(specs) {
			t.Fatalf("batch through %s: %d", base, res.StatusCode)
		}
		return out.Jobs
	}
	want := map[string]job.State{}
	expect := func(state job.State, jobs ...*job.Job) {
		for _, j := range jobs {
			want[j.ID] = state
		}
	}
	// A batch through the new API, its members and its on_success callback
	// in the queue both workers serve, its members first in line: the old
	// worker, which starts first, takes them. A worker of a release that
	// knows no batches (0.1.0) ends a member without reporting it to its
	// batch; the new poller's recount counts it instead, after
	// SUNDIAL_BATCH_RECOUNT_AFTER (CHANGELOG.md, "Upgrade notes"). Every
	// member must be counted once, and the callback fire once.
	const batchID = "upgrade-batch"
	var members []string
	{
		body, _ := json.Marshal(map[string]any{"id": batchID, "jobs": slices.Repeat([]job.Spec{sleep}, 20),
			"on_success": job.Spec{Type: "sundial.echo"}})
		res, err := http.Post("http://"+newAddr+"/v1/batches", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		var out struct {
			JobIDs []string `json:"job_ids"`
		}
		err = json.NewDecoder(res.Body).Decode(&out)
		res.Body.Close()
		if res.StatusCode != http.StatusCreated || err != nil || len(out.JobIDs) != 20 {
			t.Fatalf("batch through %s: %d, %v", newAddr, res.StatusCode, err)
		}
		members = out.JobIDs
		for _, id := range members {
			want[id] = job.Succeeded
		}
	}
	// In rounds, so that each list holds what both releases wrote, mixed,
	// before the workers start.
	for range 4 {
		expect(job.Succeeded, viaAPI(newAddr, slices.Repeat([]job.Spec{sleep}, 25)...)...)
		expect(job.Succeeded, viaAPI(oldAddr, slices.Repeat([]job.Spec{sleep}, 25)...)...)
		specs := []job.Spec{}
		for range 25 {
			specs = append(specs, sleep)
		}
		for range 12 { // fail once, then succeed: a retry through the scheduled set
			specs = append(specs, job.Spec{Type: "sundial.fail", Payload: json.RawMessage(`{"times":1}`), MaxAttempts: ptr(5), Backoff: &job.Backoff{}})
		}
		for range 8 {
			specs = append(specs, job.Spec{Type: "sundial.echo", DelaySeconds: ptr(1.0)})
		}
		expect(job.Succeeded, submit(t, q, specs)...)
	}
	parents := submit(t, q, []job.Spec{sleep, sleep, sleep, sleep, sleep})
	children := make([]job.Spec, len(parents))
	for i, p := range parents {
		children[i] = job.Spec{Type: "sundial.echo", DependsOn: []string{p.ID}}
	}
	expect(job.Succeeded, parents...)
	expect(job.Succeeded, submit(t, q, children)...)
	// Cancelled while queued behind the rest (their ids stay in the list
	// as tombstones for either release's claim to drop), or run already.
	low := submit(t, q, []job.Spec{{Type: "sundial.echo", Priority: job.Low}, {Type: "sundial.echo", Priority: job.Low},
		{Type: "sundial.echo", Priority: job.Low}, {Type: "sundial.echo", Priority: job.Low}})
	for _, j := range low {
		_, err := q.Cancel(ctx, j.ID)
		switch {
		case err == nil:
			expect(job.Cancelled, j)
		case errors.Is(err, queue.ErrConflict):
			expect(job.Succeeded, j)
		default:
			t.Fatal(err)
		}
	}

	// The rollout: a worker of each release; the old one goes while it runs
	// jobs, a new one takes its place, then the old poller goes.
	oldWorker := worker(filepath.Join(old, "worker"), "old")
	queuetest.Eventually(t, 30*time.Second, "the old worker took the first jobs", func() bool {
		ws, _ := q.Workers(ctx, time.Minute)
		return slices.ContainsFunc(ws, func(w queue.WorkerInfo) bool { return w.ID == "old" && len(w.ActiveJobs)+int(w.Processed) > 0 })
	})
	worker(binary(t, "worker"), "new")
	queuetest.Eventually(t, 30*time.Second, "the old worker running jobs", func() bool {
		ws, _ := q.Workers(ctx, time.Minute)
		for _, w := range ws {
			if w.ID == "old" && len(w.ActiveJobs) > 0 && w.Processed > 60 {
				return true
			}
		}
		return false
	})
	// The old worker registers as a reader of oldReads, and every process
	// writes oldFormat, the marker's (docs/engine.md, "Storage format"):
	// where the old release lacks the newest format, it keeps the gate to
	// it shut and the new processes write the older one; 0.1.0 reads
	// formats 1 to 4 and writes 4, as this release does.
	queuetest.Eventually(t, 10*time.Second, "the old worker registered, reading oldReads, every process writing oldFormat", func() bool {
		st, err := q.Storage(ctx, time.Minute)
		if err != nil || st.Format != strconv.Itoa(oldFormat) || len(st.Unregistered) != 0 {
			return false
		}
		for _, r := range st.Readers {
			if r.Writes != oldFormat {
				return false
			}
		}
		return slices.ContainsFunc(st.Readers, func(r queue.ReaderInfo) bool {
			return r.Role == "worker" && slices.Equal(r.Reads, oldReads)
		})
	})
	oldWorker.Kill()
	worker(binary(t, "worker"), "new2")
	queuetest.Eventually(t, 30*time.Second, "a lease expired and retried", func() bool {
		return countEvents(t, eventCounts(t, rdb, "default"), "lease_expired") > 0
	})
	oldPoller.Signal(syscall.SIGTERM, 10*time.Second)

	var batch *queue.BatchInfo
	queuetest.Eventually(t, 90*time.Second, "the batch's on_success fired", func() bool {
		b, err := q.Batch(ctx, batchID)
		if err == nil && b.OnSuccess != nil && b.OnSuccess.State == "fired" {
			batch = b
			return true
		}
		return false
	})
	want[batch.OnSuccess.JobID] = job.Succeeded
	waitAllFinal(t, q, len(want), 90*time.Second)
	counts := eventCounts(t, rdb, "default")
	ranOn := map[string]int{}
	for id, state := range want {
		got, err := q.Get(ctx, id)
		if err != nil {
			t.Fatalf("job %s lost: %v", id, err)
		}
		if got.State != state {
			t.Fatalf("job %s (%s) ended %s, want %s (%s)", id, got.Type, got.State, state, got.LastError)
		}
		c := counts[id]
		if c["succeeded"]+c["dead"]+c["cancelled"] != 1 {
			t.Fatalf("job %s final events: %v", id, c)
		}
		if got.Type == "sundial.fail" && c["failed"] < 1 {
			t.Fatalf("job %s succeeded without its planned failure: %v", id, c)
		}
		ranOn[got.WorkerID]++
	}
	if ranOn["old"] == 0 || ranOn["new"]+ranOn["new2"] == 0 {
		t.Fatalf("the releases did not share the work: %v", ranOn)
	}
	if b, err := q.Batch(ctx, batchID); err != nil || b.Total != len(members) || b.Counts != (queue.BatchCounts{Succeeded: len(members)}) ||
		b.OnSuccess == nil || b.OnSuccess.JobID != batch.OnSuccess.JobID {
		t.Fatalf("batch = %+v, %v; want its %d members counted succeeded once, its callback %s", b, err, len(members), batch.OnSuccess.JobID)
	}
	membersOn := map[string]int{}
	for _, id := range members {
		got, _ := q.Get(ctx, id)
		membersOn[got.WorkerID]++
	}
	if membersOn["old"] == 0 {
		t.Fatalf("the old worker ran no batch member: %v", membersOn)
	}
	t.Logf("%d jobs, finished by worker: %v (batch members: %v), leases expired: %d", len(want), ranOn, membersOn, countEvents(t, counts, "lease_expired"))
	if st, err := q.Storage(ctx, time.Minute); err != nil || st.Format != strconv.Itoa(oldFormat) {
		t.Fatalf("storage = %+v, %v; the marker moved while the old release ran", st, err)
	}

	// The rollout ends: the old API stops; the old worker's registration
	// (killed, so never removed) lapses. Where the old release lacks the
	// newest format, the new processes then move the marker to it and write
	// it one registration lifetime later, and the old release is refused
	// from then on; where it reads it (0.1.0), the marker is there already.
	oldAPI.Signal(syscall.SIGTERM, 10*time.Second)
	newest := strconv.Itoa(queue.WriteFormat)
	queuetest.Eventually(t, 90*time.Second, "the marker to move to the newest format", func() bool {
		st, err := q.Storage(ctx, time.Minute)
		return err == nil && st.Format == newest
	})
	queuetest.Eventually(t, 90*time.Second, "every process to write the newest format", func() bool {
		st, err := q.Storage(ctx, time.Minute)
		if err != nil || len(st.Readers) == 0 {
			return false
		}
		for _, r := range st.Readers {
			if r.Writes != queue.WriteFormat {
				return false
			}
		}
		return true
	})
	// A worker of an old release that reads the newest format (0.1.0)
	// started again now, as one rolled back would be, is not refused: it
	// registers and runs the jobs below beside the new workers.
	var again *proctest.Proc
	if oldFormat == queue.WriteFormat {
		again = worker(filepath.Join(old, "worker"), "old-again")
		queuetest.Eventually(t, 30*time.Second, "the old worker started again registered", func() bool {
			ws, _ := q.Workers(ctx, time.Minute)
			i := slices.IndexFunc(ws, func(w queue.WorkerInfo) bool { return w.ID == "old-again" })
			st, err := q.Storage(ctx, time.Minute)
			return i >= 0 && err == nil && slices.ContainsFunc(st.Readers, func(r queue.ReaderInfo) bool {
				return r.Role == "worker" && r.PID == ws[i].PID && slices.Equal(r.Reads, oldReads) && r.Writes == queue.WriteFormat
			})
		})
	}
	// Through the library (a client that never registered writes every
	// field) and through the new API, whose jobs are compact now (format
	// 4): a job at every default keeps neither its id nor its defaults on
	// its hash, and reads back whole.
	late := submit(t, q, slices.Repeat([]job.Spec{sleep}, 40))
	late = append(late, viaAPI(newAddr, slices.Repeat([]job.Spec{sleep}, 20)...)...)
	compact := viaAPI(newAddr, job.Spec{Type: "sundial.echo"}, job.Spec{Type: "sundial.echo", Priority: job.Low, DelaySeconds: ptr(1.0)})
	for i, j := range compact {
		h := rdb.HGetAll(ctx, queue.JobKey("default", j.ID)).Val()
		_, hasID := h["id"]
		_, hasMax := h["max_attempts"]
		_, hasPrio := h["priority"]
		_, hasRunAt := h["run_at"]
		if hasID || hasMax || hasPrio != (i == 1) || hasRunAt != (i == 1) {
			t.Fatalf("job %d submitted after the switch is not compact: %v", i, h)
		}
	}
	late = append(late, compact...)
	queuetest.Eventually(t, 30*time.Second, "a job running under a claim of format 2 or later", func() bool {
		recs, _ := rdb.HVals(ctx, queue.QueueKey("default", "active")).Result() // the padding has no space
		return slices.ContainsFunc(recs, func(r string) bool { return strings.Count(r, " ") == 5 })
	})
	for _, j := range late {
		want[j.ID] = job.Succeeded
	}
	waitAllFinal(t, q, len(want), 60*time.Second)
	lateOnOld := 0
	for _, j := range late {
		got, err := q.Get(ctx, j.ID)
		if err != nil || got.State != job.Succeeded || got.Attempt != 1 || got.StartedAt == nil || got.WorkerID == "" ||
			got.ID != j.ID || got.Queue != "default" || got.Priority != j.Priority || got.MaxAttempts != j.MaxAttempts ||
			got.TimeoutSeconds != j.TimeoutSeconds || got.Backoff != j.Backoff || !got.RunAt.Equal(j.RunAt.Truncate(time.Millisecond)) {
			t.Fatalf("job %s after the switch: %+v, %v; submitted %+v", j.ID, got, err, j)
		}
		if got.WorkerID == "old-again" {
			lateOnOld++
		}
	}
	if again != nil {
		t.Logf("the old worker started again finished %d of the %d jobs after the rollout", lateOnOld, len(late))
		if !again.Signal(syscall.SIGTERM, 10*time.Second) || again.ExitCode() != 0 {
			t.Fatalf("the old worker started again exited %d (output:\n%s)", again.ExitCode(), again.Output())
		}
		return
	}
	again = startProc(t, filepath.Join(old, "worker"), append(env, "SUNDIAL_WORKER_ID=old-again")...)
	select {
	case <-again.Done():
	case <-time.After(60 * time.Second):
		t.Fatal("the old worker runs against the newest storage format")
	}
	if code := again.ExitCode(); code != 1 || !strings.Contains(again.Output(), "storage format "+newest) {
		t.Fatalf("the old worker exited %d; want 1, saying the format (output:\n%s)", code, again.Output())
	}
}

// countEvents sums one event type over every job of counts.
func countEvents(t *testing.T, counts map[string]map[string]int, event string) int {
	t.Helper()
	n := 0
	for _, c := range counts {
		n += c[event]
	}
	return n
}
