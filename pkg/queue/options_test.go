package queue_test

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sundialhq/sundial/pkg/job"
	"github.com/sundialhq/sundial/pkg/queue"
)

// wantExpired checks that job id ended dead for an expiry (why: "expired"
// or "deadline passed") and never started.
func wantExpired(t *testing.T, e *env, id, why string) {
	t.Helper()
	j := e.get(t, id)
	wantState(t, j, job.Dead)
	if !strings.HasPrefix(j.LastError, why) {
		t.Fatalf("job %s: last_error %q, want it to start with %q", id, j.LastError, why)
	}
	if j.StartedAt != nil || j.Attempt != 0 {
		t.Fatalf("job %s started (attempt %d, started_at %v)", id, j.Attempt, j.StartedAt)
	}
}

// An expired job ends dead wherever it waits, and no claim ever starts it:
// queued (the poller late), scheduled, waiting for a dependency, held back
// by a limit; its dependents follow the dependency-failure rule.
func TestExpiryInEveryWaitingState(t *testing.T) {
	e := newEnv(t)
	const q = "exp"
	if _, _, err := e.q.SetLimit(e.ctx, q, queue.Limit{Name: "one", Types: []string{"limited"}, Concurrency: 1}); err != nil {
		t.Fatal(err)
	}
	in := ptr(60.0)
	queued := e.submit(t, job.Spec{Queue: q, Type: "t", ExpiresInSeconds: in})[0]
	scheduled := e.submit(t, job.Spec{Queue: q, Type: "t", ExpiresInSeconds: in, DelaySeconds: ptr(120.0)})[0]
	blocker := e.submit(t, job.Spec{Queue: q, Type: "blocker", DelaySeconds: ptr(3600.0)})[0]
	waiting := e.submit(t, job.Spec{Queue: q, Type: "t", ExpiresInSeconds: in, DependsOn: []string{blocker.ID}})[0]
	dependent := e.submit(t, job.Spec{Queue: q, Type: "t", DependsOn: []string{queued.ID}})[0]
	runAnyway := e.submit(t, job.Spec{Queue: q, Type: "t", DependsOn: []string{scheduled.ID}, OnDependencyFailure: job.DependencyRun})[0]
	holder := e.submit(t, job.Spec{Queue: q, Type: "limited"})[0]
	held := e.submit(t, job.Spec{Queue: q, Type: "limited", ExpiresInSeconds: in})[0]
	if got := e.get(t, queued.ID); got.StartBy == nil || !got.StartBy.Equal(e.clock.Now().Add(time.Minute)) {
		t.Fatalf("start_by read back %v", got.StartBy)
	}

	// The limited pair: the holder runs, the other is parked by the limit.
	leases, err := e.q.Claim(e.ctx, q, 10, "w1", "limited")
	if err != nil || len(leases) != 1 || leases[0].Job.ID != holder.ID {
		t.Fatalf("claim of the limited type: %v %v", leases, err)
	}
	if j := e.get(t, held.ID); j.ThrottledBy != "one" {
		t.Fatalf("held job not held back by the limit: %+v", j)
	}

	// Past start_by, before any poller pass: a claim ends the queued job
	// instead of starting it.
	e.clock.Advance(61 * time.Second)
	if l := e.claim(t, q, 10); len(l) != 0 {
		t.Fatalf("a claim after start_by started %s", l[0].Job.ID)
	}
	wantExpired(t, e, queued.ID, "expired")
	wantState(t, e.get(t, dependent.ID), job.Cancelled)

	// The poller's pass ends the others where they wait.
	if _, _, err := e.q.Promote(e.ctx, q, 100); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{scheduled.ID, waiting.ID, held.ID} {
		wantExpired(t, e, id, "expired")
	}
	// on_dependency_failure run: its dependency expired, it runs.
	wantState(t, e.get(t, runAnyway.ID), job.Queued)
	l := e.claim(t, q, 10)
	if len(l) != 1 || l[0].Job.ID != runAnyway.ID {
		t.Fatalf("after the sweep the claim took %v, want only %s", l, runAnyway.ID)
	}
	// The limit's count of parked jobs went back to zero, and the
	// holder's end frees its slot for nobody.
	st, err := e.q.Limits(e.ctx, q)
	if err != nil || len(st) != 1 || st[0].Throttled != 0 {
		t.Fatalf("limit status after expiry: %+v %v", st, err)
	}
	var dead int
	for _, ev := range e.events(t, q) {
		if ev.Event == job.EventDead {
			dead++
		}
	}
	if dead != 4 {
		t.Fatalf("%d dead events, want 4 (one per expired job)", dead)
	}
	// Nothing is left in the expiry set but the blocker-free entries.
	if n, _ := e.q.Redis().ZCard(e.ctx, "sundial:{"+q+"}:expires").Result(); n != 0 {
		t.Fatalf("%d expiry entries left", n)
	}
}

