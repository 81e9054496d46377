package e2e

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/sundialhq/sundial/pkg/job"
	"github.com/sundialhq/sundial/pkg/queue"
	"github.com/sundialhq/sundial/pkg/queue/queuetest"
)

// TestWorkflowSurvivesRedisKill: a 4-level DAG over three queues (31 jobs,
// 50 edges, 40 of them across queues, settled by the poller) runs with a
// poller and a worker process while Redis is killed (-9) and restarted from
// its append-only file mid-way. Every job ends succeeded exactly once (one
// succeeded event), and none started before every job it depends on had
// ended: every edge was settled once, none lost, none early.
func TestWorkflowSurvivesRedisKill(t *testing.T) {
	t.Parallel()
	start := time.Now()
	srv, q := durableStack(t, "wfa,wfb,wfc")
	rdb := srv.Client()
	ctx := context.Background()

	build := func(queueName string, deps []string) *job.Job {
		t.Helper()
		j, err := (&job.Spec{Queue: queueName, Type: "sundial.sleep", Payload: json.RawMessage(`{"ms":150}`), DependsOn: deps}).Build(time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := q.Submit(ctx, []*job.Job{j}); err != nil {
			t.Fatal(err)
		}
		return j
	}
	ids := func(js []*job.Job) []string {
		out := make([]string, len(js))
		for i, j := range js {
			out[i] = j.ID
		}
		return out
	}
	var l1, l2, l3 []*job.Job
	for range 10 {
		l1 = append(l1, build("wfa", nil))
	}
	for i := range 10 {
		l2 = append(l2, build("wfb", ids([]*job.Job{l1[i], l1[(i+1)%10]})))
	}
	for i := range 10 {
		l3 = append(l3, build("wfc", ids([]*job.Job{l2[i], l2[(i+3)%10]})))
	}
	fanIn := build("wfa", ids(l3))
	all := append(append(append(append([]*job.Job{}, l1...), l2...), l3...), fanIn)
	parents := map[string][]string{}
	for _, j := range all {
		parents[j.ID] = j.DependsOn
	}

	// Mid-way: once a level-2 job has succeeded, and before level 3 ends.
	state := func(id string) job.State {
		j, err := q.Get(ctx, id)
		if err != nil {
			return ""
		}
		return j.State
	}
	queuetest.Eventually(t, 60*time.Second, "a level-2 job succeeded", func() bool {
		for _, j := range l2 {
			if state(j.ID) == job.Succeeded {
				return true
			}
		}
		return false
	})
	if state(fanIn.ID) != job.Waiting {
		t.Fatalf("the fan-in job is %s before the kill; the workflow ran too fast to test", state(fanIn.ID))
	}
	srv.Restart()
	killedAt := time.Since(start)

	queuetest.Eventually(t, 120*time.Second, "every job of the workflow succeeded", func() bool {
		for _, j := range all {
			if state(j.ID) != job.Succeeded {
				return false
			}
		}
		return true
	})
	ended := map[string]time.Time{}
	began := map[string]time.Time{}
	for _, j := range all {
		got, err := q.Get(ctx, j.ID)
		if err != nil || got.StartedAt == nil || got.FinishedAt == nil {
			t.Fatalf("job %s: %+v %v", j.ID, got, err)
		}
		began[j.ID], ended[j.ID] = *got.StartedAt, *got.FinishedAt
	}
	for child, ps := range parents {
		for _, p := range ps {
			if began[child].Before(ended[p]) {
				t.Errorf("job %s started at %v, before its dependency %s ended at %v", child, began[child], p, ended[p])
			}
		}
	}
	for _, name := range []string{"wfa", "wfb", "wfc"} {
		for id, c := range eventCounts(t, rdb, name) {
			if c["succeeded"] != 1 || c["cancelled"] != 0 || c["dead"] != 0 {
				t.Errorf("job %s in %s: events %v", id, name, c)
			}
		}
	}
	t.Logf("a 31-job DAG over 3 queues, Redis killed (-9) at %.1fs and restarted from its AOF: done in %.1fs",
		killedAt.Seconds(), time.Since(start).Seconds())
}

// durableStack starts a Redis that fsyncs every write (also after a
// restart, so that kill -9 loses nothing acknowledged), a poller, and a
// worker of 4 slots serving queues (comma-separated).
func durableStack(t *testing.T, queues string) (*queuetest.Server, *queue.Client) {
	t.Helper()
	srv := queuetest.StartWith(t, "--appendfsync", "always")
	startProc(t, binary(t, "poller"), serviceEnv(srv)...)
	startProc(t, binary(t, "worker"), serviceEnv(srv, "SUNDIAL_QUEUES="+queues, "SUNDIAL_CONCURRENCY=4")...)
	return srv, queue.New(srv.Client(), queue.Options{})
}
