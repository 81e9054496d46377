package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sundialhq/sundial/pkg/job"
	"github.com/sundialhq/sundial/pkg/queue/queuetest"
)

func (a *testAPI) claimJobs(t *testing.T, path string, body map[string]any, hdr ...string) []claimedJob {
	t.Helper()
	var out claimResult
	a.do("POST", path, body, hdr...).decode(t, http.StatusOK, &out)
	return out.Jobs
}

func TestHTTPWorkerClaimCompleteFail(t *testing.T) {
	a := start(t)
	ok := a.submit(t, map[string]any{"type": "a", "payload": map[string]any{"n": 1}})
	bad := a.submit(t, map[string]any{"type": "a", "max_attempts": 5, "backoff": map[string]any{"base_seconds": 0, "max_seconds": 0}})
	got := a.claimJobs(t, "/v1/queues/default/claim", map[string]any{"worker_id": "py-1", "max": 10})
	if len(got) != 2 || got[0].Job.ID != ok.ID || got[1].Job.ID != bad.ID || got[0].Lease.Token == "" || got[0].Job.State != job.Active {
		t.Fatalf("claimed %+v", got)
	}
	if string(got[0].Job.Payload) != `{"n":1}` || got[0].Lease.TTLSeconds != 15 {
		t.Fatalf("claimed job = %+v", got[0])
	}
	// A stale token changes nothing.
	a.do("POST", "/v1/jobs/"+ok.ID+"/complete", map[string]any{"token": got[0].Lease.Token + "9"}).wantError(t, http.StatusConflict, codeConflict, "")
	var out outcomeResult
	a.do("POST", "/v1/jobs/"+ok.ID+"/complete", map[string]any{"token": got[0].Lease.Token, "result": map[string]any{"sent": true}, "worker_id": "py-1"}).
		decode(t, http.StatusOK, &out)
	if out.State != "succeeded" {
		t.Fatalf("complete = %+v", out)
	}
	var j job.Job
	a.do("GET", "/v1/jobs/"+ok.ID, nil).decode(t, http.StatusOK, &j)
	if j.State != job.Succeeded || string(j.Result) != `{"sent":true}` || j.WorkerID != "py-1" {
		t.Fatalf("job after complete = %+v", j)
	}
	// Completing again: the lease is gone.
	a.do("POST", "/v1/jobs/"+ok.ID+"/complete", map[string]any{"token": got[0].Lease.Token}).wantError(t, http.StatusConflict, codeConflict, "")
	// A failure is retried with backoff; retry false sends it to the dead letters.
	a.do("POST", "/v1/jobs/"+bad.ID+"/fail", map[string]any{"token": got[1].Lease.Token, "error": "smtp down"}).decode(t, http.StatusOK, &out)
	if out.State != "scheduled" && out.State != "queued" {
		t.Fatalf("fail = %+v", out)
	}
	a.do("POST", "/v1/jobs/"+bad.ID+"/fail", map[string]any{"token": got[1].Lease.Token, "error": "again"}).wantError(t, http.StatusConflict, codeConflict, "")
	var again []claimedJob
	for deadline := time.Now().Add(10 * time.Second); len(again) == 0; {
		if time.Now().After(deadline) {
			var cur job.Job
			a.do("GET", "/v1/jobs/"+bad.ID, nil).decode(t, http.StatusOK, &cur)
			t.Fatalf("the failed job never came back: %+v (fail said %s)", cur, out.State)
		}
		again = a.claimJobs(t, "/v1/queues/default/claim", map[string]any{"worker_id": "py-1", "wait_seconds": 1})
	}
	a.do("POST", "/v1/jobs/"+bad.ID+"/fail", map[string]any{"token": again[0].Lease.Token, "error": "bad address", "retry": false}).decode(t, http.StatusOK, &out)
	if out.State != "dead" {
		t.Fatalf("fail with retry false = %+v", out)
	}
	// The HTTP worker is in the registry.
	var ws workerList
	a.do("GET", "/v1/workers", nil).decode(t, http.StatusOK, &ws)
	if len(ws.Workers) != 1 || ws.Workers[0].ID != "py-1" || ws.Workers[0].Queues[0] != "default" {
		t.Fatalf("workers = %+v", ws.Workers)
	}
}