// start_by holds for the first attempt only: a job that started in time
// and failed is retried past it.
func TestExpiryLeavesAStartedJobAlone(t *testing.T) {
	e := newEnv(t)
	const q = "exp2"
	j := e.submit(t, job.Spec{Queue: q, Type: "t", ExpiresInSeconds: ptr(10.0), Backoff: &job.Backoff{BaseSeconds: 30, MaxSeconds: 30}})[0]
	l := e.claim(t, q, 1)
	if len(l) != 1 {
		t.Fatal("not claimed")
	}
	e.clock.Advance(5 * time.Second)
	e.complete(t, q, queue.Outcome{ID: j.ID, Token: l[0].Token, Kind: queue.OutcomeFailed, Error: "boom", WorkerID: "w1"})
	e.clock.Advance(60 * time.Second)
	if _, _, err := e.q.Promote(e.ctx, q, 100); err != nil {
		t.Fatal(err)
	}
	l = e.claim(t, q, 1)
	if len(l) != 1 || l[0].Job.Attempt != 2 {
		t.Fatalf("the retry past start_by did not start: %v", l)
	}
}

// A deadline cuts the attempt's timeout, refuses a retry past it, and
// ends a job still waiting when it passes.
func TestDeadline(t *testing.T) {
	e := newEnv(t)
	const q = "dl"
	j := e.submit(t, job.Spec{Queue: q, Type: "t", DeadlineInSeconds: ptr(12.5), TimeoutSeconds: ptr(60),
		Backoff: &job.Backoff{BaseSeconds: 20, MaxSeconds: 20}})[0]
	l := e.claim(t, q, 1)
	if len(l) != 1 || l[0].Job.TimeoutSeconds != 13 {
		t.Fatalf("claim: timeout %d, want 13 (the deadline's 12.5 s, rounded up)", l[0].Job.TimeoutSeconds)
	}
	// A failure whose retry would start past the deadline ends the job.
	e.clock.Advance(2 * time.Second)
	st := e.complete(t, q, queue.Outcome{ID: j.ID, Token: l[0].Token, Kind: queue.OutcomeFailed, Error: "boom", WorkerID: "w1"})
	if st[0] != queue.StatusDead && st[0] != queue.StatusScheduled {
		t.Fatalf("status %s", st[0])
	}
	got := e.get(t, j.ID)
	if st[0] == queue.StatusScheduled {
		// The backoff's jitter drew a retry before the deadline: the
		// sweep ends it when the deadline passes, before the retry runs.
		e.clock.Advance(11 * time.Second)
		if _, _, err := e.q.Promote(e.ctx, q, 100); err != nil {
			t.Fatal(err)
		}
		got = e.get(t, j.ID)
		if got.State == job.Queued {
			if l := e.claim(t, q, 1); len(l) != 0 {
				t.Fatal("an attempt started past the deadline")
			}
			got = e.get(t, j.ID)
		}
	}
	wantState(t, got, job.Dead)
	if !strings.Contains(got.LastError, "deadline passed") {
		t.Fatalf("last_error %q", got.LastError)
	}

	// Waiting when the deadline passes: ended by the sweep.
	w := e.submit(t, job.Spec{Queue: q, Type: "t", DeadlineInSeconds: ptr(30.0), DelaySeconds: ptr(60.0)})[0]
	e.clock.Advance(31 * time.Second)
	if _, _, err := e.q.Promote(e.ctx, q, 100); err != nil {
		t.Fatal(err)
	}
	wantExpired(t, e, w.ID, "deadline passed")
}

