package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/sundialhq/sundial/internal/proctest"
	"github.com/sundialhq/sundial/pkg/job"
	"github.com/sundialhq/sundial/pkg/queue"
	"github.com/sundialhq/sundial/pkg/queue/queuetest"
)

// The example workers of examples/ (Python with its standard library, Node
// with fetch) run the built-in job types against the real API: every job
// runs once and succeeds; a worker killed mid-job loses its lease and the
// job is finished by the other.
func TestExampleHTTPWorkers(t *testing.T) {
	python, node := proctest.NeedTool(t, "python3"), proctest.NeedTool(t, "node")
	srv := queuetest.Start(t)
	addr := proctest.FreeAddr(t)
	env := serviceEnv(srv, "SUNDIAL_HISTORY=off", "SUNDIAL_HTTP_ADDR="+addr, "SUNDIAL_API_KEYS=producer:submit,w0rker:work")
	proctest.Start(t, proctest.Binary(t, "api"), env...)
	proctest.Start(t, proctest.Binary(t, "poller"), env...)
	base := "http://" + addr
	queuetest.Eventually(t, 30*time.Second, "the API", func() bool { return proctest.Ready(http.DefaultClient, base) })
	workerEnv := []string{"SUNDIAL_URL=" + base, "SUNDIAL_API_KEY=w0rker", "SUNDIAL_QUEUES=polyglot"}
	py := proctest.StartCmd(t, []string{python, "../../examples/python_worker.py"}, append(workerEnv, "SUNDIAL_WORKER_ID=py")...)
	nd := proctest.StartCmd(t, []string{node, "../../examples/node_worker.mjs"}, append(workerEnv, "SUNDIAL_WORKER_ID=node")...)

	submit := func(spec map[string]any) string {
		t.Helper()
		spec["queue"] = "polyglot"
		b, _ := json.Marshal(spec)
		req, _ := http.NewRequest("POST", base+"/v1/jobs", bytes.NewReader(b))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer producer")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var j job.Job
		if res.StatusCode != http.StatusCreated || json.NewDecoder(res.Body).Decode(&j) != nil {
			t.Fatalf("submit: %d", res.StatusCode)
		}
		return j.ID
	}
	q := queue.New(srv.Client(), queue.Options{})
	ctx := context.Background()
	type want struct {
		id      string
		attempt int
		result  string // expected result JSON; "" = not checked
	}
	var jobs []want
	for i := 0; i < 20; i++ {
		jobs = append(jobs,
			want{submit(map[string]any{"type": "sundial.echo", "payload": map[string]any{"i": i}}), 1, fmt.Sprintf(`{"i":%d}`, i)},
			want{submit(map[string]any{"type": "sundial.sleep", "payload": map[string]any{"ms": 40}}), 1, `{"slept_ms":40}`},
			want{submit(map[string]any{"type": "sundial.fail", "payload": map[string]any{"times": 1}, "backoff": map[string]any{"base_seconds": 0, "max_seconds": 0}}), 2, `{"failed_attempts":1}`},
		)
	}
	for _, w := range jobs {
		queuetest.Eventually(t, 60*time.Second, "job "+w.id+" to succeed", func() bool {
			j, err := q.Get(ctx, w.id)
			return err == nil && j.State == job.Succeeded
		})
		j, _ := q.Get(ctx, w.id)
		var got bytes.Buffer
		_ = json.Compact(&got, j.Result)
		if j.Attempt != w.attempt || got.String() != w.result {
			t.Fatalf("job %s (%s): %d attempts, result %s; want %d, %s", j.ID, j.Type, j.Attempt, j.Result, w.attempt, w.result)
		}
	}
	// Both workers took part and are in the registry.
	ws, err := q.Workers(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, w := range ws {
		seen[w.ID] = true
	}
	if !seen["py"] || !seen["node"] {
		t.Fatalf("workers = %v", seen)
	}

	// Kill the worker that runs a long job in its middle: its lease runs
	// out (SUNDIAL_LEASE_TTL=1s) and the other worker finishes the job.
	// Either worker may claim it, so the test follows whichever did.
	long := submit(map[string]any{"type": "sundial.sleep", "payload": map[string]any{"ms": 3000}, "backoff": map[string]any{"base_seconds": 0, "max_seconds": 0}})
	var first string
	queuetest.Eventually(t, 30*time.Second, "the long job to run and report progress", func() bool {
		j, err := q.Get(ctx, long)
		if err == nil && j.State == job.Active && j.Progress != nil {
			first = j.WorkerID
		}
		return first != ""
	})
	other := map[string]string{"py": "node", "node": "py"}[first]
	if other == "" {
		t.Fatalf("the long job runs on worker %q; want py or node", first)
	}
	map[string]*proctest.Proc{"py": py, "node": nd}[first].Kill()
	queuetest.Eventually(t, 60*time.Second, "the long job to be finished by the "+other+" worker", func() bool {
		j, err := q.Get(ctx, long)
		return err == nil && j.State == job.Succeeded
	})
	j, _ := q.Get(ctx, long)
	if j.Attempt != 2 || j.WorkerID != other {
		t.Fatalf("long job = attempt %d on %s; want attempt 2 on %s", j.Attempt, j.WorkerID, other)
	}
}