func TestHTTPWorkerLongPollWakesOnSubmit(t *testing.T) {
	a := start(t)
	a.submit(t, map[string]any{"type": "warmup", "queue": "lp"})
	a.claimJobs(t, "/v1/queues/lp/claim", map[string]any{"worker_id": "w"})
	type answer struct {
		jobs []claimedJob
		took time.Duration
	}
	done := make(chan answer, 1)
	begin := time.Now()
	go func() {
		var out claimResult
		res := a.do("POST", "/v1/queues/lp/claim", map[string]any{"worker_id": "w", "wait_seconds": 30})
		_ = json.Unmarshal(res.body, &out)
		done <- answer{out.Jobs, time.Since(begin)}
	}()
	// The claim is waiting when the wake-up room has it.
	deadline := time.Now().Add(10 * time.Second)
	for {
		a.s.wake.mu.Lock()
		r := a.s.wake.rooms["lp"]
		waiting := r != nil && len(r.subs) == 1 && r.watching
		a.s.wake.mu.Unlock()
		if waiting {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the long poll never started waiting")
		}
		time.Sleep(5 * time.Millisecond)
	}
	j := a.submit(t, map[string]any{"type": "late", "queue": "lp"})
	got := <-done
	if len(got.jobs) != 1 || got.jobs[0].Job.ID != j.ID {
		t.Fatalf("long poll answered %+v", got.jobs)
	}
	if got.took > 10*time.Second {
		t.Fatalf("long poll took %v: it waited for its timeout instead of the submit", got.took)
	}
	// An empty wait ends at its deadline with no jobs.
	begin = time.Now()
	if jobs := a.claimJobs(t, "/v1/queues/lp/claim", map[string]any{"worker_id": "w", "wait_seconds": 0.3}); len(jobs) != 0 || time.Since(begin) < 300*time.Millisecond {
		t.Fatalf("empty wait: %v after %v", jobs, time.Since(begin))
	}
}

func TestHTTPWorkerHeartbeatAndProgress(t *testing.T) {
	a := start(t)
	j := a.submit(t, map[string]any{"type": "report.build"})
	got := a.claimJobs(t, "/v1/queues/default/claim", map[string]any{"worker_id": "node-1"})
	tok := got[0].Lease.Token
	var hb heartbeatResult
	a.do("POST", "/v1/jobs/"+j.ID+"/heartbeat", map[string]any{"token": tok, "progress": 40, "message": "page 4 of 10"}).decode(t, http.StatusOK, &hb)
	if time.Until(time.Time(hb.LeaseExpiresAt)) < 10*time.Second {
		t.Fatalf("lease expires at %v", time.Time(hb.LeaseExpiresAt))
	}
	var cur job.Job
	a.do("GET", "/v1/jobs/"+j.ID, nil).decode(t, http.StatusOK, &cur)
	if cur.Progress == nil || cur.Progress.Percent != 40 || cur.Progress.Message != "page 4 of 10" {
		t.Fatalf("progress = %+v", cur.Progress)
	}
	a.do("POST", "/v1/jobs/"+j.ID+"/heartbeat", map[string]any{"token": tok}).decode(t, http.StatusOK, &hb)
	for _, c := range []struct {
		body  map[string]any
		field string
	}{
		{map[string]any{}, "token"},
		{map[string]any{"token": tok, "progress": 101}, "progress"},
		{map[string]any{"token": tok, "message": "no percent"}, "progress"},
		{map[string]any{"token": tok, "progres": 5}, "progres"},
	} {
		a.do("POST", "/v1/jobs/"+j.ID+"/heartbeat", c.body).wantError(t, http.StatusBadRequest, codeInvalidArgument, c.field)
	}
	a.do("POST", "/v1/jobs/"+j.ID+"/cancel", nil).decode(t, http.StatusOK, &cur)
	a.do("POST", "/v1/jobs/"+j.ID+"/heartbeat", map[string]any{"token": tok}).wantError(t, http.StatusConflict, codeConflict, "")
	a.do("POST", "/v1/jobs/01JD0000000000000000000000/heartbeat", map[string]any{"token": tok}).wantError(t, http.StatusNotFound, codeNotFound, "")
}