// A debounce key makes a burst one job: replace keeps the last payload
// and the first's run time; extend moves the run time, never past max wait.
func TestDebounce(t *testing.T) {
	e := newEnv(t)
	const q = "deb"
	sub := func(payload string, d job.Debounce) queue.Submitted {
		t.Helper()
		j := e.build(t, job.Spec{Queue: q, Type: "t", Payload: json.RawMessage(payload), Debounce: &d})
		res, err := e.q.Submit(e.ctx, []*job.Job{j})
		if err != nil {
			t.Fatal(err)
		}
		return res[0]
	}
	rep := job.Debounce{Key: "r", WindowSeconds: 10}
	first := sub(`{"n":1}`, rep)
	if first.Debounced || first.Job.State != job.Scheduled {
		t.Fatalf("first submit: %+v", first)
	}
	e.clock.Advance(3 * time.Second)
	second := sub(`{"n":2}`, rep)
	if !second.Debounced || second.Job.ID != first.Job.ID || string(second.Job.Payload) != `{"n":2}` {
		t.Fatalf("second submit: debounced %v id %s payload %s", second.Debounced, second.Job.ID, second.Job.Payload)
	}
	if !second.Job.RunAt.Equal(first.Job.RunAt) {
		t.Fatalf("replace moved the run time: %v → %v", first.Job.RunAt, second.Job.RunAt)
	}

	ext := job.Debounce{Key: "e", WindowSeconds: 10, Mode: job.DebounceExtend, MaxWaitSeconds: 25}
	x := sub(`{"n":1}`, ext)
	start := e.clock.Now()
	for i := range 5 {
		e.clock.Advance(8 * time.Second)
		r := sub(`{"n":9}`, ext)
		if !r.Debounced || r.Job.ID != x.Job.ID {
			t.Fatalf("extend submit %d made a new job", i)
		}
		want := e.clock.Now().Add(10 * time.Second)
		if max := start.Add(25 * time.Second); want.After(max) {
			want = max
		}
		if !r.Job.RunAt.Equal(want) {
			t.Fatalf("extend submit %d: run_at %v, want %v", i, r.Job.RunAt, want)
		}
		if string(r.Job.Payload) != `{"n":1}` {
			t.Fatalf("extend replaced the payload: %s", r.Job.Payload)
		}
		if !e.clock.Now().Before(start.Add(25 * time.Second)) {
			break
		}
	}

	// Once the job started, the key makes a new job.
	e.clock.Advance(time.Minute)
	if _, _, err := e.q.Promote(e.ctx, q, 100); err != nil {
		t.Fatal(err)
	}
	if l := e.claim(t, q, 10); len(l) != 2 {
		t.Fatalf("claimed %d jobs, want the 2 debounced ones", len(l))
	}
	if again := sub(`{"n":3}`, rep); again.Debounced || again.Job.ID == first.Job.ID {
		t.Fatalf("a submit after the job started was debounced into it")
	}
	var deb int
	for _, ev := range e.events(t, q) {
		if ev.Event == job.EventDebounced {
			deb++
		}
	}
	if deb < 3 {
		t.Fatalf("%d debounced events", deb)
	}
}

