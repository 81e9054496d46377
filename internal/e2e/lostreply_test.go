package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/sundialhq/sundial/internal/netfault"
	"github.com/sundialhq/sundial/internal/proctest"
	"github.com/sundialhq/sundial/pkg/job"
	"github.com/sundialhq/sundial/pkg/queue"
	"github.com/sundialhq/sundial/pkg/queue/queuetest"
)

// TestLostRepliesFromOutside: the API and a worker reach Redis through
// proxies that forward a script call, drop Redis' answer and reset the
// connection, so the binaries' go-redis sends the call again. A submit
// answered 201 is queued once (not twice), and a job whose claim answer
// was lost runs on its one attempt (it used to end dead with "lease
// expired" without ever running).
func TestLostRepliesFromOutside(t *testing.T) {
	t.Parallel()
	srv := queuetest.Start(t)
	apiProxy := netfault.Start(t, srv.Addr())
	workerProxy := netfault.Start(t, srv.Addr())
	addr := proctest.FreeAddr(t)
	via := func(p *netfault.Proxy) string { return "SUNDIAL_REDIS_URL=redis://" + p.Addr() + "/0" }
	startProc(t, binary(t, "api"), serviceEnv(srv, "SUNDIAL_HTTP_ADDR="+addr, "SUNDIAL_HISTORY=off", via(apiProxy))...)
	startProc(t, binary(t, "worker"), serviceEnv(srv, "SUNDIAL_QUEUES=lost", via(workerProxy))...)
	startProc(t, binary(t, "poller"), serviceEnv(srv, "SUNDIAL_QUEUES=lost", "SUNDIAL_HISTORY=off")...)
	api := &proctest.API{HTTP: &http.Client{Timeout: 10 * time.Second}, URLs: []string{"http://" + addr}}
	queuetest.Eventually(t, 30*time.Second, "the API ready", func() bool { return proctest.Ready(api.HTTP, api.URLs[0]) })
	ctx := context.Background()
	q := queue.New(srv.Client(), queue.Options{})
	submit := func(body map[string]any) string {
		t.Helper()
		code, b, err := api.Call("POST", "/v1/jobs", body, 30*time.Second)
		var j job.Job
		if err != nil || code != http.StatusCreated || json.Unmarshal(b, &j) != nil {
			t.Fatalf("submit: %d %s %v", code, b, err)
		}
		return j.ID
	}
	waitSucceeded := func(id string) *job.Job {
		t.Helper()
		var got *job.Job
		queuetest.Eventually(t, 20*time.Second, "job "+id+" to end", func() bool {
			j, err := q.Get(ctx, id)
			got = j
			return err == nil && j.State.Final()
		})
		if got.State != job.Succeeded || got.Attempt != 1 {
			t.Fatalf("job %s ended %s after %d attempts (%q), want succeeded on its first", id, got.State, got.Attempt, got.LastError)
		}
		return got
	}
	// Warm up: both binaries have loaded the scripts and run a job.
	waitSucceeded(submit(map[string]any{"type": "sundial.echo", "queue": "lost"}))

	// A submit's answer lost, into a paused queue so that its list can be
	// read before a worker takes the job.
	if code, b, err := api.Call("POST", "/v1/queues/lost/pause", map[string]any{}, 30*time.Second); err != nil || code != http.StatusOK {
		t.Fatalf("pause: %d %s %v", code, b, err)
	}
	apiProxy.DropReply("_submit\r\n", 1)
	id := submit(map[string]any{"type": "sundial.echo", "queue": "lost", "max_attempts": 1})
	if apiProxy.Dropped.Load() != 1 {
		t.Fatalf("%d replies dropped: the submit's answer was not lost", apiProxy.Dropped.Load())
	}
	listed := 0
	for _, x := range srv.Client().LRange(ctx, "sundial:{lost}:normal", 0, -1).Val() {
		if x == id {
			listed++
		}
	}
	if listed != 1 {
		t.Fatalf("the job is listed %d times in its queue after a submit whose answer was lost, want 1", listed)
	}
	if code, b, err := api.Call("POST", "/v1/queues/lost/resume", map[string]any{}, 30*time.Second); err != nil || code != http.StatusOK {
		t.Fatalf("resume: %d %s %v", code, b, err)
	}
	waitSucceeded(id)

	// A claim's answer lost (the worker claims alone or with its outcomes:
	// claim or cycle), for jobs with one attempt. The worker may have sent
	// its next claim already (pipelined behind its wait for work): jobs
	// are submitted until one of its claims loses its answer.
	before := workerProxy.Dropped.Load()
	workerProxy.DropReply("_claim\r\n", 1)
	workerProxy.DropReply("_cycle\r\n", 1)
	for i := 0; i < 10 && workerProxy.Dropped.Load() == before; i++ {
		waitSucceeded(submit(map[string]any{"type": "sundial.echo", "queue": "lost", "max_attempts": 1}))
	}
	if workerProxy.Dropped.Load() == before {
		t.Fatal("no claim answer was dropped: the test did not test a lost claim")
	}
	workerProxy.Disarm()
	waitSucceeded(submit(map[string]any{"type": "sundial.echo", "queue": "lost", "max_attempts": 1}))
}