func TestHTTPWorkerClaimsInOrderAndByType(t *testing.T) {
	a := start(t)
	low := a.submit(t, map[string]any{"type": "a", "queue": "q2", "priority": "high"})
	first := a.submit(t, map[string]any{"type": "a", "queue": "q1", "priority": "low"})
	other := a.submit(t, map[string]any{"type": "b", "queue": "q1"})
	// Queues in the given order: q1 before q2, whatever the priorities across them.
	got := a.claimJobs(t, "/v1/claim", map[string]any{"worker_id": "w", "queues": []string{"q1", "q2"}, "max": 1, "types": []string{"a"}})
	if len(got) != 1 || got[0].Job.ID != first.ID && got[0].Job.ID != other.ID {
		t.Fatalf("claimed %+v", got)
	}
	// Types guard a claim: q1's job of type b (normal, before the low a)
	// is parked for a worker of type b, never claimed by this one.
	rest := a.claimJobs(t, "/v1/claim", map[string]any{"worker_id": "w", "queues": []string{"q1", "q2"}, "max": 5, "types": []string{"a"}})
	ids := map[string]bool{}
	for _, c := range append(got, rest...) {
		ids[c.Job.ID] = true
	}
	if ids[other.ID] || !ids[low.ID] {
		t.Fatalf("a worker for type a claimed %v", ids)
	}
	for _, c := range []struct {
		path  string
		body  map[string]any
		field string
	}{
		{"/v1/claim", map[string]any{"queues": []string{"q1"}}, "worker_id"},
		{"/v1/claim", map[string]any{"worker_id": "w"}, "queues"},
		{"/v1/claim", map[string]any{"worker_id": "w", "queues": []string{"q1", "q1"}}, "queues[1]"},
		{"/v1/queues/q1/claim", map[string]any{"worker_id": "w", "max": 1001}, "max"},
		{"/v1/queues/q1/claim", map[string]any{"worker_id": "w", "wait_seconds": 61}, "wait_seconds"},
		{"/v1/queues/q1/claim", map[string]any{"worker_id": "w", "queues": []string{"q2"}}, "queues"},
		{"/v1/queues/q1/claim", map[string]any{"worker_id": "w", "types": []string{"bad type"}}, "types[0]"},
	} {
		a.do("POST", c.path, c.body).wantError(t, http.StatusBadRequest, codeInvalidArgument, c.field)
	}
}

func TestAPIKeyScopes(t *testing.T) {
	a := start(t, func(c *Config) {
		c.APIKeys = []string{"all-powerful", "w0rker:work", "pr0ducer:submit", "ops:admin", "odd:key:with:colons"}
	})
	bearer := func(k string) []string { return []string{"Authorization", "Bearer " + k} }
	submit := map[string]any{"type": "a"}
	claim := map[string]any{"worker_id": "w"}
	a.do("POST", "/v1/jobs", submit, bearer("w0rker")...).wantError(t, http.StatusForbidden, codePermissionDenied, "")
	a.do("POST", "/v1/jobs", submit, bearer("w0rker:work")...).wantError(t, http.StatusUnauthorized, codeUnauthenticated, "")
	var j job.Job
	a.do("POST", "/v1/jobs", submit, bearer("pr0ducer")...).decode(t, http.StatusCreated, &j)
	a.do("POST", "/v1/queues/default/claim", claim, bearer("pr0ducer")...).wantError(t, http.StatusForbidden, codePermissionDenied, "")
	a.do("POST", "/v1/jobs/"+j.ID+"/cancel", nil, bearer("pr0ducer")...).wantError(t, http.StatusForbidden, codePermissionDenied, "")
	got := a.claimJobs(t, "/v1/queues/default/claim", claim, bearer("w0rker")...)
	if len(got) != 1 {
		t.Fatalf("worker key claimed %d", len(got))
	}
	a.do("GET", "/v1/jobs/"+j.ID, nil, bearer("w0rker")...).decode(t, http.StatusOK, &j)
	a.do("POST", "/v1/jobs/"+j.ID+"/cancel", nil, bearer("ops")...).decode(t, http.StatusOK, &j)
	a.do("POST", "/v1/jobs", submit, bearer("ops")...).decode(t, http.StatusCreated, &j)
	a.do("POST", "/v1/jobs", submit, bearer("all-powerful")...).decode(t, http.StatusCreated, &j)
	a.do("POST", "/v1/jobs", submit, bearer("odd:key:with:colons")...).decode(t, http.StatusCreated, &j)
	// Public routes need no key at all.
	for _, p := range []string{"/healthz", "/readyz", "/metrics"} {
		if res := a.do("GET", p, nil); res.status != http.StatusOK {
			t.Fatalf("GET %s without a key = %d %s", p, res.status, res.body)
		}
	}
}