// Jobs of one sequence key run one at a time in submit order, other keys
// beside them; a dead job lets the next run (continue) or cancels the
// rest (cancel); the key is forgotten when its last job ends.
func TestSequence(t *testing.T) {
	e := newEnv(t)
	const q = "seq"
	seq := func(key, onFailure string) *job.Sequence { return &job.Sequence{Key: key, OnFailure: onFailure} }
	a := e.submit(t,
		job.Spec{Queue: q, Type: "t", Sequence: seq("a", ""), MaxAttempts: ptr(1)},
		job.Spec{Queue: q, Type: "t", Sequence: seq("a", ""), MaxAttempts: ptr(1)},
		job.Spec{Queue: q, Type: "t", Sequence: seq("a", "")})
	b := e.submit(t, job.Spec{Queue: q, Type: "t", Sequence: seq("b", job.SequenceCancel), MaxAttempts: ptr(1)})[0]
	b2 := e.submit(t, job.Spec{Queue: q, Type: "t", Sequence: seq("b", job.SequenceCancel)})[0]
	if a[0].State != job.Queued || a[1].State != job.Waiting || b2.State != job.Waiting {
		t.Fatalf("the submit answered states %s, %s, %s; want queued, waiting, waiting", a[0].State, a[1].State, b2.State)
	}
	if got := e.get(t, a[2].ID); len(got.DependsOn) != 1 || got.DependsOn[0] != a[1].ID {
		t.Fatalf("third job of key a depends on %v, want the one ahead, %s", got.DependsOn, a[1].ID)
	}
	if got := e.get(t, a[1].ID); got.State != job.Waiting || got.HeldBack == nil || !strings.Contains(got.HeldBack.Message, a[0].ID) {
		t.Fatalf("second job of key a: %s, held back %+v; want waiting for %s", got.State, got.HeldBack, a[0].ID)
	}
	next := func(want ...string) []queue.Lease {
		t.Helper()
		l := e.claim(t, q, 10)
		var got []string
		for _, x := range l {
			got = append(got, x.Job.ID)
		}
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Fatalf("claimed %v, want %v", got, want)
		}
		return l
	}
	l := next(a[0].ID, b.ID)
	e.complete(t, q, queue.Outcome{ID: a[0].ID, Token: l[0].Token, Kind: queue.OutcomeSucceeded, WorkerID: "w1"},
		queue.Outcome{ID: b.ID, Token: l[1].Token, Kind: queue.OutcomeFailed, Error: "x", WorkerID: "w1"})
	wantState(t, e.get(t, b2.ID), job.Cancelled) // cancel: the rest of b goes
	l = next(a[1].ID)
	e.complete(t, q, queue.Outcome{ID: a[1].ID, Token: l[0].Token, Kind: queue.OutcomeDead, Error: "x", WorkerID: "w1"})
	l = next(a[2].ID) // continue: the next of a runs after a dead one
	if n, _ := e.q.Redis().Exists(e.ctx, "sundial:{"+q+"}:seq:a").Result(); n != 1 {
		t.Fatal("key a forgotten while its last job runs")
	}
	e.complete(t, q, queue.Outcome{ID: a[2].ID, Token: l[0].Token, Kind: queue.OutcomeSucceeded, WorkerID: "w1"})
	if n, _ := e.q.Redis().Exists(e.ctx, "sundial:{"+q+"}:seq:a").Result(); n != 0 {
		t.Fatal("key a kept after its last job ended")
	}
	// A new job of the key runs at once.
	c := e.submit(t, job.Spec{Queue: q, Type: "t", Sequence: seq("a", "")})[0]
	wantState(t, c, job.Queued)
	if got := e.get(t, c.ID); got.Sequence == nil || got.Sequence.Key != "a" || got.Sequence.OnFailure != job.SequenceContinue {
		t.Fatalf("sequence read back %+v", got.Sequence)
	}
}

// Tags are kept and read back; bad ones are refused at build.
func TestTags(t *testing.T) {
	e := newEnv(t)
	j := e.submit(t, job.Spec{Queue: "tags", Type: "t", Tags: []string{"customer:42", "region=eu"}})[0]
	if got := e.get(t, j.ID); strings.Join(got.Tags, ",") != "customer:42,region=eu" {
		t.Fatalf("tags read back %v", got.Tags)
	}
	for _, bad := range [][]string{{"a b"}, {"x", "x"}, {strings.Repeat("t", 65)}, make([]string, 11)} {
		if _, err := (&job.Spec{Type: "t", Tags: bad}).Build(time.Now()); err == nil {
			t.Fatalf("tags %q accepted", bad)
		}
	}
}

