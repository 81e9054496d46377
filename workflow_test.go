package sundial_test

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/sundialhq/sundial"
	"github.com/sundialhq/sundial/pkg/job"
)

// runWorkflowRunner starts a Runner (worker and poller) over queues whose
// handler of "step" succeeds and of "boom" ends dead at once.
func runWorkflowRunner(t *testing.T, queues ...string) {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	_, rdb := newClient(t)
	r := sundial.NewRunner(rdb, sundial.RunnerConfig{Queues: queues, Concurrency: 4})
	r.HandleFunc("step", func(ctx context.Context, j *sundial.Record) (any, error) { return j.Queue, nil })
	r.HandleFunc("boom", func(ctx context.Context, j *sundial.Record) (any, error) {
		return nil, sundial.NoRetry(errors.New("boom"))
	})
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	t.Cleanup(func() {
		stop()
		<-done
	})
}

// waitAll waits until every step's job ended and returns them by name.
func waitAll(t *testing.T, c *sundial.Client, run *sundial.WorkflowRun) map[string]*sundial.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out := map[string]*sundial.Record{}
	for name, s := range run.Steps {
		j, err := c.Wait(ctx, s.Job.ID)
		if err != nil {
			t.Fatalf("wait for %s: %v", name, err)
		}
		out[name] = j
	}
	return out
}

// requireOrder fails unless each step of after started once the steps it
// names finished.
func requireOrder(t *testing.T, jobs map[string]*sundial.Record, after map[string][]string) {
	t.Helper()
	for step, deps := range after {
		for _, d := range deps {
			s, dj := jobs[step], jobs[d]
			if s.StartedAt == nil || dj.FinishedAt == nil || s.StartedAt.Before(*dj.FinishedAt) {
				t.Errorf("%s started at %v, before %s finished at %v", step, s.StartedAt, d, dj.FinishedAt)
			}
		}
	}
}

