package hatest_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/sundialhq/sundial/internal/hatest"
	"github.com/sundialhq/sundial/internal/proctest"
	"github.com/sundialhq/sundial/pkg/job"
)

// TestChildrenAcrossShards: on the 3-master Cluster, a durable parent in a
// queue of one master runs 20 children in queues of the two others
// (RunChildren) and waits for them parked; its worker, a program written
// with the Go library, is killed (-9) and restarted once the children were
// submitted. The
// parent succeeds with every child's result, in order, each child ran.
func TestChildrenAcrossShards(t *testing.T) {
	cl := hatest.StartCluster(t)
	on := cl.QueuesOnShards("kin", 1)
	parentQ, kidQs := on[0][0], []string{on[1][0], on[2][0]}
	s := startStack(t, cl.Seeds(), []string{parentQ, kidQs[0], kidQs[1]}, 0, "SUNDIAL_HISTORY=off")
	env := []string{"SUNDIAL_REDIS_URL=" + cl.Seeds(), "SUNDIAL_LOG_LEVEL=warn", "SUNDIAL_LEASE_TTL=2s", "SUNDIAL_LEASE_GRACE=300ms",
		"SUNDIAL_QUEUES=" + parentQ + "," + kidQs[0] + "," + kidQs[1], "SUNDIAL_WORKER_ID=kin-worker", "SINK_URL=http://127.0.0.1:9"}
	w := proctest.Start(t, proctest.Program(t, "github.com/sundialhq/sundial/internal/e2e/durableworker"), env...)
	const n = 20
	code, b, err := s.Call("POST", "/v1/jobs", map[string]any{"queue": parentQ, "type": "fanout", "max_attempts": 10,
		"payload": map[string]any{"queues": kidQs, "n": n}}, 30*time.Second)
	var parent job.Job
	if err != nil || code != http.StatusCreated || json.Unmarshal(b, &parent) != nil {
		t.Fatalf("submit: %d %s %v", code, b, err)
	}
	get := func() job.Job {
		var j job.Job
		if code, b, err := s.Call("GET", "/v1/jobs/"+parent.ID, nil, 10*time.Second); err == nil && code == http.StatusOK {
			_ = json.Unmarshal(b, &j)
		}
		return j
	}
	// The children are submitted (the step that did it is recorded): the
	// parent is parked, or about to be, or woken already.
	hatest.Eventually(t, 60*time.Second, "the parent to submit its children", func() bool {
		j := get()
		return j.Durable != nil && len(j.Durable.Steps) > 0
	})
	w.Kill()
	w.Restart(t)
	var j job.Job
	hatest.Eventually(t, 90*time.Second, "the parent to succeed", func() bool { j = get(); return j.State == job.Succeeded })
	var res []string
	if err := json.Unmarshal(j.Result, &res); err != nil || len(res) != n {
		t.Fatalf("result %s (%v)", j.Result, err)
	}
	for i, r := range res {
		if want := fmt.Sprintf("%s:succeeded:%d", kidQs[i%2], i*10); r != want {
			t.Fatalf("child %d: %q, want %q", i, r, want)
		}
	}
	s.alive()
}