// A retry by hand runs an expired job: its start_by and deadline go.
func TestRetryOfAnExpiredJobRunsIt(t *testing.T) {
	e := newEnv(t)
	const q = "expretry"
	j := e.submit(t, job.Spec{Queue: q, Type: "t", ExpiresInSeconds: ptr(1.0), DeadlineInSeconds: ptr(2.0)})[0]
	e.clock.Advance(3 * time.Second)
	if _, _, err := e.q.Promote(e.ctx, q, 100); err != nil {
		t.Fatal(err)
	}
	wantExpired(t, e, j.ID, "deadline passed")
	if _, err := e.q.Retry(e.ctx, j.ID); err != nil {
		t.Fatal(err)
	}
	if l := e.claim(t, q, 1); len(l) != 1 || l[0].Job.ID != j.ID {
		t.Fatalf("the retried job did not start: %v", l)
	}
	if got := e.get(t, j.ID); got.StartBy != nil || got.Deadline != nil {
		t.Fatalf("start_by %v / deadline %v kept after a retry by hand", got.StartBy, got.Deadline)
	}
}

// A job keeps the lines its running attempt logs, up to the cap, the
// oldest dropped first and counted; a stale token keeps nothing.
func TestJobLogs(t *testing.T) {
	e := newEnv(t)
	const q = "logs"
	e.q = queue.New(e.srv.Client(), queue.Options{Now: e.clock.Now, LeaseClock: e.clock.Now, LeaseTTL: 11 * time.Second, LogCap: 250})
	j := e.submit(t, job.Spec{Queue: q, Type: "t"})[0]
	l := e.claim(t, q, 1)[0]
	for b := range 3 {
		lines := make([]queue.LogEntry, 100)
		for i := range lines {
			lines[i] = queue.LogEntry{Level: "info", Message: "line " + strconv.Itoa(b*100+i+1), Fields: map[string]string{"b": strconv.Itoa(b)}}
		}
		first, err := e.q.AppendLogs(e.ctx, q, l, lines)
		if err != nil || first != int64(b*100+1) {
			t.Fatalf("append %d: first %d, %v", b, first, err)
		}
	}
	if _, err := e.q.AppendLogs(e.ctx, q, queue.Lease{Job: l.Job, Token: "1-000000000000"}, []queue.LogEntry{{Level: "info", Message: "x"}}); err != queue.ErrLeaseLost {
		t.Fatalf("a stale token's lines: %v, want ErrLeaseLost", err)
	}
	if _, err := e.q.AppendLogs(e.ctx, q, l, []queue.LogEntry{{Level: "loud", Message: "x"}}); err == nil {
		t.Fatal("a line of an unknown level was kept")
	}
	lines, dropped, err := e.q.Logs(e.ctx, q, j.ID, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if len(lines) != 250 || dropped != 50 || lines[0].Seq != 51 || lines[249].Seq != 300 || lines[0].Message != "line 51" || lines[0].Attempt != 1 {
		t.Fatalf("kept %d lines (first %+v), dropped %d; want 250 from seq 51, 50 dropped", len(lines), lines[0], dropped)
	}
	page, _, _ := e.q.Logs(e.ctx, q, j.ID, 290, 5)
	if len(page) != 5 || page[0].Seq != 291 {
		t.Fatalf("after 290: %+v", page)
	}
	if got := e.get(t, j.ID); got.Logs == nil || got.Logs.Lines != 250 || got.Logs.Dropped != 50 {
		t.Fatalf("job's log counts %+v", got.Logs)
	}
	var logEvents int
	for _, ev := range e.events(t, q) {
		if ev.Event == job.EventLog {
			logEvents++
		}
	}
	if logEvents != 3 {
		t.Fatalf("%d log events, want 3", logEvents)
	}
}