// TestWorkflowThreeLevels: a 3-level DAG in one queue runs in order, and a
// second Submit of the same workflow stores nothing new.
func TestWorkflowThreeLevels(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, _ := newClient(t)
	q := "wf-three"
	wf := sundial.NewWorkflow(sundial.WithID("three-levels"))
	extract := wf.Step("extract", sundial.Job{Type: "step", Queue: q})
	left := wf.Step("left", sundial.Job{Type: "step", Queue: q}, sundial.After(extract))
	right := wf.Step("right", sundial.Job{Type: "step", Queue: q}, sundial.After(extract))
	wf.Step("load", sundial.Job{Type: "step", Queue: q}, sundial.After(left, right))
	run, err := wf.Submit(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if run.ID != "three-levels" || len(run.Steps) != 4 || run.Steps["load"].Job.State != sundial.Waiting {
		t.Fatalf("run %+v", run)
	}
	if k := run.Steps["left"].Job.IdempotencyKey; k != "wf:three-levels:left" {
		t.Fatalf("idempotency key %q", k)
	}
	again, err := wf.Submit(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	for name, s := range again.Steps {
		if !s.Duplicate || s.Job.ID != run.Steps[name].Job.ID {
			t.Fatalf("again: %s %+v, first %s", name, s, run.Steps[name].Job.ID)
		}
	}
	runWorkflowRunner(t, q)
	jobs := waitAll(t, c, run)
	for name, j := range jobs {
		if j.State != sundial.Succeeded {
			t.Fatalf("%s ended %s", name, j.State)
		}
	}
	requireOrder(t, jobs, map[string][]string{"left": {"extract"}, "right": {"extract"}, "load": {"left", "right"}})
	if info, _ := c.QueueInfo(ctx, q); info.Submitted != 4 {
		t.Fatalf("submitted %d jobs, want 4", info.Submitted)
	}
}

// TestWorkflowRefusesBadSteps: a workflow with a mistake anywhere stores
// nothing, and the error names the step at fault.
func TestWorkflowRefusesBadSteps(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, _ := newClient(t)
	const q = "wf-refused"
	ok := sundial.Job{Type: "step", Queue: q}
	for _, tc := range []struct {
		name, field string
		build       func(wf *sundial.Workflow)
	}{
		{"bad job", "steps[2].job.priority", func(wf *sundial.Workflow) {
			a := wf.Step("a", ok)
			wf.Step("b", ok, sundial.After(a))
			wf.Step("c", sundial.Job{Type: "step", Queue: q, Priority: "urgent"}, sundial.After(a))
		}},
		{"name twice", "steps[1].name", func(wf *sundial.Workflow) {
			wf.Step("a", ok)
			wf.Step("a", ok)
		}},
		{"bad name", "steps[0].name", func(wf *sundial.Workflow) { wf.Step("a b", ok) }},
		{"cycle", "steps[1].after[0]", func(wf *sundial.Workflow) {
			a := wf.Step("a", ok)
			b := wf.Step("b", ok, sundial.After(a))
			c := wf.Step("c", ok, sundial.After(b))
			sundial.After(c)(a) // an option applied late closes the cycle
		}},
		{"step of another workflow", "steps[0].after[0]", func(wf *sundial.Workflow) {
			other := sundial.NewWorkflow().Step("x", ok)
			wf.Step("a", ok, sundial.After(other))
		}},
		{"depends_on", "steps[1].job.depends_on", func(wf *sundial.Workflow) {
			wf.Step("a", ok)
			wf.Step("b", sundial.Job{Type: "step", Queue: q, DependsOn: []string{"#0"}})
		}},
		{"a second queue's bad job", "steps[1].job.queue", func(wf *sundial.Workflow) {
			a := wf.Step("a", ok)
			wf.Step("b", sundial.Job{Type: "step", Queue: "Bad Queue"}, sundial.After(a))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wf := sundial.NewWorkflow()
			tc.build(wf)
			run, err := wf.Submit(ctx, c)
			var fe *job.FieldError
			if run != nil || !errors.As(err, &fe) || fe.Field != tc.field {
				t.Fatalf("got %+v, %v; want a field error of %s", run, err, tc.field)
			}
			t.Log(err)
		})
	}
	if info, err := c.QueueInfo(ctx, q); err != nil || info.Submitted != 0 {
		t.Fatalf("queue %s: %+v %v; want nothing stored", q, info, err)
	}
	if _, err := sundial.NewWorkflow(sundial.WithID("no spaces")).Submit(ctx, c); err == nil {
		t.Fatal("a bad id was taken")
	}
}

// TestWorkflowAcrossQueues: a DAG over three queues runs in order with a
// Runner serving them all; a step that comes back to the first queue after
// the others is stored once they are; a step that ends dead cancels the
// step after it and lets the one with DependencyRun run.
func TestWorkflowAcrossQueues(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, _ := newClient(t)
	q1, q2, q3 := "wf-x1", "wf-x2", "wf-x3"
	wf := sundial.NewWorkflow(sundial.WithID("across"))
	extract := wf.Step("extract", sundial.Job{Type: "step", Queue: q1})
	check := wf.Step("check", sundial.Job{Type: "step", Queue: q1}, sundial.After(extract))
	transform := wf.Step("transform", sundial.Job{Type: "step", Queue: q2}, sundial.After(extract))
	index := wf.Step("index", sundial.Job{Type: "step", Queue: q2}, sundial.After(transform))
	load := wf.Step("load", sundial.Job{Type: "step", Queue: q3}, sundial.After(transform, check))
	wf.Step("notify", sundial.Job{Type: "step", Queue: q1}, sundial.After(load, index, extract))
	boom := wf.Step("boom", sundial.Job{Type: "boom", Queue: q2}, sundial.After(extract))
	wf.Step("skipped", sundial.Job{Type: "step", Queue: q3}, sundial.After(boom))
	wf.Step("cleanup", sundial.Job{Type: "step", Queue: q1, OnDependencyFailure: sundial.DependencyRun}, sundial.After(boom))
	run, err := wf.Submit(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	runWorkflowRunner(t, q1, q2, q3)
	jobs := waitAll(t, c, run)
	want := map[string]sundial.State{"skipped": sundial.Cancelled, "boom": sundial.Dead}
	for name, j := range jobs {
		w, ok := want[name]
		if !ok {
			w = sundial.Succeeded
		}
		if j.State != w {
			t.Errorf("%s ended %s, want %s (%s)", name, j.State, w, j.LastError)
		}
	}
	requireOrder(t, jobs, map[string][]string{
		"check": {"extract"}, "transform": {"extract"}, "index": {"transform"},
		"load": {"transform", "check"}, "notify": {"load", "index", "extract"}, "cleanup": {"boom"},
	})
	if jobs["cleanup"].Queue != q1 || jobs["load"].Queue != q3 {
		t.Fatalf("queues: %s %s", jobs["cleanup"].Queue, jobs["load"].Queue)
	}
}

// TestWorkflowEndedBeforeStored: a step whose earlier step of its queue
// already ended dead is not stored, and the error says which.
func TestWorkflowEndedBeforeStored(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, _ := newClient(t)
	q1, q2 := "wf-ended1", "wf-ended2"
	wf2 := sundial.NewWorkflow(sundial.WithID("ended"))
	a2 := wf2.Step("a", sundial.Job{Type: "x", Queue: q1})
	b2 := wf2.Step("b", sundial.Job{Type: "x", Queue: q2}, sundial.After(a2))
	wf2.Step("c", sundial.Job{Type: "x", Queue: q1}, sundial.After(a2, b2))
	run, err := wf2.Submit(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Cancel(ctx, run.Steps["a"].Job.ID); err != nil {
		t.Fatal(err)
	}
	// The workflow again with a new step "d" after "a": "a" and "b" are
	// the stored jobs, and "a" was cancelled, so "d" cannot be stored.
	wf3 := sundial.NewWorkflow(sundial.WithID("ended"))
	a3 := wf3.Step("a", sundial.Job{Type: "x", Queue: q1})
	b3 := wf3.Step("b", sundial.Job{Type: "x", Queue: q2}, sundial.After(a3))
	d3 := wf3.Step("d", sundial.Job{Type: "x", Queue: q1}, sundial.After(a3, b3))
	wf3.Step("e", sundial.Job{Type: "x", Queue: q1}, sundial.After(b3)) // in d's call
	wf3.Step("f", sundial.Job{Type: "x", Queue: q2}, sundial.After(d3))
	wf3.Step("g", sundial.Job{Type: "x", Queue: q2})
	run, err = wf3.Submit(ctx, c)
	var ee *sundial.StepEndedError
	if !errors.As(err, &ee) || ee.Step != "d" || ee.After != "a" || ee.State != "cancelled" || !reflect.DeepEqual(ee.Skipped, []string{"d", "f"}) {
		t.Fatalf("err %v", err)
	}
	t.Log(err)
	if run == nil || !run.Steps["a"].Duplicate || !run.Steps["b"].Duplicate || run.Steps["e"].Job == nil || run.Steps["g"].Job == nil {
		t.Fatalf("run %+v", run)
	}
	if _, ok := run.Steps["d"]; ok {
		t.Fatal("d was stored")
	}
	if _, ok := run.Steps["f"]; ok {
		t.Fatal("f was stored")
	}
}