// HTTP claims go through the same claim script as Go workers: strict
// priority within a queue.
func TestHTTPWorkerClaimsInPriorityOrder(t *testing.T) {
	a := start(t)
	low := a.submit(t, map[string]any{"type": "a", "priority": "low"})
	normal := a.submit(t, map[string]any{"type": "a"})
	high := a.submit(t, map[string]any{"type": "a", "priority": "high"})
	var order []string
	for i := 0; i < 3; i++ {
		got := a.claimJobs(t, "/v1/queues/default/claim", map[string]any{"worker_id": "w"})
		order = append(order, got[0].Job.ID)
	}
	if order[0] != high.ID || order[1] != normal.ID || order[2] != low.ID {
		t.Fatalf("claimed %v, want high, normal, low", order)
	}
}

// Long polls over many idle queues hold at most MaxWatchers Redis
// connections in all, whatever clients ask (issue 32, finding 7: one
// blocked connection per queue starved the pool); a queue beyond them is
// polled, so its waiter still gets a job submitted to it.
func TestLongPollsHoldABoundedNumberOfConnections(t *testing.T) {
	a := start(t)
	const queues = 3 * MaxWatchers
	names := make([]string, queues)
	for i := range names {
		names[i] = "idle-" + string(rune('a'+i))
	}
	done := make(chan []claimedJob, 1)
	// One claim naming every queue but the last (whose job the last
	// queue's own waiter must get: this claim would race it for the job),
	// and one per queue.
	go func() {
		var out claimResult
		a.do("POST", "/v1/claim", map[string]any{"worker_id": "all", "queues": names[:queues-1], "wait_seconds": 8}).decode(t, http.StatusOK, &out)
	}()
	for _, n := range names[:queues-1] {
		go func() {
			var out claimResult
			a.do("POST", "/v1/queues/"+n+"/claim", map[string]any{"worker_id": "w-" + n, "wait_seconds": 8}).decode(t, http.StatusOK, &out)
		}()
	}
	last := names[queues-1]
	go func() {
		done <- a.claimJobs(t, "/v1/queues/"+last+"/claim", map[string]any{"worker_id": "w-last", "types": []string{"x"}, "wait_seconds": 8})
	}()
	rdb := a.redis.Client()
	blocked := func() int {
		info := rdb.Info(context.Background(), "clients").Val()
		for _, line := range strings.Split(info, "\n") {
			if v, ok := strings.CutPrefix(line, "blocked_clients:"); ok {
				n, _ := strconv.Atoi(strings.TrimSpace(v))
				return n
			}
		}
		return -1
	}
	queuetest.Eventually(t, 10*time.Second, "the watchers to block", func() bool { return blocked() == MaxWatchers })
	for range 20 {
		if n := blocked(); n > MaxWatchers {
			t.Fatalf("%d blocked Redis connections for long polls; want at most %d", n, MaxWatchers)
		}
	}
	// Submits go through meanwhile, and a polled queue's waiter gets its job.
	start := time.Now()
	j := a.submit(t, map[string]any{"queue": last, "type": "x"})
	select {
	case got := <-done:
		if len(got) != 1 || got[0].Job.ID != j.ID {
			t.Fatalf("the waiter of %s claimed %+v", last, got)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("the waiter of %s did not get the job submitted to it", last)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("submit and claim took %v", d)
	}
}

// A claim whose client left before the answer gives its leases back at
// once (queued again, the attempt not counted), instead of letting them
// expire as a lost attempt (issue 32, finding 8).
func TestUnansweredClaimGivesItsLeasesBack(t *testing.T) {
	a := start(t)
	j := a.submit(t, map[string]any{"type": "a"})
	leases, err := a.q.Claim(context.Background(), "default", 1, "gone")
	if err != nil || len(leases) != 1 {
		t.Fatalf("claim: %v, %v", leases, err)
	}
	a.s.giveBack(context.Background(), []claimedJob{{Job: leases[0].Job, Lease: leaseInfo{Token: leases[0].Token}}})
	var got job.Job
	a.do("GET", "/v1/jobs/"+j.ID, nil).decode(t, http.StatusOK, &got)
	if got.State != job.Queued || got.Attempt != 0 {
		t.Fatalf("job after the give-back = %s attempt %d; want queued, attempt 0", got.State, got.Attempt)
	}
}

func TestHTTPWorkerReleaseGivesTheLeaseBack(t *testing.T) {
	a := start(t)
	j := a.submit(t, map[string]any{"type": "a", "max_attempts": 3})
	got := a.claimJobs(t, "/v1/queues/default/claim", map[string]any{"worker_id": "py-1"})
	if len(got) != 1 || got[0].Job.Attempt != 1 {
		t.Fatalf("claimed %+v", got)
	}
	tok := got[0].Lease.Token
	// A stale token is refused and changes nothing.
	a.do("POST", "/v1/jobs/"+j.ID+"/release", map[string]any{"token": tok + "9", "worker_id": "py-1"}).wantError(t, http.StatusConflict, codeConflict, "")
	a.do("POST", "/v1/jobs/"+j.ID+"/release", map[string]any{"worker_id": "py-1"}).wantError(t, http.StatusBadRequest, codeInvalidArgument, "token")
	a.do("POST", "/v1/jobs/nosuchjob/release", map[string]any{"token": tok}).wantError(t, http.StatusNotFound, codeNotFound, "")
	var cur job.Job
	a.do("GET", "/v1/jobs/"+j.ID, nil).decode(t, http.StatusOK, &cur)
	if cur.State != job.Active {
		t.Fatalf("after a stale release: %+v", cur)
	}
	var out releaseResult
	a.do("POST", "/v1/jobs/"+j.ID+"/release", map[string]any{"token": tok, "worker_id": "py-1"}).decode(t, http.StatusOK, &out)
	if out.State != "queued" {
		t.Fatalf("release = %+v", out)
	}
	a.do("GET", "/v1/jobs/"+j.ID, nil).decode(t, http.StatusOK, &cur)
	if cur.State != job.Queued || cur.Attempt != 0 {
		t.Fatalf("after release: state %s attempt %d, want queued at attempt 0", cur.State, cur.Attempt)
	}
	// The lease is gone: the old token is refused everywhere.
	a.do("POST", "/v1/jobs/"+j.ID+"/release", map[string]any{"token": tok}).wantError(t, http.StatusConflict, codeConflict, "")
	a.do("POST", "/v1/jobs/"+j.ID+"/complete", map[string]any{"token": tok}).wantError(t, http.StatusConflict, codeConflict, "")
	// It is claimed again at once, as attempt 1.
	again := a.claimJobs(t, "/v1/queues/default/claim", map[string]any{"worker_id": "py-2"})
	if len(again) != 1 || again[0].Job.ID != j.ID || again[0].Job.Attempt != 1 {
		t.Fatalf("claimed again %+v", again)
	}
}

// TestHTTPWorkerOutcomes: the protocol's outcomes beside complete and plain
// fail: a fail with retry_in_seconds (due then, not after the backoff), a
// fail with cancel true (cancelled, not dead), a snooze (the attempt given
// back); bad combinations are refused with nothing changed; the registry
// shows a worker's types, kept across its heartbeats.
func TestHTTPWorkerOutcomes(t *testing.T) {
	a := start(t)
	hour := map[string]any{"base_seconds": 3600, "max_seconds": 3600}
	later := a.submit(t, map[string]any{"type": "t", "backoff": hour})
	stop := a.submit(t, map[string]any{"type": "t"})
	nap := a.submit(t, map[string]any{"type": "t", "max_attempts": 1})
	got := a.claimJobs(t, "/v1/queues/default/claim", map[string]any{"worker_id": "py-1", "max": 3, "types": []string{"t"}})
	if len(got) != 3 {
		t.Fatalf("claimed %d", len(got))
	}
	tok := map[string]string{}
	for _, c := range got {
		tok[c.Job.ID] = c.Lease.Token
	}
	for _, c := range []struct {
		path  string
		body  map[string]any
		field string
	}{
		{"/v1/jobs/" + later.ID + "/fail", map[string]any{"token": tok[later.ID], "error": "x", "retry_in_seconds": 0}, "retry_in_seconds"},
		{"/v1/jobs/" + later.ID + "/fail", map[string]any{"token": tok[later.ID], "error": "x", "retry_in_seconds": 4e7}, "retry_in_seconds"},
		{"/v1/jobs/" + later.ID + "/fail", map[string]any{"token": tok[later.ID], "error": "x", "retry_in_seconds": 5, "retry": false}, "retry_in_seconds"},
		{"/v1/jobs/" + later.ID + "/fail", map[string]any{"token": tok[later.ID], "error": "x", "cancel": true, "retry": true}, "cancel"},
		{"/v1/jobs/" + nap.ID + "/snooze", map[string]any{"token": tok[nap.ID], "delay_seconds": -1}, "delay_seconds"},
	} {
		a.do("POST", c.path, c.body).wantError(t, http.StatusBadRequest, codeInvalidArgument, c.field)
	}
	var out outcomeResult
	before := time.Now()
	a.do("POST", "/v1/jobs/"+later.ID+"/fail", map[string]any{"token": tok[later.ID], "error": "429", "retry_in_seconds": 30}).decode(t, http.StatusOK, &out)
	var j job.Job
	a.do("GET", "/v1/jobs/"+later.ID, nil).decode(t, http.StatusOK, &j)
	if out.State != "scheduled" || j.RunAt.Before(before.Add(29*time.Second)) || j.RunAt.After(time.Now().Add(31*time.Second)) || j.Attempt != 1 {
		t.Fatalf("fail with retry_in_seconds 30: %s, run_at in %v, attempt %d", out.State, time.Until(j.RunAt), j.Attempt)
	}
	a.do("POST", "/v1/jobs/"+stop.ID+"/fail", map[string]any{"token": tok[stop.ID], "error": "order deleted", "cancel": true}).decode(t, http.StatusOK, &out)
	a.do("GET", "/v1/jobs/"+stop.ID, nil).decode(t, http.StatusOK, &j)
	if out.State != "cancelled" || j.State != job.Cancelled || j.LastError != "order deleted" {
		t.Fatalf("fail with cancel: %s, job %s %q", out.State, j.State, j.LastError)
	}
	a.do("POST", "/v1/jobs/"+nap.ID+"/snooze", map[string]any{"token": tok[nap.ID], "delay_seconds": 0, "reason": "not yet"}).decode(t, http.StatusOK, &out)
	a.do("GET", "/v1/jobs/"+nap.ID, nil).decode(t, http.StatusOK, &j)
	if out.State != "queued" || j.State != job.Queued || j.MaxAttempts != 2 {
		t.Fatalf("snooze: %s, job %s max_attempts %d", out.State, j.State, j.MaxAttempts)
	}
	// The snoozed job runs again, as attempt 2 of 2.
	again := a.claimJobs(t, "/v1/queues/default/claim", map[string]any{"worker_id": "py-1", "types": []string{"t"}})
	if len(again) != 1 || again[0].Job.ID != nap.ID || again[0].Job.Attempt != 2 {
		t.Fatalf("after the snooze claimed %+v", again)
	}
	a.do("POST", "/v1/jobs/"+nap.ID+"/heartbeat", map[string]any{"token": again[0].Lease.Token, "worker_id": "py-1"}).decode(t, http.StatusOK, nil)
	var ws workerList
	a.do("GET", "/v1/workers", nil).decode(t, http.StatusOK, &ws)
	if len(ws.Workers) != 1 || strings.Join(ws.Workers[0].Types, ",") != "t" {
		t.Fatalf("workers = %+v, want py-1 with types [t]", ws.Workers)
	}
}
